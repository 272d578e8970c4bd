"""Consent and questions: writes wait for a person, approval runs exactly the stored call, ids are checked."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import agent, call, decision, make_desk, memory_store, of_type, plan

from plangate.agent import Agent, AgentResult
from plangate.decisions import digest_arguments
from plangate.errors import InteractionError, NotFoundError, StaleInteraction
from plangate.interactions import Answer, Approve, Edit, Reject
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore, Store
from plangate.tools import ToolRegistry, tool


def _watched_write(model: ScriptedModel, store: Store, seen: list[dict[str, Any]]) -> ToolRegistry:
    """A write tool that notes, when it runs, how many model calls were made and how many rounds used."""

    @tool(effect="write")
    def place(task: str, slot: int) -> str:
        """Place a task in a slot."""
        runs = store.list_runs(kind="agent", limit=1).items
        rounds = store.get_snapshot(runs[0].id)
        seen.append(
            {
                "arguments": {"task": task, "slot": slot},
                "model_calls": len(model.requests),
                "rounds_used": rounds.state["rounds_used"] if rounds else None,
            }
        )
        return f"placed {task} at {slot}"

    return ToolRegistry([place])


def _state(store: Store, run_id: str) -> tuple[int, str, int]:
    return store.last_seq(run_id), store.get_run(run_id).status, len(store.receipts(run_id))


def test_a_write_becomes_a_consent_request_and_approval_runs_exactly_that_call() -> None:
    store = memory_store()
    model = ScriptedModel([call("place", task="gym", slot="3"), decision("ask_user", speak="Anything else?")])
    seen: list[dict[str, Any]] = []
    runner = Agent(model=model, tools=_watched_write(model, store, seen), store=store, mode="react")

    waiting = runner.run("put the gym in slot 3")

    assert waiting.waiting and waiting.interaction is not None
    interaction = waiting.interaction
    assert interaction.kind == "confirm"
    assert interaction.tool is not None
    assert (interaction.tool.name, interaction.tool.arguments) == ("place", {"task": "gym", "slot": 3})
    assert interaction.tool.arguments_digest == digest_arguments({"task": "gym", "slot": 3})
    assert interaction.prompt == 'Allow place (Place a task in a slot.) with {"slot": 3, "task": "gym"}?'
    assert seen == []  # nothing ran before consent
    calls_before = len(model.requests)

    result = runner.resume(waiting.run_id, interaction.id, Approve())

    assert seen == [{"arguments": {"task": "gym", "slot": 3}, "model_calls": calls_before, "rounds_used": 1}]
    assert len(model.requests) == calls_before + 1  # only the next round's call
    next_prompt = model.requests[-1].messages[-1].content
    assert 'call: place {"slot":3,"task":"gym"}\nobservation: placed gym at 3' in next_prompt
    rounds = of_type(store.events(result.run_id), "round")
    assert [r.round for r in rounds] == [1, 2]  # approving consumed no round
    (receipt,) = store.receipts(result.run_id)
    assert (receipt.source, receipt.name, receipt.success) == ("write_receipt", "place", True)
    assert receipt.arguments_digest == interaction.tool.arguments_digest
    intent = store.get_write_intent(interaction.id)
    assert intent is not None and intent.status == "done"
    assert store.get_interaction(interaction.id).resolution == {"kind": "approve"}


def test_edit_runs_the_edited_call_after_validating_it() -> None:
    store = memory_store()
    model = ScriptedModel([call("place", task="gym", slot=3), decision("ask_user", speak="ok?")])
    seen: list[dict[str, Any]] = []
    runner = Agent(model=model, tools=_watched_write(model, store, seen), store=store, mode="react")
    waiting = runner.run("place the gym")
    assert waiting.interaction is not None

    result = runner.resume(
        waiting.run_id, waiting.interaction.id, Edit(arguments={"task": "gym", "slot": "5"})
    )

    assert [s["arguments"] for s in seen] == [{"task": "gym", "slot": 5}]
    (receipt,) = store.receipts(result.run_id)
    assert receipt.arguments_digest == digest_arguments({"task": "gym", "slot": 5})
    assert store.get_interaction(waiting.interaction.id).resolution == {
        "kind": "edit",
        "arguments": {"task": "gym", "slot": "5"},
    }


def test_an_invalid_edit_is_refused_and_changes_nothing() -> None:
    desk = make_desk()
    runner, model = agent([call("place", task="gym", slot=3)], desk, mode="react")
    waiting = runner.run("place the gym")
    assert waiting.interaction is not None
    before = _state(runner.store, waiting.run_id)

    with pytest.raises(InteractionError) as caught:
        runner.resume(waiting.run_id, waiting.interaction.id, Edit(arguments={"task": "gym", "slot": "nine"}))

    assert str(caught.value) == (
        "the edited arguments of 'place' do not fit its parameters: arguments.slot: expected an integer, got "
        "'nine'; nothing changed"
    )
    assert _state(runner.store, waiting.run_id) == before
    assert runner.store.get_interaction(waiting.interaction.id).status == "open"
    assert desk.calls == [] and len(model.requests) == 1


def test_reject_tells_the_model_as_an_observation_and_runs_nothing() -> None:
    desk = make_desk()
    runner, model = agent(
        [call("place", task="gym", slot=3), decision("ask_user", speak="Another slot?")], desk, mode="react"
    )
    waiting = runner.run("place the gym")
    assert waiting.interaction is not None

    result = runner.resume(waiting.run_id, waiting.interaction.id, Reject(reason="slot 3 is taken"))

    assert desk.calls == []
    (declined,) = of_type(runner.store.events(result.run_id), "tool_result")
    assert (declined.status, declined.error_code, declined.success) == ("blocked", "rejected", False)
    observation = 'The user declined the call place with {"slot": 3, "task": "gym"}: slot 3 is taken'
    assert declined.observation == observation
    assert f"observation: {observation}" in model.requests[-1].messages[-1].content
    assert runner.store.receipts(result.run_id) == []
    assert runner.store.pending_write_intents(result.run_id) == []


def test_always_execute_runs_writes_without_asking_through_an_intent_and_receipt() -> None:
    desk = make_desk()
    runner, _ = agent(
        [call("place", task="gym", slot=3), decision("done"), "Placed."],
        desk,
        mode="react",
        always_execute=True,
    )

    result = runner.run("place the gym")

    assert result.status == "completed"
    assert desk.calls == [("place", {"task": "gym", "slot": 3})]
    assert runner.store.list_interactions(run_id=result.run_id) == []
    (receipt,) = runner.store.receipts(result.run_id)
    assert receipt.source == "write_receipt"
    intent = runner.store.get_write_intent(f"{result.run_id}:1")
    assert intent is not None and intent.status == "done"


def test_confirm_on_a_write_asks_even_though_the_model_chose_the_action() -> None:
    runner, _ = agent([call("place", action="confirm", task="gym", slot=3)], mode="react")

    result = runner.run("place the gym")

    assert result.interaction is not None and result.interaction.kind == "confirm"


def test_ask_user_opens_a_question_and_the_answer_is_a_receipt_and_a_turn() -> None:
    desk = make_desk()
    runner, model = agent(
        [
            plan(("Find out the slot", "the user named a slot"), ("Confirm", "confirmed")),
            decision("ask_user", speak="Which slot do you want?"),
            decision("next_plan", goal_check="the user said slot 4"),
            decision("ask_user", speak="Shall I go on?"),
        ],
        desk,
        mode="plan",
    )
    waiting = runner.run("book me a slot")
    assert waiting.interaction is not None
    assert (waiting.interaction.kind, waiting.interaction.prompt) == ("ask_user", "Which slot do you want?")

    result = runner.resume(waiting.run_id, waiting.interaction.id, Answer(text="slot 4 please"))

    (receipt,) = runner.store.receipts(result.run_id)
    assert (receipt.step_index, receipt.source, receipt.name, receipt.summary) == (
        0,
        "user_reply",
        "ask_user",
        "slot 4 please",
    )
    advanced = of_type(runner.store.events(result.run_id), "step_advanced")
    assert [(e.from_index, e.to_index) for e in advanced] == [(0, 1)]  # the answer was the evidence
    messages = model.requests[2].messages
    assert [(m.role, m.content) for m in messages[1:3]] == [
        ("user", "book me a slot"),
        ("assistant", "Which slot do you want?"),
    ]
    assert messages[3].content.startswith("slot 4 please\n\n## current_plan")
    assert result.waiting


def test_plan_consent_shows_the_plan_first_and_approval_starts_it() -> None:
    runner, model = agent(
        [plan(("Look", "seen"), ("Act", "done")), decision("ask_user", speak="?")],
        mode="plan",
        plan_consent=True,
    )
    waiting = runner.run("plan it")

    assert waiting.interaction is not None
    assert waiting.interaction.kind == "plan_consent"
    assert (
        waiting.interaction.prompt
        == "Proceed with this plan?\n1. Look (done when: seen)\n2. Act (done when: done)"
    )
    assert [r.purpose for r in model.requests] == ["plan"]

    result = runner.resume(waiting.run_id, waiting.interaction.id, Approve())

    assert [r.purpose for r in model.requests] == ["plan", "execute"]
    started = of_type(runner.store.events(result.run_id), "step_started")
    assert [e.content for e in started] == ["Look"]


def test_a_declined_plan_goes_back_to_planning_with_the_reason() -> None:
    runner, model = agent(
        [
            plan(("Delete everything", "gone")),
            plan(("Archive old files", "archived")),
            decision("ask_user", speak="?"),
        ],
        mode="plan",
        plan_consent=True,
    )
    waiting = runner.run("tidy up")
    assert waiting.interaction is not None

    second = runner.resume(
        waiting.run_id, waiting.interaction.id, Reject(reason="never delete, archive instead")
    )

    assert second.interaction is not None and second.interaction.kind == "plan_consent"
    replanning = model.requests[1].messages
    assert replanning[-1].content == (
        "tidy up\n\nI do not approve the plan\n1. Delete everything\nnever delete, archive instead"
    )
    assert [e.steps[0].content for e in of_type(runner.store.events(second.run_id), "plan")] == [
        "Delete everything",
        "Archive old files",
    ]


def test_unknown_stale_and_foreign_ids_are_refused_and_change_nothing() -> None:
    desk = make_desk()
    store = memory_store()
    runner, _ = agent(
        [call("place", task="a", slot=1), call("place", task="b", slot=2)], desk, store, mode="react"
    )
    first = runner.run("place a")
    other, _ = agent([call("place", task="c", slot=3)], desk, store, mode="react")
    foreign = other.run("place c")
    assert first.interaction is not None and foreign.interaction is not None
    before = _state(store, first.run_id)

    with pytest.raises(NotFoundError, match="no interaction 'int_missing'"):
        runner.resume(first.run_id, "int_missing", Approve())
    with pytest.raises(StaleInteraction, match=f"belongs to run '{foreign.run_id}'"):
        runner.resume(first.run_id, foreign.interaction.id, Approve())
    with pytest.raises(
        InteractionError, match=r"\(confirm\) takes approve, edit or reject; found answer, nothing changed"
    ):
        runner.resume(first.run_id, first.interaction.id, Answer(text="yes"))

    assert _state(store, first.run_id) == before and desk.calls == []
    second = runner.resume(first.run_id, first.interaction.id, Approve())
    assert second.interaction is not None  # now waiting on the next consent
    after = _state(store, first.run_id)

    with pytest.raises(StaleInteraction, match="is resolved already"):
        runner.resume(first.run_id, first.interaction.id, Approve())

    assert _state(store, first.run_id) == after
    assert desk.calls == [("place", {"task": "a", "slot": 1})]


@pytest.mark.parametrize("connections", ["one shared store", "a store per thread"])
def test_two_threads_resolving_one_interaction_exactly_one_wins(tmp_path: Path, connections: str) -> None:
    desk = make_desk()
    path = tmp_path / "runs.db"
    shared = SQLiteStore(path)
    setup, _ = agent([call("place", task="gym", slot=3)], desk, shared, mode="react")
    waiting = setup.run("place the gym")
    assert waiting.interaction is not None
    interaction_id = waiting.interaction.id
    barrier = threading.Barrier(2)
    outcomes: list[AgentResult | BaseException] = []
    opened: list[SQLiteStore] = []

    def resolve() -> None:
        # A store per thread behaves as two processes would: each with its own connection to the file.
        store = shared if connections == "one shared store" else SQLiteStore(path)
        opened.append(store)
        runner, _ = agent([decision("ask_user", speak="next?")], desk, store)
        barrier.wait()
        try:
            outcomes.append(runner.resume(waiting.run_id, interaction_id, Approve()))
        except StaleInteraction as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(type(o).__name__ for o in outcomes) == ["AgentResult", "StaleInteraction"]
    assert desk.calls == [("place", {"task": "gym", "slot": 3})]
    assert len(shared.receipts(waiting.run_id)) == 1
    for store in {id(s): s for s in [shared, *opened]}.values():
        store.close()
