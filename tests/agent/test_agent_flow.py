"""The agent's phases end to end on a scripted model: route, plan, execute with evidence, deliver, stream."""

from __future__ import annotations

import asyncio

import pytest
from agent_helpers import agent, call, decision, make_desk, memory_store, of_type, plan, route

from plangate.agent import Agent, AgentResult
from plangate.events import (
    Event,
    OutcomeEvent,
    PlanEvent,
    RoundEvent,
    StepAdvancedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.models import ModelRequest, ModelUnavailableError, ScriptedModel, Wire


@pytest.mark.parametrize("wire", ["json", "tagged"])
def test_a_planned_run_proves_each_step_and_delivers_a_summary(wire: Wire) -> None:
    desk = make_desk()
    store = memory_store()
    script = [
        route("plan"),
        plan(
            ("Look up the week", "the week is known"), ("Look up the gym", "the gym slot is known"), wire=wire
        ),
        call("lookup", wire, query="week"),
        decision("next_plan", wire=wire, goal_check="lookup returned the week", reply="Week known."),
        call("lookup", wire, query="gym"),
        decision("done", wire=wire, goal_check={"done_when": "gym slot known", "evidence": "lookup gym"}),
        "Your week and the gym slot are known.",
    ]
    runner, model = agent(script, desk, store, wire=wire)

    result = runner.run("Find a gym slot this week")

    assert result.status == "completed"
    assert result.outcome is not None and (result.outcome.status, result.outcome.code) == (
        "completed",
        "done",
    )
    assert result.answer == "Your week and the gym slot are known."
    assert [r.purpose for r in model.requests] == ["route", "plan", *["execute"] * 4, "deliver"]
    assert desk.calls == [("lookup", {"query": "week"}), ("lookup", {"query": "gym"})]
    events = store.events(result.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [step.content for step in of_type(events, "plan")[0].steps] == [
        "Look up the week",
        "Look up the gym",
    ]
    advanced = of_type(events, "step_advanced")
    assert [(e.from_index, e.to_index, e.goal_check) for e in advanced] == [
        (0, 1, "lookup returned the week")
    ]
    receipts = store.receipts(result.run_id)
    assert [(r.step_index, r.source, r.name, r.success) for r in receipts] == [
        (0, "tool_observation", "lookup", True),
        (1, "tool_observation", "lookup", True),
    ]
    rounds = of_type(events, "round")
    assert [r.round for r in rounds] == [2, 3, 4, 5]  # the planning call was round 1 of the budget
    assert [r.step_index for r in rounds] == [0, 0, 1, 1]
    assert rounds[0].result == {
        "action": "tool",
        "tool": "lookup",
        "arguments": {"query": "week"},
        "status": "done",
        "success": True,
        "summary": "found week",
    }
    assert rounds[-1].decision["goal_check"] == "satisfied done_when: gym slot known; evidence: lookup gym"
    speaks = [e.text for e in of_type(events, "speak")]
    assert speaks[-1] == result.answer
    if wire == "tagged":
        assert "Week known." in speaks
    assert isinstance(events[-1], OutcomeEvent) and events[-1].code == "done"
    assert store.get_run(result.run_id).status == "completed"


def test_route_reply_answers_directly_with_one_model_call() -> None:
    runner, model = agent([route("reply", "Paris is the capital of France.")])

    result = runner.run("What is the capital of France?")

    assert (result.status, result.answer) == ("completed", "Paris is the capital of France.")
    assert result.outcome is not None and (result.outcome.stage, result.outcome.code) == ("route", "replied")
    assert [r.purpose for r in model.requests] == ["route"]


def test_route_reply_without_text_lets_deliver_write_it() -> None:
    runner, model = agent([route("reply"), "Hello there."])

    result = runner.run("hi")

    assert result.answer == "Hello there."
    assert [r.purpose for r in model.requests] == ["route", "deliver"]


def test_an_unreadable_route_plans() -> None:
    runner, model = agent(
        ["I think we should plan", plan(("Answer", "answered")), decision("ask_user", speak="Which?")]
    )

    result = runner.run("do the thing")

    assert [r.purpose for r in model.requests] == ["route", "plan", "execute"]
    assert result.waiting
    assert result.interaction is not None and result.interaction.kind == "ask_user"


def test_route_execute_acts_without_a_plan() -> None:
    runner, _ = agent([route("execute"), call("lookup", query="x"), decision("done"), "Found x."])

    result = runner.run("look up x")

    assert result.answer == "Found x."
    rounds = of_type(runner.store.events(result.run_id), "round")
    assert [r.step_index for r in rounds] == [None, None]


def test_react_mode_skips_routing_and_plan_mode_skips_routing() -> None:
    react, react_model = agent([decision("done", speak="ok"), "Done."], mode="react")
    planned, plan_model = agent([plan(("Only step", "done")), decision("ask_user", speak="?")], mode="plan")

    react.run("quick")
    planned.run("planned")

    assert [r.purpose for r in react_model.requests] == ["execute", "deliver"]
    assert [r.purpose for r in plan_model.requests] == ["plan", "execute"]


def test_deliver_falls_back_to_the_checklist_when_the_model_fails() -> None:
    failing = ModelUnavailableError("down", provider="scripted")
    runner, _ = agent(
        [
            plan(("Look", "seen"), ("Summarise", "summarised")),
            call("lookup", query="a"),
            decision("next_plan", goal_check="seen"),
            call("lookup", query="b"),
            decision("done", goal_check="summarised"),
            failing,
        ],
        mode="plan",
    )

    result = runner.run("two steps")

    assert result.status == "completed"
    assert result.answer == "[x] Look\n[x] Summarise"


def test_a_model_that_fails_mid_run_aborts_with_model_error() -> None:
    runner, model = agent(
        [call("lookup", query="a"), ModelUnavailableError("HTTP 503", provider="p")], mode="react"
    )

    result = runner.run("go")

    assert result.outcome is not None
    assert (result.status, result.outcome.code, result.outcome.stage) == ("aborted", "model_error", "execute")
    assert result.answer == "The model failed to answer, so I stopped."
    assert "HTTP 503" in result.outcome.internal_reason
    assert [r.purpose for r in model.requests] == ["execute", "execute"]  # no deliver call for an abort
    failed = of_type(runner.store.events(result.run_id), "round")[-1]
    assert failed.result == {"action": "abort", "code": "model_error"}
    assert failed.validation["flow_reason"] == "no decision: the model failed (ModelUnavailableError)"


def test_a_failing_tool_is_an_observation_and_the_run_goes_on() -> None:
    from plangate.tools import ToolRegistry, tool

    @tool
    def broken(path: str) -> str:
        """Always fails."""
        raise ValueError(f"no such file: {path}")

    runner = Agent(
        model=ScriptedModel([call("broken", path="/x"), decision("done"), "Could not read it."]),
        tools=ToolRegistry([broken]),
        store=memory_store(),
        mode="react",
    )

    result = runner.run("read /x")

    events = runner.store.events(result.run_id)
    (failed,) = of_type(events, "tool_result")
    assert (failed.status, failed.error_code) == ("failed", "tool_error")
    assert failed.observation == "tool 'broken' failed: ValueError: no such file: /x"
    assert result.status == "completed"
    assert runner.store.receipts(result.run_id) == []  # a failed read proves nothing


def test_model_abort_ends_with_its_code_and_message_and_no_deliver_call() -> None:
    abort = {"code": "out_of_scope", "user_message": "I can only manage calendars.", "internal_reason": "tax"}
    runner, model = agent([decision("abort", abort=abort)], mode="react")

    result = runner.run("file my taxes")

    assert result.outcome is not None
    assert (result.outcome.status, result.outcome.code) == ("aborted", "out_of_scope")
    assert result.answer == "I can only manage calendars."
    assert [r.purpose for r in model.requests] == ["execute"]


def test_stream_yields_typed_events_in_seq_order_as_committed() -> None:
    runner, _ = agent([call("lookup", query="a"), decision("done", speak="ok"), "Done."], mode="react")

    async def collect() -> tuple[list[Event], AgentResult | None, str]:
        stream = runner.stream("look up a")
        seen = [event async for event in stream]
        return seen, stream.result, stream.run_id

    seen, result, run_id = asyncio.run(collect())

    assert seen == runner.store.events(run_id)
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    types = [type(e) for e in seen]
    assert RoundEvent in types and ToolCallEvent in types and ToolResultEvent in types
    assert isinstance(seen[-1], OutcomeEvent)
    assert result is not None and result.status == "completed" and result.run_id == run_id
    assert PlanEvent not in types and StepAdvancedEvent not in types


def test_each_round_offers_the_model_only_the_actions_the_flow_accepts() -> None:
    runner, model = agent(
        [
            plan(("Look", "seen"), ("Summarise", "summarised")),
            call("lookup", query="a"),
            decision("next_plan", goal_check="seen"),
            call("lookup", query="b"),
            decision("done", goal_check="summarised"),
            "Summarised.",
        ],
        mode="plan",
    )
    react, react_model = agent([decision("done", speak="ok"), "Done."], mode="react")

    assert runner.run("two steps").status == "completed"
    assert react.run("quick").status == "completed"

    def offered(requests: list[ModelRequest]) -> list[set[str]]:
        schemas = [r.response_schema for r in requests if r.purpose == "execute"]
        return [set(s.schema["properties"]["action"]["enum"]) for s in schemas if s is not None]  # type: ignore[index]

    everything = {"continue", "ask_user", "confirm", "next_plan", "done", "abort"}
    # Step 1 of 2: no done yet; step 2 of 2, the last: no next_plan. Without a plan: no next_plan.
    assert offered(model.requests) == [everything - {"done"}] * 2 + [everything - {"next_plan"}] * 2
    assert offered(react_model.requests) == [everything - {"next_plan"}]
