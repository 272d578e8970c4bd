"""Completion proven by the runtime: ``done_when`` conditions over the run's receipts, checked after each one.

A run (or a plan step) whose goal is a condition completes when a receipt makes it hold, with that receipt as
its proof and no model call to say so; until then the model cannot declare it done.
"""

from __future__ import annotations

import json

import pytest
from agent_helpers import agent, call, decision, make_desk, memory_store, of_type, plan, route

from plangate.agent import Agent
from plangate.agent._state import read_input
from plangate.errors import ConfigError
from plangate.events import StatusEvent, StepAdvancedEvent
from plangate.interactions import Answer, Approve
from plangate.models import ModelRequest, ScriptedModel
from plangate.tools import ToolRegistry, ToolResult, tool

PLACED = "receipts.any(tool == 'place' and success)"


def _offered(requests: list[ModelRequest]) -> list[set[str]]:
    schemas = [r.response_schema for r in requests if r.purpose == "execute"]
    return [set(s.schema["properties"]["action"]["enum"]) for s in schemas if s is not None]  # type: ignore[index]


def test_a_run_completes_when_its_goal_holds_with_no_done_decision() -> None:
    desk = make_desk()
    store = memory_store()
    runner, model = agent(
        [call("lookup", query="week"), call("place", task="gym", slot=3), "The gym is in slot 3."],
        desk,
        store,
        mode="react",
        done_when=PLACED,
    )

    waiting = runner.run("Put the gym in slot 3")
    assert waiting.interaction is not None and waiting.interaction.kind == "confirm"
    result = runner.resume(waiting.run_id, waiting.interaction.id, Approve())

    assert (result.status, result.answer) == ("completed", "The gym is in slot 3.")
    assert result.outcome is not None and result.outcome.code == "proven"
    assert result.outcome.user_message == f"Proven by receipt #2 (place): {PLACED} holds."
    # Two execute rounds (a read, a write), then the closing message: no round declared done.
    assert [r.purpose for r in model.requests] == ["execute", "execute", "deliver"]
    events = store.events(result.run_id)
    assert not any(r.decision.get("action") == "done" for r in of_type(events, "round"))
    (proven,) = [e for e in of_type(events, "status") if e.code == "proven"]
    assert proven.text == (
        f"the goal {PLACED} holds: receipt #2 (place, write_receipt) satisfies tool == 'place' and success: "
        "tool is 'place' and success is true"
    )
    # The proof is committed with the receipt it rests on: the same transaction, right after its result.
    kinds = [e.type for e in events]
    assert kinds[kinds.index("tool_result", kinds.index("interaction_resolved")) + 1] == "status"
    (first, second) = store.receipts(result.run_id)
    assert (second.source, second.name, second.success, second.output) == (
        "write_receipt",
        "place",
        True,
        "placed gym at 3",
    )
    assert first.output == "found week"


def test_until_the_goal_holds_the_model_cannot_declare_done_and_is_not_offered_it() -> None:
    runner, model = agent(
        [decision("done", speak="All done."), call("lookup", query="a"), decision("abort", abort=_abort())],
        mode="react",
        done_when=PLACED,
    )

    result = runner.run("Put the gym in slot 3")

    assert result.status == "aborted"
    (correction,) = of_type(runner.store.events(result.run_id), "correction")
    assert correction.code == "not_proven"
    assert correction.message == (
        "the request is complete when its goal holds, and the runtime checks that itself after every "
        f"receipt: {PLACED} does not hold yet (no receipts: the run has none yet); keep working, or abort if "
        "it cannot be met"
    )
    everything = {"continue", "ask_user", "confirm", "next_plan", "done", "abort"}
    assert _offered(model.requests) == [everything - {"next_plan", "done"}] * 3
    goal = f"Goal: {PLACED} (the runtime checks it after every result, and completes the request itself"
    assert goal in model.requests[0].messages[-1].content


def _abort() -> dict[str, str]:
    return {"code": "cannot", "user_message": "I cannot place it."}


def test_a_goal_that_never_holds_lets_the_run_go_on_and_exhaust_normally() -> None:
    runner, model = agent(
        [call("lookup", query=str(n)) for n in range(4)],
        mode="react",
        max_rounds=4,
        done_when="receipts.count(tool == 'lookup') >= 10",
    )

    result = runner.run("Look things up")

    assert result.status == "exhausted"
    assert result.outcome is not None and result.outcome.code == "max_rounds"
    assert len(runner.store.receipts(result.run_id)) == 4
    events = runner.store.events(result.run_id)
    assert not [e for e in of_type(events, "status") if e.code == "proven"]
    assert [r.purpose for r in model.requests] == ["execute"] * 4


