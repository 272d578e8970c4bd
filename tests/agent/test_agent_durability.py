"""Durable runs: resume with only ids (new objects, new processes), a frozen snapshot, exactly-once writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import SimulatedCrash, agent, call, decision, make_desk, memory_store, of_type, plan

from plangate.agent import Agent
from plangate.agent._state import SNAPSHOT_VERSION, AgentState, read_input
from plangate.errors import ConfigError, InteractionError, SchemaVersionError
from plangate.interactions import Answer, Approve
from plangate.models import PROVIDERS, Message, ModelRequest, ScriptedModel
from plangate.store import Store, open_store
from plangate.tools import ToolResult

FIXTURE = Path(__file__).parent / "fixtures" / f"agent_snapshot_v{SNAPSHOT_VERSION}.json"
WORKER = Path(__file__).with_name("agent_worker.py")


def _messages(model: ScriptedModel) -> list[list[Message]]:
    return [list(request.messages) for request in model.requests]


def test_a_new_agent_resumes_with_only_ids_and_the_model_sees_the_same_context() -> None:
    script = [
        plan(("Ask for the slot", "the user named one"), ("Place it", "placed")),
        call("lookup", query="free slots"),
        decision("ask_user", speak="Which slot?"),
        decision("next_plan", goal_check="the user chose slot 4"),
        call("place", task="gym", slot=4),
        decision("done", goal_check="placed in slot 4"),
        "The gym is in slot 4.",
    ]
    # One agent object all along...
    one, one_model = agent(script, make_desk(), mode="plan")
    first = one.run("Place the gym")
    assert first.interaction is not None
    middle = one.resume(first.run_id, first.interaction.id, Answer(text="slot 4"))
    assert middle.interaction is not None
    end = one.resume(first.run_id, middle.interaction.id, Approve())

    # ...and a new agent (new model, new tool objects, same store) for every step, given only ids.
    store = memory_store()
    start, start_model = agent(script[:3], make_desk(), store, mode="plan")
    waiting = start.run("Place the gym")
    assert waiting.interaction is not None
    second, second_model = agent(script[3:5], make_desk(), store)
    asked = second.resume(waiting.run_id, waiting.interaction.id, Answer(text="slot 4"))
    assert asked.interaction is not None
    desk = make_desk()
    third, third_model = agent(script[5:], desk, store)
    resumed = third.resume(waiting.run_id, asked.interaction.id, Approve())

    assert (
        (resumed.status, resumed.answer) == (end.status, end.answer) == ("completed", "The gym is in slot 4.")
    )
    assert _messages(start_model) + _messages(second_model) + _messages(third_model) == _messages(one_model)
    assert desk.calls == [("place", {"task": "gym", "slot": 4})]


def test_the_model_is_rebuilt_from_the_spec_the_run_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(request: ModelRequest) -> str:
        last = request.messages[-1].content
        if request.purpose == "deliver":
            return "Placed."
        return decision("done") if "observation: placed" in last else call("place", task="gym", slot=2)

    monkeypatch.setitem(
        PROVIDERS, "stateless", lambda model_id: ScriptedModel(answer, name=f"stateless:{model_id}")
    )
    store = memory_store()
    desk = make_desk()
    waiting = Agent(model="stateless:v1", tools=desk.registry, store=store, mode="react").run("place the gym")
    assert waiting.interaction is not None
    assert read_input(waiting.run_id, store.get_run(waiting.run_id).input)[1].model == "stateless:v1"

    result = Agent(tools=desk.registry, store=store).resume(waiting.run_id, waiting.interaction.id, Approve())

    assert (result.status, result.answer) == ("completed", "Placed.")


def test_resuming_without_the_model_or_a_tool_is_a_clear_error_that_changes_nothing() -> None:
    store = memory_store()
    waiting, _ = agent([call("place", task="gym", slot=2)], make_desk(), store, mode="react")
    result = waiting.run("place")
    assert result.interaction is not None
    before = store.last_seq(result.run_id)

    with pytest.raises(
        ConfigError, match=r"started with the model 'scripted', which cannot be rebuilt .*pass model="
    ):
        Agent(tools=make_desk().registry, store=store).resume(result.run_id, result.interaction.id, Approve())
    with pytest.raises(ConfigError, match="this process lacks echo, place"):
        Agent(model=ScriptedModel([]), tools=[make_desk().registry.get("lookup")], store=store).resume(
            result.run_id, result.interaction.id, Approve()
        )

    assert store.last_seq(result.run_id) == before
    assert store.get_interaction(result.interaction.id).status == "open"


def test_resume_with_ids_only_returns_a_waiting_or_ended_run_as_it_stands() -> None:
    store = memory_store()
    runner, model = agent([decision("ask_user", speak="Which one?")], make_desk(), store, mode="react")
    waiting = runner.run("pick")

    again = runner.resume(waiting.run_id)

    assert again.waiting and again.interaction is not None
    assert again.interaction.id == waiting.interaction.id  # type: ignore[union-attr]
    assert len(model.requests) == 1
    runner.cancel(waiting.run_id, "not needed any more")
    ended = runner.resume(waiting.run_id)
    assert ended.outcome is not None
    assert (ended.status, ended.outcome.code, ended.answer) == (
        "cancelled",
        "cancelled",
        "The run was cancelled: not needed any more",
    )
    assert store.get_interaction(waiting.interaction.id).status == "expired"  # type: ignore[union-attr]
    with pytest.raises(InteractionError, match="already ended"):
        runner.cancel(waiting.run_id)


# -- the frozen snapshot format ---------------------------------------------------------------------------


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", ["running", "waiting", "writing", "ended"])
def test_the_v1_snapshot_format_is_frozen(name: str) -> None:
    stored = _fixture()["snapshots"][name]

    state = AgentState.model_validate(stored)

    assert json.dumps(state.to_snapshot()) == json.dumps(stored)


def _stored_run(store: Store, snapshot: dict[str, Any], *, version: int = SNAPSHOT_VERSION) -> str:
    fixture = _fixture()
    run = store.create_run("agent", "fixture", fixture["input"])
    with store.transaction(run.id) as tx:
        tx.set_status("running")
        tx.set_snapshot(snapshot, version=version)
    return run.id


def test_a_run_stored_in_format_v1_resumes() -> None:
    store = memory_store()
    run_id = _stored_run(store, _fixture()["snapshots"]["running"])
    model = ScriptedModel([decision("ask_user", speak="Which slot?")])

    result = Agent(model=model, tools=make_desk().registry, store=store).resume(run_id)

    assert result.waiting
    prompt = model.requests[0].messages
    assert prompt[0].content.endswith("Instructions for this agent:\nBe brief.")
    assert "Step 2 of 2: Move the gym there" in prompt[-1].content
    assert "Round 5 of 10 (5 left after this one)." in prompt[-1].content


def test_an_ended_v1_run_reads_back() -> None:
    store = memory_store()
    run_id = _stored_run(store, _fixture()["snapshots"]["ended"])

    # Looking at a run needs no model: the stored spec ('scripted') could not be rebuilt.
    result = Agent(tools=make_desk().registry, store=store).resume(run_id)

    assert result.outcome is not None and result.outcome.code == "max_rounds"
    assert result.answer == "I used all 7 rounds before finishing.\n\nProgress:\n[ ] Find a free slot"


def test_newer_formats_are_refused() -> None:
    store = memory_store()
    newer_snapshot = _stored_run(store, _fixture()["snapshots"]["running"], version=SNAPSHOT_VERSION + 1)
    fixture = _fixture()
    fixture["input"]["format"] = SNAPSHOT_VERSION + 1
    newer_input = store.create_run("agent", "newer", fixture["input"]).id
    runner = Agent(model=ScriptedModel([]), tools=make_desk().registry, store=store)

    with pytest.raises(SchemaVersionError, match="format version 2; this plangate reads up to version 1"):
        runner.resume(newer_snapshot)
    with pytest.raises(SchemaVersionError, match="settings of format version 2"):
        runner.resume(newer_input)


# -- exactly-once writes ----------------------------------------------------------------------------------


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A store on each backend (a SQLite file, then PostgreSQL): these tests run on both."""
    opened = open_store(store_url)
    yield opened
    opened.close()


