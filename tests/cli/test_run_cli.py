"""``plangate run / approve / status / runs / events / complete / cancel`` from the command line."""

from __future__ import annotations

import json
import re
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


def run_release(cli: CliRunner, *extra: str, input: str | None = None) -> tuple[int, str]:
    result = cli.invoke(
        app,
        ["run", "release", "--path", str(EXAMPLES), "--tools", TOOLS, "--var", "version=2.5.0", *extra],
        input=input,
    )
    return result.exit_code, result.output


def test_run_asks_in_the_terminal_and_finishes(cli: CliRunner) -> None:
    code, output = run_release(cli, "--interactive", input="a\n")
    assert code == 0, output
    # an approval gate is approved or rejected: the same prompt as the agent's, without an edit
    assert "approve / reject [a/r] (a):" in output
    assert "Ship 2.5.0 to stable?" in output
    assert re.search(r"run run_\S+ completed", output)
    for step in ("run-tests", "build", "approve", "publish"):
        assert step in output


def test_a_detached_approval_names_approve_and_reject_never_answer(cli: CliRunner) -> None:
    code, output = run_release(cli, "--detach")
    assert code == 0, output
    interaction = re.search(r"waiting on interaction (int_\S+) \(approval\):", output)
    assert interaction is not None, output
    found = interaction.group(1)
    assert (
        f"  answer with: plangate approve {found} --tools {TOOLS}  |  "
        f'plangate reject {found} --reason "WHY" --tools {TOOLS}'
    ) in output.splitlines()
    assert "answer " + found not in output and "|answer" not in output


def test_detached_run_waits_and_approve_finishes_it(cli: CliRunner) -> None:
    code, output = run_release(cli, "--detach", "--json")
    assert code == 0, output
    waiting = json.loads(output)
    assert waiting["status"] == "waiting"
    interaction = waiting["interaction"]["id"]

    status = cli.invoke(app, ["status", waiting["run_id"], "--json"])
    assert json.loads(status.output)["steps"]["approve"]["status"] == "waiting"

    # The run's stored tool spec is not imported: the person approving names the tools (issue 10 §6).
    refused = cli.invoke(app, ["approve", interaction])
    assert refused.exit_code == 2
    assert refused.output.startswith(
        f"error: run {waiting['run_id']!r} needs tools that are not available here: run_tests, "
        f"build_artifact, publish (it was started with --tools {TOOLS}); looked in --tools, $PLANGATE_TOOLS, "
        "no plangate.toml here and the installed plangate.tools entry points. Name them when you run this "
        "command: --tools MODULE:ATTR or --tools FILE.py:ATTR, $PLANGATE_TOOLS, or run it in the folder of "
        "the plangate.toml that lists them (or --config it); a run's stored tool specs are never imported"
    )
    status = cli.invoke(app, ["status", waiting["run_id"], "--json"])
    assert json.loads(status.output)["steps"]["approve"]["status"] == "waiting"  # nothing changed

    approved = cli.invoke(app, ["approve", interaction, "--json", "--tools", TOOLS])
    assert approved.exit_code == 0, approved.output
    assert json.loads(approved.output)["status"] == "completed"

    again = cli.invoke(app, ["approve", interaction, "--tools", TOOLS])
    assert again.exit_code == 2
    assert "already" in again.output or "not open" in again.output

    runs = cli.invoke(app, ["runs", "--json"])
    assert [r["status"] for r in json.loads(runs.output)] == ["completed"]
    events = cli.invoke(app, ["events", waiting["run_id"], "--json"])
    types = [json.loads(line)["type"] for line in events.output.splitlines()]
    assert types[0] == "status" and "interaction_resolved" in types and types[-1] == "outcome"


def test_reject_fails_the_run_with_exit_1(cli: CliRunner) -> None:
    _, output = run_release(cli, "--detach", "--json")
    interaction = json.loads(output)["interaction"]["id"]
    rejected = cli.invoke(app, ["reject", interaction, "--reason", "freeze week", "--tools", TOOLS])
    assert rejected.exit_code == 1
    assert "failed" in rejected.output


def test_manual_step_is_completed_from_the_command_line(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "sign.formula.toml").write_text(
        'formula = "sign"\n[[steps]]\nid = "sign"\ntitle = "Sign it"\n'
        '[[steps]]\nid = "tell"\nneeds = ["sign"]\n'
        'tool = { name = "notify", args = { message = "signed by {{steps.sign.output.by}}" } }\n'
    )
    started = cli.invoke(app, ["run", "sign.formula.toml", "--tools", TOOLS, "--detach", "--json"])
    run_id = json.loads(started.output)["run_id"]
    bad = cli.invoke(app, ["complete", run_id, "sign", "--output", "{not json", "--tools", TOOLS])
    assert bad.exit_code == 2 and "not JSON" in bad.output
    done = cli.invoke(
        app, ["complete", run_id, "sign", "--output", '{"by": "Kim"}', "--tools", TOOLS, "--json"]
    )
    assert json.loads(done.output)["status"] == "completed"
    assert (tmp_path / ".plangate/demo/messages/team.log").read_text() == "signed by Kim\n"


