"""Whatever a model writes, the loop never crashes and a run ends with an outcome or waits on a person.

Hostile outputs (deep nesting, NaN, huge numbers, repeated keys) are corrections; and an exception that
escapes a phase anyway ends the run ``aborted`` / ``internal_error`` instead of leaving it ``running``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from agent_helpers import make_desk
from hypothesis import given
from hypothesis import strategies as st

from plangate.agent import Agent, AgentResult, _execute
from plangate.interactions import Answer, Approve, Reject
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools import tool

STORE = SQLiteStore(":memory:")
DESK = make_desk()

# Answers a model could give in each phase, valid or nearly so; the strategy below mutates them.
_SEEDS: list[dict[str, Any]] = [
    {"route": "plan"},
    {"route": "execute"},
    {"route": "reply", "reply": "hi"},
    {"action": "plan_done", "plan_steps": [{"content": "look", "done_when": "seen"}, {"content": "act"}]},
    {"action": "plan_done", "plan_steps": [{"content": "look"}], "context_hook": {"domain": "core"}},
    {"action": "ask_user", "question": "which?"},
    {"action": "continue", "reason": "more"},
    {"action": "continue", "tool_call": {"name": "lookup", "arguments": {"query": "a"}}},
    {"action": "continue", "tool_call": {"name": "echo", "arguments": {"text": "a"}}},
    {"action": "confirm", "tool_call": {"name": "place", "arguments": {"task": "t", "slot": 2}}},
    {"action": "continue", "tool_call": {"name": "context_tools_add", "arguments": {"domain": "core"}}},
    {"action": "ask_user", "speak": "which one?"},
    {"action": "next_plan", "goal_check": {"done_when": "seen", "evidence": "lookup"}},
    {"action": "done", "goal_check": "all seen", "speak": "done"},
    {"action": "abort", "abort": {"code": "nope", "user_message": "cannot"}},
]
_scalar = st.one_of(
    st.none(), st.text(max_size=6), st.integers(-2, 5), st.booleans(), st.just({}), st.just([])
)


# Hostile values: nesting past the decoders' limit, NaN / Infinity, a number out of range, a repeated key.
_HOSTILE = ["deep-array", "deep-object", "NaN", "Infinity", "-Infinity", "1e999", "huge-int", "dup"]


def _hostile(text: str, kind: str, depth: int) -> str:
    """``text`` (a JSON object) with a hostile value added as its first field."""
    if kind == "deep-array":
        value = "[" * depth + "]" * depth
    elif kind == "deep-object":
        value = '{"k":' * depth + "1" + "}" * depth
    elif kind == "huge-int":
        value = "9" * depth
    elif kind == "dup":
        return text.replace("{", '{"action": "done", "action": "abort", ', 1)
    else:
        value = kind
    return text.replace("{", f'{{"goal_check": {value}, ', 1)


@st.composite
def _output(draw: st.DrawFn) -> str:
    data = dict(draw(st.sampled_from(_SEEDS)))
    mutation = draw(st.sampled_from(["none", "drop", "replace", "action", "tool"]))
    if mutation == "drop" and data:
        data.pop(draw(st.sampled_from(sorted(data))))
    elif mutation == "replace" and data:
        data[draw(st.sampled_from(sorted(data)))] = draw(_scalar)
    elif mutation == "action":
        data["action"] = draw(st.sampled_from(["continue", "done", "fly", "", "ASK_USER", "plan_done"]))
    elif mutation == "tool":
        data["tool_call"] = {
            "name": draw(st.sampled_from(["place", "nope", ""])),
            "arguments": {"x": draw(_scalar)},
        }
    text = json.dumps(data)
    if draw(st.integers(0, 3)) == 0:
        text = _hostile(text, draw(st.sampled_from(_HOSTILE)), draw(st.integers(65, 3000)))
    shape = draw(st.sampled_from(["json", "tagged", "cut", "noise", "raw"]))
    if shape == "tagged":
        return f"<decision>{text}</decision>{draw(st.text(max_size=8))}"
    if shape == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if shape == "noise":
        return f"{draw(st.text(max_size=8))}{text}"
    return draw(st.text(max_size=20)) if shape == "raw" else text


def _resolve(runner: Agent, result: AgentResult, approve: bool) -> AgentResult:
    assert result.interaction is not None
    kind = result.interaction.kind
    resolution = Answer(text="yes") if kind == "ask_user" else (Approve() if approve else Reject(reason="no"))
    return runner.resume(result.run_id, result.interaction.id, resolution)


@given(
    outputs=st.lists(_output(), max_size=6),
    wire=st.sampled_from(["json", "tagged"]),
    mode=st.sampled_from(["auto", "plan", "react"]),
    always_execute=st.booleans(),
    approve=st.booleans(),
)
def test_any_model_output_ends_in_an_outcome_or_a_wait(
    outputs: list[str], wire: Any, mode: Any, always_execute: bool, approve: bool
) -> None:
    model = ScriptedModel(outputs, wire=wire)
    runner = Agent(
        model=model, tools=DESK.registry, store=STORE, mode=mode, max_rounds=4, always_execute=always_execute
    )

    result = runner.run("do something useful")
    if result.waiting:
        result = _resolve(runner, result, approve)

    events = STORE.events(result.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert STORE.get_run(result.run_id).status == result.status
    snapshot = STORE.get_snapshot(result.run_id)
    assert snapshot is not None and snapshot.state["rounds_used"] <= 4
    if result.waiting:
        assert result.interaction is not None
        opened = STORE.list_interactions(status="open", run_id=result.run_id)
        assert [i.id for i in opened] == [result.interaction.id]
        return
    assert result.status in ("completed", "aborted", "exhausted")
    assert result.outcome is not None and result.outcome.status == result.status
    assert events[-1].type == "outcome" and isinstance(result.answer, str) and result.answer
    executes = sum(1 for request in model.requests if request.purpose == "execute")
    rounds = sum(1 for event in events if event.type == "round")
    assert rounds == executes  # every round is recorded, even one whose model call failed
    assert STORE.pending_write_intents(result.run_id) == []


DEEP_GOAL_CHECK = '{"action":"done","goal_check":' + "[" * 250 + "]" * 250 + "}"


@pytest.mark.parametrize("wire", ["json", "tagged"])
def test_a_goal_check_nested_250_deep_is_a_correction_and_the_run_ends(wire: Any) -> None:
    output = DEEP_GOAL_CHECK if wire == "json" else f"<decision>{DEEP_GOAL_CHECK}</decision>done"
    store = SQLiteStore(":memory:")
    model = ScriptedModel([output, output, output], wire=wire)
    runner = Agent(model=model, tools=DESK.registry, store=store, mode="react", max_rounds=5)

    result = runner.run("do something useful")

    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "corrections_exhausted"
    corrections = [e for e in store.events(result.run_id) if e.type == "correction"]
    assert len(corrections) == 3
    assert all("nests deeper than 64 levels" in e.message for e in corrections)  # type: ignore[attr-defined]
    assert store.get_run(result.run_id).status == "aborted"


def _broken_phase(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the execute phase's decision reading raise what a decoder bug would (a RecursionError)."""
    calls: list[int] = []

    def explode(text: str, wire: str) -> object:
        calls.append(1)
        raise RecursionError("maximum recursion depth exceeded while decoding /srv/secret/path")

    monkeypatch.setattr(_execute, "read_decision", explode)
    return calls


