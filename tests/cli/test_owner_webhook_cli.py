"""``plangate owner set | reset | show`` and ``plangate webhook add | list | deliveries | delete`` on a SQLite
store: an owner's own limits win over plangate.toml's and say where each comes from; an endpoint's secret
is printed once, alone on stdout, never listed; mistakes are said in one line."""

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
    (tmp_path / "plangate.toml").write_text("[limits]\nruns_at_once = 4\nrequests_per_minute = 60\n")
    return CliRunner()


def _run(cli: CliRunner, *args: str, code: int = 0) -> str:
    result = cli.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def test_an_owners_own_limits_win_over_the_files(cli: CliRunner) -> None:
    shown = json.loads(_run(cli, "owner", "show", "ana", "--json"))
    assert shown["limits"]["runs_at_once"] == 4 and shown["from"]["runs_at_once"] == "default"
    set_ = json.loads(
        _run(cli, "owner", "set", "ana", "--runs-at-once", "2", "--no-limit", "requests_per_minute", "--json")
    )
    assert (set_["limits"]["runs_at_once"], set_["limits"]["requests_per_minute"]) == (2, None)
    assert set_["from"]["runs_at_once"] == "owner" and set_["today"]["tokens"] == 0
    assert set_["runs"] == {"going": 0, "waiting": []}
    text = _run(cli, "owner", "show", "ana")
    assert "runs_at_once" in text and "no limit" in text and "0 waiting for a slot" in text
    reset = json.loads(_run(cli, "owner", "reset", "ana", "runs_at_once", "--json"))
    assert reset["limits"]["runs_at_once"] == 4 and reset["limits"]["requests_per_minute"] is None
    bad = _run(cli, "owner", "set", "ana", "--double-texting", "shout", code=2)
    assert "owner 'ana': double_texting: expected one of reject, queue, cancel; found 'shout'" in bad
    assert "give a limit to set" in _run(cli, "owner", "set", "ana", code=2)
    assert "--no-limit: expected one of" in _run(cli, "owner", "set", "ana", "--no-limit", "speed", code=2)


def test_an_endpoints_secret_is_printed_once_and_never_listed(cli: CliRunner) -> None:
    refused = _run(cli, "webhook", "add", "http://127.0.0.1:9/in", code=2)
    assert "a private, loopback or link-local address" in refused
    added = cli.invoke(
        app, ["webhook", "add", "http://93.184.216.34/in", "-e", "run.ended", "--owner", "ana"]
    )
    assert added.exit_code == 0, added.output
    secret = added.stdout.strip()  # the secret alone on stdout; what it is for on stderr
    assert secret.startswith("whsec_") and "\n" not in secret
    assert "keep the secret now, it is not shown again" in added.stderr
    listed = json.loads(_run(cli, "webhook", "list", "--json"))["items"]
    assert [item["events"] for item in listed] == [["run.ended"]] and secret not in json.dumps(listed)
    webhook_id = listed[0]["id"]
    assert json.loads(_run(cli, "webhook", "deliveries", webhook_id, "--json")) == {"items": []}
    assert "unknown event 'run.begun'" in _run(
        cli, "webhook", "add", "http://93.184.216.34/x", "--event", "run.begun", code=2
    )
    assert f"deleted webhook {webhook_id}" in _run(cli, "webhook", "delete", webhook_id)
    assert "no webhook endpoint" in _run(cli, "webhook", "delete", webhook_id, code=2)
