"""Write steps from the command line: consent asked in the terminal, ``--yes``, ``formula check --tools``,
and ``plangate resume`` refusing a run that another live process advances."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app
from plangate.store import LeaseBook, open_store
from plangate.store.run_lease import new_holder

TOOLS = '''
from pathlib import Path

from plangate.tools import ToolRegistry, tool


@tool(effect="write")
def publish(artifact: str) -> dict:
    """Publish an artifact."""
    with Path("published.txt").open("a") as handle:
        handle.write(artifact + "\\n")
    return {"published": artifact}


@tool
def build() -> dict:
    """Build the artifact."""
    return {"artifact": "app.tgz"}


registry = ToolRegistry([publish, build])
'''

FORMULA = """
formula = "ship"

[[steps]]
id = "build"
tool = { name = "build" }

[[steps]]
id = "publish"
needs = ["build"]
tool = { name = "publish", args = { artifact = "{{steps.build.output.artifact}}" } }
"""


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    monkeypatch.delenv("PLANGATE_TOOLS", raising=False)
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "ship.formula.toml").write_text(textwrap.dedent(FORMULA), encoding="utf-8")
    return CliRunner()


def ship(cli: CliRunner, *extra: str, input: str | None = None) -> tuple[int, str]:
    result = cli.invoke(
        app, ["run", "ship", "--path", ".", "--tools", "tools.py:registry", *extra], input=input
    )
    return result.exit_code, result.output


def published(tmp_path: Path) -> list[str]:
    path = tmp_path / "published.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_write_step_asks_for_consent_in_the_terminal(cli: CliRunner, tmp_path: Path) -> None:
    code, output = ship(cli, "--interactive", input="a\n")

    assert code == 0, output
    assert 'Allow publish (Publish an artifact.) with {"artifact": "app.tgz"}?' in output
    assert "completed" in output
    assert published(tmp_path) == ["app.tgz"]


def test_declining_in_the_terminal_writes_nothing(cli: CliRunner, tmp_path: Path) -> None:
    code, output = ship(cli, "--interactive", input="r\nnot now\n")

    assert code == 1, output
    assert "failed" in output
    assert published(tmp_path) == []


def test_a_write_steps_consent_is_asked_as_the_agent_asks_and_takes_an_edit(
    cli: CliRunner, tmp_path: Path
) -> None:
    # one set of prompts for every run: approve / reject / edit the arguments, as `plangate agent` asks
    code, output = ship(cli, "--interactive", input='e\n{"artifact": "edited.tgz"}\n')

    assert code == 0, output
    assert "approve / reject / edit the arguments [a/r/e] (a):" in output
    assert "[y/n]" not in output
    assert published(tmp_path) == ["edited.tgz"]


def test_yes_runs_the_write_without_asking_and_the_run_says_so(cli: CliRunner, tmp_path: Path) -> None:
    code, output = ship(cli, "--yes", "--json")

    assert code == 0, output
    result = json.loads(output)
    assert result["status"] == "completed" and result["interaction"] is None
    assert published(tmp_path) == ["app.tgz"]
    events = cli.invoke(app, ["events", result["run_id"], "--json"]).output
    codes = [json.loads(line).get("code") for line in events.splitlines()]
    assert "always_execute" in codes


def test_detached_the_consent_waits_and_approve_runs_the_write(cli: CliRunner, tmp_path: Path) -> None:
    code, output = ship(cli, "--detach", "--json")
    waiting = json.loads(output)
    assert code == 0 and waiting["status"] == "waiting"
    assert waiting["interaction"]["kind"] == "confirm"
    assert waiting["interaction"]["tool"]["arguments"] == {"artifact": "app.tgz"}
    assert published(tmp_path) == []

    approved = cli.invoke(
        app, ["approve", waiting["interaction"]["id"], "--tools", "tools.py:registry", "--json"]
    )

    assert approved.exit_code == 0, approved.output
    assert json.loads(approved.output)["status"] == "completed"
    assert published(tmp_path) == ["app.tgz"]


def test_formula_check_with_tools_warns_about_a_write_step_without_consent(cli: CliRunner) -> None:
    plain = cli.invoke(app, ["formula", "check", "ship.formula.toml", "--json"])
    assert plain.exit_code == 0
    # without tools, effects are unknown, and the tools themselves unverified
    assert [i["code"] for i in json.loads(plain.output)["issues"]] == ["unverified-tool"] * 2

    checked = cli.invoke(
        app, ["formula", "check", "ship.formula.toml", "--tools", "tools.py:registry", "--json"]
    )

    assert checked.exit_code == 0, checked.output  # a warning, not an error
    (issue,) = json.loads(checked.output)["issues"]
    assert (issue["level"], issue["code"], issue["path"]) == (
        "warning",
        "write-without-consent",
        "steps[1].consent",
    )
    shown = cli.invoke(app, ["formula", "check", "ship.formula.toml", "--tools", "tools.py:registry"])
    assert "write-without-consent" in shown.output


def _waiting_run(cli: CliRunner) -> str:
    code, output = ship(cli, "--detach", "--json")
    assert code == 0, output
    return str(json.loads(output)["run_id"])


def test_resume_refuses_a_run_another_live_process_advances(cli: CliRunner, tmp_path: Path) -> None:
    run_id = _waiting_run(cli)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    other = LeaseBook(store)  # this test's own process: alive, and not the command's holder
    other.take(run_id)
    seq = store.last_seq(run_id)

    refused = cli.invoke(app, ["resume", run_id, "--tools", "tools.py:registry"])

    assert refused.exit_code == 2
    assert "is being advanced by another process" in refused.output and "nothing changed" in refused.output
    assert "Traceback" not in refused.output
    assert store.last_seq(run_id) == seq
    assert store.get_run(run_id).lease_owner == other.holder
    other.give_back(run_id)
    assert cli.invoke(app, ["resume", run_id, "--tools", "tools.py:registry"]).exit_code == 0
    assert store.get_run(run_id).lease_owner is None  # released when it stopped


def test_resume_takes_over_the_lease_of_a_process_that_no_longer_exists(
    cli: CliRunner, tmp_path: Path
) -> None:
    run_id = _waiting_run(cli)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    host, _, boot, token = new_holder().rsplit(":", 3)
    dead = f"{host}:{gone.stdout.strip()}:{boot}:{token}"
    assert store.take_lease(run_id, dead, 600) is not None

    resumed = cli.invoke(app, ["resume", run_id, "--tools", "tools.py:registry", "--json"])

    assert resumed.exit_code == 0, resumed.output
    # it went on (to its consent) under its own lease
    assert json.loads(resumed.output)["status"] == "waiting"
    assert store.get_run(run_id).lease_owner is None


def waiting_ship(cli: CliRunner) -> dict[str, str]:
    code, output = ship(cli, "--detach", "--json")
    assert code == 0, output
    waiting = json.loads(output)
    return {"run": waiting["run_id"], "interaction": waiting["interaction"]["id"]}


def test_approve_edit_runs_the_call_with_the_arguments_given(cli: CliRunner, tmp_path: Path) -> None:
    waiting = waiting_ship(cli)
    edit = '{"artifact": "edited.tgz"}'
    approved = cli.invoke(
        app, ["approve", waiting["interaction"], "--edit", edit, "--tools", "tools.py:registry"]
    )

    assert approved.exit_code == 0, approved.output
    assert published(tmp_path) == ["edited.tgz"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            '{"artifact": 3}',
            "the edited arguments of 'publish' do not fit its parameters: arguments.artifact",
        ),
        ("{artifact", "--edit: not JSON: Expecting property name enclosed in double quotes at column 2"),
        ('["a.tgz"]', "--edit: expected a JSON object of the tool's arguments, got list"),
    ],
)
def test_an_edit_that_does_not_fit_changes_nothing(
    cli: CliRunner, tmp_path: Path, edit: str, says: str
) -> None:
    waiting = waiting_ship(cli)
    refused = cli.invoke(app, ["approve", waiting["run"], "--edit", edit, "--tools", "tools.py:registry"])

    assert refused.exit_code == 2, refused.output
    assert says in refused.output
    assert published(tmp_path) == []
    status = cli.invoke(app, ["status", waiting["run"], "--json"])
    assert json.loads(status.output)["run"]["status"] == "waiting"


def test_approving_an_answered_question_says_who_answered_it_and_when(cli: CliRunner) -> None:
    waiting = waiting_ship(cli)
    first = cli.invoke(app, ["approve", waiting["interaction"], "--tools", "tools.py:registry"])
    assert first.exit_code == 0, first.output

    # without --tools: it was blamed on the tools before it said anything of the answer
    again = cli.invoke(app, ["approve", waiting["interaction"]])

    assert again.exit_code == 2
    assert re.search(
        rf"error: interaction {waiting['interaction']} was already approved by cli at "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; nothing changed",
        again.output,
    ), again.output
    assert "tools" not in again.output


def test_approve_no_resume_only_records_the_answer_and_needs_no_tools(cli: CliRunner, tmp_path: Path) -> None:
    waiting = waiting_ship(cli)
    recorded = cli.invoke(app, ["approve", waiting["interaction"], "--no-resume"])

    assert recorded.exit_code == 0, recorded.output
    assert f"resolved {waiting['interaction']}" in recorded.output
    assert published(tmp_path) == []
    resumed = cli.invoke(app, ["resume", waiting["run"], "--tools", "tools.py:registry", "--json"])
    assert json.loads(resumed.output)["status"] == "completed"
    assert published(tmp_path) == ["app.tgz"]