def test_a_failed_receipt_does_not_satisfy_success_and_a_later_success_does() -> None:
    attempts: list[int] = []

    @tool(effect="write")
    def place(task: str, slot: int) -> ToolResult:
        """Place a task in a slot."""
        attempts.append(slot)
        if slot == 3:
            return ToolResult.failed("slot_taken", "slot 3 is taken", data={"placed": False})
        return ToolResult.done(f"placed {task} at {slot}", data={"placed": True, "slot": slot})

    store = memory_store()
    model = ScriptedModel([call("place", task="gym", slot=3), call("place", task="gym", slot=4), "Slot 4."])
    runner = Agent(model=model, tools=ToolRegistry([place]), store=store, mode="react", done_when=PLACED)

    first = runner.run("Put the gym in")
    assert first.interaction is not None
    second = runner.resume(first.run_id, first.interaction.id, Approve())
    # The write ran and failed: a receipt, but not a successful one, so the run goes on.
    assert second.interaction is not None and second.status == "waiting"
    failed = store.receipts(first.run_id)[0]
    assert (failed.source, failed.success, failed.output) == ("write_receipt", False, {"placed": False})
    assert not [e for e in of_type(store.events(first.run_id), "status") if e.code == "proven"]

    done = runner.resume(first.run_id, second.interaction.id, Approve())

    assert done.status == "completed" and attempts == [3, 4]
    assert done.outcome is not None and done.outcome.user_message.startswith("Proven by receipt #2 (place)")


def test_a_plan_step_whose_done_when_is_a_condition_is_advanced_by_the_runtime() -> None:
    store = memory_store()
    step_one = "receipts.any(tool == 'lookup' and output == 'found week')"
    runner, model = agent(
        [
            plan(("Look up the week", step_one), ("Book", "the gym is booked")),
            call("lookup", query="gym"),  # not the week: the step stays
            call("lookup", query="week"),  # proves step 1: the runtime moves on
            call("lookup", query="slots"),
            decision("done", goal_check="booked: lookup slots"),
            "Booked.",
        ],
        store=store,
        mode="plan",
    )

    result = runner.run("Book the gym")

    assert result.status == "completed" and result.outcome is not None and result.outcome.code == "done"
    events = store.events(result.run_id)
    (advanced,) = of_type(events, "step_advanced")
    assert isinstance(advanced, StepAdvancedEvent) and advanced.proof is not None
    assert (advanced.from_index, advanced.to_index) == (0, 1)
    assert advanced.proof.condition == step_one
    assert advanced.proof.receipt.number == 2 and advanced.proof.receipt.summary == "found week"
    assert advanced.goal_check.startswith("proven: receipt #2 (lookup, tool_observation) satisfies")
    # No round declared next_plan; the rounds after the proof were on step 2.
    rounds = of_type(events, "round")
    assert [r.step_index for r in rounds] == [0, 0, 1, 1]
    assert all(r.decision.get("action") != "next_plan" for r in rounds)
    # The model read the proof in the next prompt, in its place in the history.
    third = [r for r in model.requests if r.purpose == "execute"][2]
    assert "Step 1 is complete, proven by the runtime: receipt #2 (lookup, tool_observation)" in (
        third.messages[-1].content
    )
    # A receipt of step 1 does not count for step 2, which needed its own (text: claimed with a receipt).
    assert [r.step_index for r in store.receipts(result.run_id)] == [0, 0, 1]


def test_the_model_cannot_claim_a_step_that_a_condition_proves() -> None:
    runner, model = agent(
        [
            plan(("Look", "receipts.any(tool == 'lookup')"), ("Book", "booked")),
            decision("next_plan", goal_check="looked"),
            call("lookup", query="week"),
            call("place", task="gym", slot=1),
        ],
        mode="plan",
    )

    result = runner.run("Book")

    events = runner.store.events(result.run_id)
    (correction,) = of_type(events, "correction")
    assert correction.code == "not_proven"
    assert correction.message.startswith(
        "step 1 is complete when its done_when holds, and the runtime checks that itself after every "
        "receipt: receipts.any(tool == 'lookup') does not hold yet (no receipts: the run has none yet)"
    )
    everything = {"continue", "ask_user", "confirm", "next_plan", "done", "abort"}
    # On the condition step, neither next_plan nor done; on step 2 (words, the last), done.
    assert _offered(model.requests) == [everything - {"next_plan", "done"}] * 2 + [everything - {"next_plan"}]
    assert result.status == "waiting" and of_type(events, "step_advanced")[0].proof is not None


def test_the_last_plan_step_proven_by_its_condition_completes_the_run() -> None:
    runner, model = agent(
        [plan(("Place it", PLACED)), call("place", task="gym", slot=2), "Placed."], mode="plan"
    )
    waiting = runner.run("Place the gym")
    assert waiting.interaction is not None

    result = runner.resume(waiting.run_id, waiting.interaction.id, Approve())

    assert result.status == "completed" and result.outcome is not None and result.outcome.code == "proven"
    (proven,) = [e for e in of_type(runner.store.events(result.run_id), "status") if e.code == "proven"]
    assert proven.text.startswith("step 1, the last, is proven: receipt #1 (place, write_receipt)")
    assert [r.purpose for r in model.requests] == ["plan", "execute", "deliver"]


