"""``plangate schedule add | list | pause | resume | delete`` on a SQLite store, and their mistakes said
in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    return CliRunner()


def _ok(cli: CliRunner, *args: str) -> str:
    result = cli.invoke(app, ["schedule", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_add_list_pause_resume_delete(cli: CliRunner) -> None:
    added = json.loads(
        _ok(
            cli,
            "add",
            "release",
            "--cron",
            "0 9 * * MON",
            "--timezone",
            "Europe/Paris",
            "--var",
            "version=1.4.0",
            "--name",
            "weekly",
            "--missed",
            "catch_up",
            "--overlap",
            "queue",
            "--json",
        )
    )
    assert (added["name"], added["cron"], added["vars"], added["missed"]) == (
        "weekly",
        "0 9 * * MON",
        {"version": "1.4.0"},
        "catch_up",
    )
    _ok(cli, "add", "nightly", "--every", "1h30m")
    listed = json.loads(_ok(cli, "list", "--json"))["items"]
    assert [(s["name"], s["every"], s["paused"]) for s in listed] == [
        ("weekly", None, False),
        ("nightly", 5400.0, False),
    ]
    assert "paused" in _ok(cli, "pause", "weekly")
    assert json.loads(_ok(cli, "list", "--json"))["items"][0]["paused"] is True
    assert "resumed" in _ok(cli, "resume", "weekly")
    table = _ok(cli, "list")
    assert "weekly" in table and "Europe/Paris" in table and "active" in table
    assert "deleted schedule weekly" in _ok(cli, "delete", "weekly")
    assert [s["name"] for s in json.loads(_ok(cli, "list", "--json"))["items"]] == ["nightly"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "f"], "give one of cron (a cron expression; --cron)"),
        (["add", "f", "--every", "soon"], "--every: expected an interval like '30s'"),
        (["add", "f", "--cron", "0 9 * *"], "is not a cron expression"),
        (["add", "f", "--every", "1m", "--timezone", "Nowhere/City"], "unknown time zone"),
        (["add", "f", "--every", "1m", "--overlap", "both"], "expected 'skip', 'queue' or 'allow'"),
        (["pause", "missing"], "no schedule 'missing'"),
    ],
)
def test_mistakes_are_said_in_one_line(cli: CliRunner, args: list[str], message: str) -> None:
    result = cli.invoke(app, ["schedule", *args])
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output


def test_a_name_is_taken_once_per_owner(cli: CliRunner) -> None:
    _ok(cli, "add", "nightly", "--every", "1m")
    again = cli.invoke(app, ["schedule", "add", "nightly", "--every", "5m"])
    assert again.exit_code != 0 and "has a schedule named 'nightly' already" in again.output
    _ok(cli, "add", "nightly", "--every", "5m", "--owner", "bo")