def test_user_mistakes_are_one_line_errors(cli: CliRunner) -> None:
    missing_var = cli.invoke(app, ["run", "release", "--path", str(EXAMPLES), "--tools", TOOLS])
    assert missing_var.exit_code == 2
    assert "version" in missing_var.output and "Traceback" not in missing_var.output
    unknown = cli.invoke(app, ["run", "no-such-formula", "--tools", TOOLS])
    assert unknown.exit_code == 2 and "no-such-formula" in unknown.output
    bad_tools = cli.invoke(app, ["run", "release", "--tools", "nowhere.py:registry"])
    assert bad_tools.exit_code == 2 and "nowhere.py" in bad_tools.output
    bad_run = cli.invoke(app, ["status", "run_missing"])
    assert bad_run.exit_code == 2 and "run_missing" in bad_run.output


def test_a_formula_with_an_agent_step_names_the_model_it_uses(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "ask.formula.toml").write_text(
        'formula = "ask"\n[[steps]]\nid = "greet"\nagent = { prompt = "Say hello", tools = ["notify"] }\n'
    )
    script = tmp_path / "model.json"
    script.write_text(json.dumps([json.dumps({"route": "reply", "reply": "Hello!"})]))
    spec = f"scripted:{script}"
    done = cli.invoke(app, ["run", "ask.formula.toml", "--tools", TOOLS, "--model", spec])
    assert done.exit_code == 0, done.output
    assert f"model of agent and llm steps: {spec} (--model)" in done.output
    assert re.search(r"run run_\S+ completed", done.output)

    code, output = run_release(cli, "--detach")
    assert code == 0 and "waiting on interaction" in output, output
    assert "model of" not in output  # nothing to say when no step calls a model


def test_every_kind_of_run_is_reported_in_one_shape_and_cancelled_the_same_way(
    cli: CliRunner, tmp_path: Path
) -> None:
    script = tmp_path / "reply.json"
    script.write_text(json.dumps([json.dumps({"route": "reply", "reply": "Hello!"})]))
    _, output = run_release(cli, "--detach", "--json")
    formula = json.loads(output)
    agent = json.loads(cli.invoke(app, ["agent", "hi", "-m", f"scripted:{script}", "--json"]).stdout)

    keys = {"run_id", "status", "reason", "outcome", "steps", "interaction", "answer"}
    assert set(formula) == set(agent) == keys
    assert (agent["status"], agent["answer"], agent["steps"]) == ("completed", "Hello!", None)
    assert agent["outcome"]["code"] == "replied"
    assert formula["reason"].startswith("approve (waiting for a person: Ship 2.5.0 to stable?")
    assert formula["steps"]["approve"]["status"] == "waiting" and formula["outcome"] is None

    cancelled = cli.invoke(app, ["cancel", formula["run_id"], "--reason", "not this week"])
    assert (cancelled.exit_code, cancelled.stderr) == (0, f"cancelled {formula['run_id']}\n")
    shown = cli.invoke(app, ["status", formula["run_id"]]).stdout.splitlines()
    assert shown[0] == f"run {formula['run_id']} (formula release): cancelled"
    assert any(
        line.split() == ["│", "approve", "│", "cancelled", "│", "not", "this", "week", "│"] for line in shown
    )
    assert cli.invoke(app, ["status", agent["run_id"]]).stdout.splitlines() == [
        f"run {agent['run_id']} (agent hi): completed"
    ]


def test_a_formula_runs_budget_comes_from_its_flags_or_plangate_toml(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "two.formula.toml").write_text(
        'formula = "two"\n[[steps]]\nid = "a"\nllm = { prompt = "Say A." }\n'
        '[[steps]]\nid = "b"\nneeds = ["a"]\nllm = { prompt = "Say B." }\n'
    )
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["A.", "B."]))
    spec = f"scripted:{script}"
    # the first call is made (nothing was spent), the second would pass the budget: it is not made
    done = cli.invoke(app, ["run", "two.formula.toml", "--model", spec, "--max-tokens", "1", "--json"])
    assert done.exit_code == 1, done.output
    ended = json.loads(done.output)
    assert ended["status"] == "exhausted"
    assert (
        ended["outcome"]["code"] == "budget_exhausted" and "max_tokens 1;" in ended["outcome"]["user_message"]
    )
    assert ended["steps"]["b"]["status"] == "failed"

    refused = cli.invoke(app, ["run", "two.formula.toml", "--model", spec, "--max-cost", "0.5"])
    assert refused.exit_code == 2
    assert f"error: formula max_cost: the model '{spec}' has no price" in refused.output
    assert cli.invoke(app, ["runs"]).output.count("exhausted") == 1  # the first run only: none was stored

    (tmp_path / "plangate.toml").write_text(
        f'[budget]\nmax_tokens = 1\n[prices."{spec}"]\ninput = 1\noutput = 2\n'
    )
    done = cli.invoke(app, ["run", "two.formula.toml", "--model", spec, "--json"])
    ended = json.loads(done.output)
    assert ended["status"] == "exhausted" and ended["outcome"]["usage"]["cost"] > 0
