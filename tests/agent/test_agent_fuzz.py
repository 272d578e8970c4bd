"""Whatever a model writes, the loop never crashes and a run ends with an outcome or waits on a person."""

from __future__ import annotations

import json
from typing import Any

from agent_helpers import make_desk
from hypothesis import given
from hypothesis import strategies as st

from plangate.agent import Agent, RunResult
from plangate.interactions import Answer, Approve, Reject
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore

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
    shape = draw(st.sampled_from(["json", "tagged", "cut", "noise", "raw"]))
    if shape == "tagged":
        return f"<decision>{text}</decision>{draw(st.text(max_size=8))}"
    if shape == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if shape == "noise":
        return f"{draw(st.text(max_size=8))}{text}"
    return draw(st.text(max_size=20)) if shape == "raw" else text


def _resolve(runner: Agent, result: RunResult, approve: bool) -> RunResult:
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
