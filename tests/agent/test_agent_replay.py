"""Replaying a finished agent run offline: the recorded outputs reproduce it with no network and no tool
called (a write's recorded result is played back), and a runtime that now behaves differently is reported
at the first round where it does."""

from __future__ import annotations

import socket
from typing import Annotated, Any

import pytest
from agent_helpers import Desk, agent, call, decision, make_desk, of_type, route
from pydantic import Field

from plangate.agent.replay import record_of, replay
from plangate.errors import InteractionError
from plangate.interactions import Approve
from plangate.store import Store
from plangate.tools import ToolRegistry, tool


def _recorded(store: Store, desk: Desk) -> str:
    runner, _ = agent(
        [
            route("execute"),
            call("lookup", query="free slots"),
            call("place", task="gym", slot=9),
            decision("done", speak="Placed."),
            "The gym is in slot 9.",
        ],
        desk,
        store,
    )
    result = runner.run("Put the gym in an evening slot")
    while result.interaction is not None:
        result = runner.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed"
    return result.run_id


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket opened during the replay fails the test."""

    def refused(*_: Any, **__: Any) -> None:
        raise AssertionError("the replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refused)


def test_a_replay_reproduces_the_run_with_no_network_and_no_tool_called(no_network: None) -> None:
    desk = make_desk()
    store = agent([], desk)[0].store
    run_id = _recorded(store, desk)
    calls = list(desk.calls)

    verdict = replay(store, run_id, desk.registry)

    assert verdict.reproduced, verdict.diff.why
    assert verdict.status == "completed"
    assert desk.calls == calls  # the lookup's and the write's recorded results were played back
    assert [row.key for row in verdict.diff.rows] == ["1", "2", "3", "outcome"]


def test_the_raw_model_text_of_each_round_is_stored_and_played_back() -> None:
    desk = make_desk()
    store = agent([], desk)[0].store
    run_id = _recorded(store, desk)

    rounds = of_type(store.events(run_id), "round")

    assert rounds[1].raw == call("place", task="gym", slot=9)
    record = record_of(store.events(run_id), [])
    assert record.outputs["execute"][1] == rounds[1].raw
    assert [r.summary for r in record.results["place"]] == ["placed gym at 9"]


def test_a_planted_divergence_is_reported_at_its_round() -> None:
    desk = make_desk()
    store = agent([], desk)[0].store
    run_id = _recorded(store, desk)

    @tool(effect="write")
    def place(task: str, slot: Annotated[int, Field(le=5)]) -> str:
        """Place a task in a slot (now at most slot 5)."""
        return f"placed {task} at {slot}"

    stricter = ToolRegistry([desk.registry.get("lookup"), desk.registry.get("echo"), place])
    verdict = replay(store, run_id, stricter)

    assert not verdict.reproduced
    assert verdict.diff.first == "2"  # round 1 is as recorded; the call of round 2 is now refused
    assert verdict.diff.why.startswith("result: ok: placed gym at 9 vs ")


def test_only_a_finished_agent_run_is_replayed() -> None:
    desk = make_desk()
    runner, _ = agent([route("execute"), call("place", task="gym", slot=9)], desk)
    waiting = runner.run("Put the gym somewhere")
    with pytest.raises(InteractionError, match="only a run that ended is replayed"):
        replay(runner.store, waiting.run_id, desk.registry)