def test_an_exception_escaping_a_phase_ends_the_run_with_internal_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = _broken_phase(monkeypatch)
    store = SQLiteStore(":memory:")
    runner = Agent(model=ScriptedModel(["{}"]), tools=DESK.registry, store=store, mode="react", max_rounds=5)

    with caplog.at_level(logging.ERROR, logger="plangate.agent.loop"):
        result = runner.run("do something useful")

    assert calls == [1]
    assert result.status == "aborted" and result.outcome is not None
    assert (result.outcome.stage, result.outcome.code) == ("execute", "internal_error")
    assert result.outcome.internal_reason.startswith("RecursionError: maximum recursion depth exceeded")
    # The reason is for the store and the log; the person reads that the run stopped, not why inside.
    assert "/srv/secret" not in result.outcome.user_message and "/srv/secret" not in (result.answer or "")
    assert "RecursionError" in caplog.text and result.run_id in caplog.text
    run = store.get_run(result.run_id)
    assert run.status == "aborted" and run.outcome is not None and run.outcome["code"] == "internal_error"
    events = store.events(result.run_id)
    assert events[-1].type == "outcome" and events[-1].code == "internal_error"  # type: ignore[attr-defined]
    # Nothing of the failed round was committed: the budget it consumed in memory was rolled back.
    snapshot = store.get_snapshot(result.run_id)
    assert snapshot is not None and snapshot.state["rounds_used"] == 0


def test_a_run_left_running_by_a_crash_ends_with_an_outcome_when_resumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @tool
    async def survey() -> str:
        """Look at everything (never returns: the process stops during it)."""
        await asyncio.Event().wait()
        return "never"

    store = SQLiteStore(":memory:")
    call = json.dumps({"action": "continue", "tool_call": {"name": "survey", "arguments": {}}})
    runner = Agent(model=ScriptedModel([call, "{}"]), tools=[survey], store=store, mode="react", max_rounds=5)

    async def stop_during_the_tool() -> str:
        stream = runner.stream("survey everything")
        events = aiter(stream)
        await anext(events)  # the run's first commit; its first round then never ends (the tool hangs)
        await events.aclose()  # which stops the run's task, as a stopped process would
        return stream.run_id

    run_id = asyncio.run(stop_during_the_tool())
    assert store.get_run(run_id).status == "running"
    _broken_phase(monkeypatch)

    result = runner.resume(run_id)

    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "internal_error"
    assert store.get_run(run_id).status == "aborted"
