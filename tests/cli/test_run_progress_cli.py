"""What ``plangate run`` and ``approve`` say in the terminal: each step, each round of an agent step (its
decision, the tool call, the result: a success, a blocked call with its code, a duplicate), the questions,
and how the run ended and why, as the console's timeline does; and a line while the run works silently."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli import _events
from plangate.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"
DEMO_TOOLS = f"{EXAMPLES / 'demo_tools.py'}:registry"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    for name in ("PLANGATE_MODEL", "PLANGATE_TOOLS", "PLANGATE_PROG"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def _place(task: str, slot: str = "09:00") -> dict[str, object]:
    arguments = {"task": task, "day": "wed", "slot": slot}
    return {"action": "continue", "tool_call": {"name": "place", "arguments": arguments}}


def _script(tmp_path: Path, *decisions: dict[str, object]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([json.dumps(d) for d in decisions]), encoding="utf-8")
    return f"scripted:{path}"


def test_each_round_call_and_result_is_shown_blocked_success_and_duplicate(
    cli: CliRunner, tmp_path: Path
) -> None:
    model = _script(tmp_path, _place("nope"), _place("review"))
    # approve the gate, then each of the two writes the agent asks for
    result = cli.invoke(
        app,
        ["run", "plan-week", "--path", str(EXAMPLES), "--tools", DEMO_TOOLS, "-m", model, "--interactive"],
        input="a\na\na\n",
    )
    lines = result.output.splitlines()

    assert result.exit_code == 0, result.output
    assert "■ revenue complete: db_query: 5 rows" in lines
    assert "schedule › round 1 consent place" in lines
    assert (
        "schedule ›   ← blocked (unknown_task): no task 'nope' in this week "
        "(tasks: t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, review)"
    ) in lines
    assert "schedule ›   ← place review wed 09:00-10:00" in lines
    # the step's done_when holds once the placement succeeded: the outcome says how it ended
    assert "schedule › outcome: completed (proven)" in lines
    end = r"^run run_\S+ completed: all 3 steps finished · [\d,]+ tokens in, [\d,]+ out$"
    assert re.search(end, result.output, re.MULTILINE)
    # the prompts of one run are asked once each, in the terminal's one set of words
    assert result.output.count("approve / reject [a/r] (a):") == 1
    assert result.output.count("approve / reject / edit the arguments [a/r/e] (a):") == 2


def test_an_agent_shows_a_duplicate_write_as_failed_with_its_code(cli: CliRunner, tmp_path: Path) -> None:
    done = {"action": "done", "speak": "The review is on Wednesday."}
    activate = {"name": "context_tools_add", "arguments": {"domain": "schedule", "packs": ["edit"]}}
    first = {"action": "continue", "tool_call": activate}
    # placed, then placed again elsewhere (an identical call would not be asked again: repeated_write)
    model = _script(tmp_path, first, _place("review"), _place("review", "14:00"), done)
    result = cli.invoke(
        app,
        ["agent", "Put the review", "--tools", DEMO_TOOLS, "-m", model, "--mode", "react", "--interactive"],
        input="a\na\n",
    )
    lines = result.output.splitlines()
    assert "  ← place review wed 09:00-10:00" in lines, result.output
    assert (
        "  ← failed (already_placed): review is already on wed 09:00-10:00: use move to change that"
    ) in lines


def test_a_run_that_fails_says_which_step_failed_and_why(cli: CliRunner, tmp_path: Path) -> None:
    model = _script(tmp_path, _place("nope"), _place("nope"), _place("nope"), _place("nope"))
    result = cli.invoke(
        app,
        ["run", "plan-week", "--path", str(EXAMPLES), "--tools", DEMO_TOOLS, "-m", model, "--interactive"],
        input="a\na\na\na\na\n",
    )
    lines = result.output.splitlines()

    assert result.exit_code == 1, result.output
    outcome = [line for line in lines if line.startswith("schedule › outcome: ")]
    # the placement ran once and failed: the identical call is never put to the person again
    assert len(outcome) == 1 and outcome[0].startswith(
        "schedule › outcome: aborted (stalled): I stopped: I kept asking for place again after it failed."
    ), outcome
    assert "already ran in this run and failed (no task 'nope'" in outcome[0]
    assert result.output.count("? confirm Allow place") == 1, result.output
    final = lines[-1]
    assert final.startswith("run run_") and " failed: failed steps: schedule (" in final


def test_a_detached_approval_shows_the_rest_of_the_run_and_a_line_while_it_works(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _script(tmp_path, _place("review"))
    command = ["run", "plan-week", "--path", str(EXAMPLES), "--tools", DEMO_TOOLS, "-m", model]
    started = cli.invoke(app, [*command, "--detach", "-q"])
    assert started.exit_code == 0, started.output
    run_id = started.stdout.strip()
    assert re.fullmatch(r"run_\S+", run_id), started.stdout

    # a model that takes its time (as the local one does for a round): the terminal is not left silent
    from plangate.models import scripted

    real_stream = scripted.ScriptedModel.stream

    async def slow_stream(self: scripted.ScriptedModel, request: object):  # type: ignore[no-untyped-def]
        import asyncio

        await asyncio.sleep(0.6)
        async for chunk in real_stream(self, request):  # type: ignore[arg-type]
            yield chunk

    monkeypatch.setattr(scripted.ScriptedModel, "stream", slow_stream)
    monkeypatch.setattr(_events, "QUIET_AFTER", 0.2)
    began = time.monotonic()
    approved = cli.invoke(app, ["approve", run_id, "--tools", DEMO_TOOLS, "-m", model])
    assert time.monotonic() - began < 60

    lines = approved.output.splitlines()
    assert approved.exit_code == 0, approved.output
    assert any(line.startswith("approval int_") and line.endswith(": approved by cli") for line in lines)
    assert any(line.startswith("… still working (") for line in lines), approved.output
    assert "schedule › round 1 consent place" in lines
    assert any(line.startswith("  answer with: plangate approve int_") for line in lines)