def _crashed_write(store: Store) -> tuple[str, str]:
    """A run whose approved write died between its intent and its receipt: (run id, interaction id)."""
    runner, _ = agent(
        [call("place", task="gym", slot=3)], make_desk(crash_on_write=True), store, mode="react"
    )
    waiting = runner.run("place the gym")
    assert waiting.interaction is not None
    with pytest.raises(SimulatedCrash):
        runner.resume(waiting.run_id, waiting.interaction.id, Approve())
    (pending,) = store.pending_write_intents(waiting.run_id)
    assert pending.key == waiting.interaction.id
    assert store.get_run(waiting.run_id).status == "running"
    return waiting.run_id, waiting.interaction.id


def test_after_a_crash_the_tools_reconcile_supplies_the_result_and_nothing_runs_twice(store: Store) -> None:
    run_id, key = _crashed_write(store)
    desk = make_desk(reconcile=True)
    desk.done_keys[key] = ToolResult.done("placed gym at 3")
    runner, model = agent([decision("done"), "Placed."], desk, store)

    result = runner.resume(run_id)

    assert desk.reconciled == [key] and desk.calls == []
    assert result.status == "completed"
    intent = store.get_write_intent(key)
    assert intent is not None and intent.status == "done"
    (receipt,) = store.receipts(run_id)
    assert (receipt.source, receipt.success, receipt.summary) == ("write_receipt", True, "placed gym at 3")
    codes = [e.code for e in of_type(store.events(run_id), "status")]
    assert "reconciled" in codes
    assert "observation: placed gym at 3" in model.requests[0].messages[-1].content


