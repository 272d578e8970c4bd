"""An integer too long to read (more digits than Python converts, ``sys.get_int_max_str_digits``) in any
file or argument a command reads is one ``error:`` line naming it, exit 2, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app

HUGE = "9" * (sys.get_int_max_str_digits() + 700)
SAID = f"an integer of {len(HUGE)} digits: at most {sys.get_int_max_str_digits()} digits are read"


def _files(folder: Path) -> dict[str, list[str]]:
    """Each case: the command line, with the files it reads written into ``folder``."""
    (folder / "toml.formula.toml").write_text(f'formula = "toml"\n[[steps]]\nid = "a"\nretries = {HUGE}\n')
    (folder / "json.formula.json").write_text(
        f'{{"formula": "json", "steps": [{{"id": "a", "retries": {HUGE}}}]}}'
    )
    steps = folder / "steps.json"
    steps.write_text(f'{{"steps": [{{"id": "a", "status": "complete", "output": {{"v": {HUGE}}}}}]}}')
    semantic = folder / "shop.semantic.toml"
    semantic.write_text(f"[metrics]\nrevenue = {HUGE}\n")
    store = str(folder / "s.db")
    return {
        "formula check (TOML)": ["formula", "check", "toml", "--path", str(folder)],
        "formula check (JSON)": ["formula", "check", "json", "--path", str(folder)],
        "formula check --json": ["formula", "check", "toml", "--path", str(folder), "--json"],
        "semantic file": ["formula", "check", str(semantic)],
        "check-condition --steps": ["check-condition", "a.output.v > 1", "--steps", str(steps)],
        "complete --output": ["complete", "run_x", "a", "--output", f'{{"x": {HUGE}}}', "--store", store],
        "approve --edit": ["approve", "run_x", "--edit", f'{{"a": {HUGE}}}', "--store", store],
        "fork --args": ["fork", "run_x", "--at", "1", "--args", f'{{"a": {HUGE}}}', "--store", store],
    }


CASES = [
    "formula check (TOML)",
    "formula check (JSON)",
    "formula check --json",
    "semantic file",
    "check-condition --steps",
    "complete --output",
    "approve --edit",
    "fork --args",
]


@pytest.mark.parametrize("case", CASES)
def test_a_number_too_long_to_read_is_one_error_line(tmp_path: Path, case: str) -> None:
    # Before, each was a traceback ending in "Exceeds the limit (4300 digits) for integer string conversion".
    args = _files(tmp_path)[case]
    result = CliRunner().invoke(app, args)

    assert not isinstance(result.exception, ValueError), result.exception
    assert result.exit_code in {1, 2}, (result.exit_code, result.output)
    assert SAID in result.output, result.output
    assert "Traceback" not in result.output


def test_a_project_file_with_a_number_too_long_to_read_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plangate.toml").write_text(f"model_timeout = {HUGE}\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "s.db")])

    assert not isinstance(result.exception, ValueError), result.exception
    assert result.exit_code == 2, result.output
    assert SAID in result.output, result.output
