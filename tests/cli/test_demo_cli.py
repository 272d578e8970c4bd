"""``plangate demo``: plan-week on the bundled examples, each demo on a fresh example week, from any folder
(here a temporary one), with the month asked for and a bad month refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    for name in ("PLANGATE_MODEL", "PLANGATE_TOOLS", "PLANGATE_PROG"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def _placing(tmp_path: Path) -> str:
    place = {"name": "place", "arguments": {"task": "review", "day": "wed", "slot": "09:00"}}
    path = tmp_path / "script.json"
    path.write_text(json.dumps([json.dumps({"action": "continue", "tool_call": place})]), encoding="utf-8")
    return f"scripted:{path}"


def test_each_demo_runs_plan_week_on_a_fresh_week_asking_here(cli: CliRunner, tmp_path: Path) -> None:
    for _ in range(2):  # the second demo's write is not refused as already placed: its week is fresh
        result = cli.invoke(app, ["demo", "-m", _placing(tmp_path), "--interactive"], input="a\na\n")
        lines = result.output.splitlines()
        assert result.exit_code == 0, result.output
        assert "■ revenue complete: db_query: 5 rows" in lines
        assert "schedule ›   ← place review wed 09:00-10:00" in lines
        assert "already_placed" not in result.output
        ended = r"^run run_\S+ completed: all 3 steps finished( · .*)?$"  # the usage may follow
        assert re.search(ended, result.output, re.MULTILINE)


def test_the_demo_reviews_the_month_asked_for(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["demo", "--month", "2025-01", "-m", _placing(tmp_path), "--detach"])
    assert result.exit_code == 0, result.output
    assert "? approval Revenue by region for 2025-01" in result.output


def test_a_bad_month_is_refused_in_one_line(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["demo", "--month", "June", "-m", _placing(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --month: var 'month' is 'June', which does not match the pattern '^\\d{4}-\\d{2}$'\n"
    )
    assert not (tmp_path / "runs.db").exists()  # nothing was stored, not even a fresh week


def test_a_model_that_cannot_run_here_is_refused_before_anything_changes(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("PLANGATE_MODEL", "openai:gpt-4o-mini")
    result = cli.invoke(app, ["demo"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: PLANGATE_MODEL: 'openai:gpt-4o-mini': openai:gpt-4o-mini needs an API key: set "
        "OPENAI_API_KEY or pass api_key=\n"
    )
    assert not (tmp_path / "runs.db").exists()