def test_a_reconcile_that_finds_nothing_runs_the_write_once_under_the_same_key(store: Store) -> None:
    run_id, key = _crashed_write(store)
    desk = make_desk(reconcile=True)
    runner, _ = agent([decision("done"), "Placed."], desk, store)

    result = runner.resume(run_id)

    assert desk.reconciled == [key]
    assert desk.calls == [("place", {"task": "gym", "slot": 3})]
    assert key in desk.done_keys  # it ran with the consent's id as its idempotency key
    assert result.status == "completed"


def test_without_reconcile_the_outcome_is_unknown_and_a_person_is_asked(store: Store) -> None:
    run_id, key = _crashed_write(store)
    desk = make_desk()
    runner, model = agent([decision("done"), "Checked."], desk, store)

    asked = runner.resume(run_id)

    assert desk.calls == []  # never re-run blindly
    assert asked.waiting and asked.interaction is not None
    assert asked.interaction.kind == "ask_user"
    assert asked.interaction.prompt.startswith(
        'The approved call place with {"slot": 3, "task": "gym"} started, but the run stopped'
    )
    assert [e.code for e in of_type(store.events(run_id), "status")][-1] == "outcome_unknown"
    assert model.requests == []

    result = runner.resume(
        run_id, asked.interaction.id, Answer(text="It is in the calendar, so it happened.")
    )

    assert result.status == "completed"
    intent = store.get_write_intent(key)
    assert intent is not None and intent.status == "done"
    assert [(r.source, r.success) for r in store.receipts(run_id)] == [
        ("write_receipt", False),
        ("user_reply", True),
    ]
    assert "the user says: It is in the calendar" in model.requests[0].messages[-1].content


def test_always_execute_writes_are_exactly_once_too() -> None:
    store = memory_store()
    runner, _ = agent(
        [call("place", task="gym", slot=3)],
        make_desk(crash_on_write=True),
        store,
        mode="react",
        always_execute=True,
    )
    with pytest.raises(SimulatedCrash):
        runner.run("place")
    run_id = store.list_runs(limit=1).items[0].id
    desk = make_desk()
    later, _ = agent([decision("done"), "ok"], desk, store)

    asked = later.resume(run_id)

    assert desk.calls == [] and asked.waiting
    assert asked.interaction is not None and asked.interaction.prompt.startswith("The approved call place")


# -- other processes ----------------------------------------------------------------------------------------


def _worker(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_another_process_resumes_with_only_the_ids(store_url: str) -> None:
    out, err = _worker(store_url, "start").communicate(timeout=60)
    assert err == ""
    run_id, interaction_id = out.split()

    out, err = _worker(store_url, "approve", run_id, interaction_id).communicate(timeout=60)

    assert err == "" and out.strip() == "completed The gym is in slot 3."
    store = open_store(store_url)
    (receipt,) = store.receipts(run_id)
    assert receipt.source == "write_receipt"
    store.close()


@pytest.mark.slow
def test_a_process_killed_mid_write_leaves_an_intent_that_resume_settles_with_a_person(
    tmp_path: Path, store_url: str
) -> None:
    out, _ = _worker(store_url, "start").communicate(timeout=60)
    run_id, interaction_id = out.split()
    marker = tmp_path / "entered"
    process = _worker(store_url, "approve", run_id, interaction_id, env={"PLANGATE_TEST_HANG": str(marker)})
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), process.communicate(timeout=5)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)

    store = open_store(store_url)
    assert [i.key for i in store.pending_write_intents(run_id)] == [interaction_id]
    from agent_worker import TOOLS

    asked = Agent(model=ScriptedModel([decision("done"), "ok"]), tools=TOOLS, store=store).resume(run_id)

    assert asked.waiting and asked.interaction is not None
    assert "may or may not have happened" in asked.interaction.prompt
    store.close()