def test_a_persons_answer_is_a_receipt_a_condition_can_read() -> None:
    done_when = "receipts.any(source == 'user_reply' and output == 'yes')"
    runner, model = agent(
        [decision("ask_user", speak="Shall I?"), decision("ask_user", speak="Sure?"), "Confirmed."],
        mode="react",
        done_when=done_when,
    )
    first = runner.run("Ask me")
    assert first.interaction is not None
    second = runner.resume(first.run_id, first.interaction.id, Answer(text="maybe"))
    assert second.interaction is not None

    result = runner.resume(first.run_id, second.interaction.id, Answer(text="yes"))

    assert result.status == "completed" and result.outcome is not None and result.outcome.code == "proven"
    assert [r.output for r in runner.store.receipts(result.run_id)] == ["maybe", "yes"]
    assert [r.purpose for r in model.requests] == ["execute", "execute", "deliver"]


def test_the_goal_is_kept_with_the_run_and_a_resuming_agent_proves_it_too() -> None:
    store = memory_store()
    desk = make_desk()
    started = Agent(
        model=ScriptedModel([call("place", task="gym", slot=3)]),
        tools=desk.registry,
        store=store,
        mode="react",
        done_when=PLACED,
    ).run("Place the gym")
    assert started.interaction is not None
    assert read_input(started.run_id, store.get_run(started.run_id).input)[1].done_when == PLACED

    # Another agent, with no done_when of its own: the run keeps the goal it was started with.
    result = Agent(model=ScriptedModel(["Placed."]), tools=desk.registry, store=store).resume(
        started.run_id, started.interaction.id, Approve()
    )

    assert result.status == "completed" and result.outcome is not None and result.outcome.code == "proven"


def test_a_run_without_a_goal_is_stored_as_before() -> None:
    store = memory_store()
    result = Agent(model=ScriptedModel([decision("done"), "ok"]), store=store, mode="react").run("hi")
    stored = store.get_run(result.run_id).input["agent"]
    assert isinstance(stored, dict) and "done_when" not in stored


def test_a_goal_routes_past_a_direct_reply() -> None:
    runner, _ = agent(
        [route("reply", "Sure, done!"), call("place", task="gym", slot=1)], mode="auto", done_when=PLACED
    )

    result = runner.run("Place the gym")

    assert result.status == "waiting"  # acting for evidence, not replying
    statuses = of_type(runner.store.events(result.run_id), "status")
    (status,) = [e for e in statuses if e.stage == "route" and e.code != "started"]
    assert isinstance(status, StatusEvent) and status.code == "execute"
    assert status.text == f"acting, since the goal {PLACED} needs evidence a direct reply cannot give"


@pytest.mark.parametrize(
    ("done_when", "message"),
    [
        (
            "receipts.any(tol == 'place')",
            "Agent done_when: unknown receipt field 'tol' at column 14; expected tool, success, step, source "
            "or output (did you mean 'tool'?)\nreceipts.any(tol == 'place')\n             ^",
        ),
        (
            "place.status == 'complete'",
            "Agent done_when: a done_when condition reads the run's receipts only; found 'place.status' at "
            "column 1 (an agent run has no steps to read)\nplace.status == 'complete'\n^",
        ),
        (
            "the review is placed",
            "Agent done_when: expected '.' and 'status', 'id' or 'output' after 'the' at column 5, found "
            "'review'\nthe review is placed\n    ^",
        ),
    ],
)
def test_a_goal_that_is_not_a_condition_over_receipts_is_refused_with_its_column(
    done_when: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Agent(model=ScriptedModel([]), store=memory_store(), done_when=done_when)
    assert str(caught.value) == message


def test_the_proof_reads_the_tools_output() -> None:
    @tool
    def slots(day: str) -> dict[str, object]:
        """Free slots of a day."""
        return {"day": day, "free": [1, 4] if day == "tue" else []}

    model = ScriptedModel(
        [
            json.dumps({"action": "continue", "tool_call": {"name": "slots", "arguments": {"day": "mon"}}}),
            json.dumps({"action": "continue", "tool_call": {"name": "slots", "arguments": {"day": "tue"}}}),
            "Tuesday has free slots.",
        ]
    )
    runner = Agent(
        model=model,
        tools=ToolRegistry([slots]),
        store=memory_store(),
        mode="react",
        done_when="receipts.any(output.day == 'tue' and output.free)",
    )

    result = runner.run("When am I free?")

    assert result.status == "completed" and result.outcome is not None
    assert result.outcome.user_message.startswith("Proven by receipt #2 (slots)")
