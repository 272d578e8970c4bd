"""``plangate prune`` from the command line: real runs of ``release``, one ended and one waiting on a person;
the ended one goes (a dry run first says so and removes nothing), the waiting one stays."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"
TOOLS = f"{EXAMPLES / 'tools.py'}:registry"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    return CliRunner()


def _release(cli: CliRunner, *extra: str, input: str | None = None) -> None:
    args = ["run", "release", "--path", str(EXAMPLES), "--tools", TOOLS, "--var", "version=2.5.0", *extra]
    result = cli.invoke(app, args, input=input)
    assert result.exit_code == 0, result.output


def _statuses(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        found = sorted(row[0] for row in conn.execute("SELECT status FROM runs"))
    conn.close()
    return found


def test_prune_removes_the_ended_run_and_keeps_the_waiting_one(cli: CliRunner, tmp_path: Path) -> None:
    _release(cli, "--interactive", input="a\n")
    _release(cli, "--detach")
    time.sleep(1.2)
    dry = cli.invoke(app, ["prune", "--older-than", "1s", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    said = json.loads(dry.output)
    assert (said["dry_run"], said["trees"], said["runs"], said["kept"]) == (True, 1, 1, 0)
    assert said["rows"]["events"] > 0 and said["rows"]["receipts"] > 0
    assert _statuses(tmp_path / "runs.db") == ["completed", "waiting"]

    done = cli.invoke(app, ["prune", "--older-than", "1s"])
    assert done.exit_code == 0, done.output
    assert "removed 1 run(s) in 1 tree(s)" in done.output
    assert _statuses(tmp_path / "runs.db") == ["waiting"]


def test_the_horizon_comes_from_plangate_toml(cli: CliRunner, tmp_path: Path) -> None:
    _release(cli, "--interactive", input="a\n")
    (tmp_path / "plangate.toml").write_text('[retention]\nolder_than = "1s"\n')
    time.sleep(1.2)
    result = cli.invoke(app, ["prune", "--owner", "local", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["trees"] == 1
    assert json.loads(result.output)["compacted"] is True
    assert _statuses(tmp_path / "runs.db") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "say how old a run must be: --older-than 30d"),
        (["--older-than", "30 days"], "--older-than: expected an age like '30d'"),
    ],
)
def test_prune_says_what_is_wrong(cli: CliRunner, args: list[str], message: str) -> None:
    result = cli.invoke(app, ["prune", *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
