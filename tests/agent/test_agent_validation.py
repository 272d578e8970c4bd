"""Round validation: every rule gives its exact correction, corrections are hidden, and runs always end."""

from __future__ import annotations

import pytest
from agent_helpers import agent, call, decision, make_desk, of_type, plan

from plangate.agent import Agent
from plangate.models import ScriptedModel, Wire
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, tool

# Each case: the mode, the answers before the faulty one, the faulty one, the correction code and message.
CASES = {
    "next_plan without a plan": (
        "react",
        [],
        decision("next_plan", goal_check="done"),
        "no_plan",
        "next_plan needs a current plan step, and there is no plan: declare done when finished",
    ),
    "next_plan on the last step": (
        "plan",
        [plan(("Only", "seen")), call("lookup", query="a")],
        decision("next_plan", goal_check="seen"),
        "last_step",
        "step 1 is the last step of the plan: declare done when it is complete",
    ),
    "done before the last step": (
        "plan",
        [plan(("First", "a"), ("Second", "b")), call("lookup", query="a")],
        decision("done", goal_check="a"),
        "not_last_step",
        "done needs the last plan step, and step 1 of 2 is current: declare next_plan when it is complete",
    ),
    "unknown tool": (
        "react",
        [],
        call("lokup", query="a"),
        "unknown_tool",
        "unknown tool 'lokup' (did you mean 'lookup'?)",
    ),
    "arguments that do not fit": (
        "react",
        [],
        call("lookup", query=5),
        "invalid_arguments",
        "the arguments of 'lookup' do not fit its parameters: arguments.query: expected a string, got 5",
    ),
    "ask_user without a question": (
        "react",
        [],
        decision("ask_user"),
        "no_question",
        "ask_user needs the question for the user in speak",
    ),
    "next_plan without a goal check": (
        "plan",
        [plan(("First", "a"), ("Second", "b")), call("lookup", query="a")],
        decision("next_plan"),
        "no_goal_check",
        "step 1 needs a goal_check: say why its done_when is met",
    ),
    "next_plan with no evidence for the new step": (
        "plan",
        [
            plan(("First", "a"), ("Second", "b"), ("Third", "c")),
            call("lookup", query="a"),
            decision("next_plan", goal_check="a is known"),
        ],
        decision("next_plan", goal_check="the lookup of step 1 shows it"),
        "no_evidence",
        "step 2 has no evidence yet: call a tool or ask the user",
    ),
}


def _on(wire: Wire, answers: list[str]) -> list[str]:
    """The same JSON answers, written on ``wire``."""
    return answers if wire == "json" else [f"<decision>{answer}</decision>" for answer in answers]


@pytest.mark.parametrize("wire", ["json", "tagged"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule_gives_its_exact_correction_and_the_model_reads_it_next_round(
    case: str, wire: Wire
) -> None:
    mode, before, faulty, code, message = CASES[case]
    answers = _on(wire, [*before, faulty, decision("ask_user", speak="Stop here?")])
    runner, model = agent(answers, mode=mode, wire=wire)

    result = runner.run("do it")

    events = runner.store.events(result.run_id)
    (correction,) = of_type(events, "correction")
    assert (correction.code, correction.message) == (code, message)
    faulty_round = of_type(events, "round")[-2]
    assert faulty_round.result == {"action": "correction", "code": code}
    assert faulty_round.validation[_check_of(code) + "_reason"] == message
    assert faulty_round.validation[_check_of(code) + "_passed"] is False
    last = model.requests[-1].messages
    assert last[-1].role == "user" and last[-1].content.endswith(f"## correction\n{_note(message)}")
    conversation = [m.content for m in last[1:-1]]
    assert all(message not in text for text in conversation)  # hidden from the visible conversation
    assert result.waiting  # and the run went on to the next round


def _check_of(code: str) -> str:
    return "evidence" if code in ("no_goal_check", "no_evidence") else "flow"


def _note(message: str) -> str:
    return f"Your last decision was not accepted, for this reason:\n- {message}"


def test_an_inactive_tool_is_corrected_with_the_call_that_activates_it() -> None:
    @tool(domain="calendar", pack="edit")
    def reschedule(event: str) -> str:
        """Move an event."""
        return "moved"

    runner = Agent(
        model=ScriptedModel([call("reschedule", event="gym"), decision("ask_user", speak="?")]),
        tools=ToolRegistry([reschedule]),
        store=SQLiteStore(":memory:"),
        mode="react",
    )

    result = runner.run("move the gym")

    (correction,) = of_type(runner.store.events(result.run_id), "correction")
    assert correction.code == "inactive_tool"
    assert correction.message == (
        'tool \'reschedule\' is not active: call context_tools_add {"domain": "calendar", "packs": ["edit"]} '
        "first"
    )


def test_activating_a_domain_makes_its_tools_callable_and_is_no_evidence() -> None:
    moved: list[str] = []

    @tool(domain="calendar", pack="edit", effect="write")
    def reschedule(event: str) -> str:
        """Move an event."""
        moved.append(event)
        return "moved"

    runner = Agent(
        model=ScriptedModel(
            [
                call("context_tools_add", domain="calendar"),
                call("reschedule", event="gym"),
                decision("done"),
                "Moved.",
            ]
        ),
        tools=ToolRegistry([reschedule]),
        store=SQLiteStore(":memory:"),
        mode="react",
        always_execute=True,
    )

    result = runner.run("move the gym")

    assert (result.status, moved) == ("completed", ["gym"])
    receipts = runner.store.receipts(result.run_id)
    assert [r.source for r in receipts] == ["write_receipt"]  # the write; activating the domain is none
    assert runner.store.pending_write_intents(result.run_id) == []


def test_three_corrections_in_a_row_abort_with_a_fixed_deliver_text() -> None:
    runner, model = agent(
        [call("nope"), decision("next_plan", goal_check="x"), "not even json"], mode="react"
    )

    result = runner.run("go")

    assert result.outcome is not None
    assert (result.status, result.outcome.code, result.outcome.stage) == (
        "aborted",
        "corrections_exhausted",
        "execute",
    )
    assert (
        result.answer == "I could not produce a valid next step after 3 corrections in a row, so I stopped."
    )
    assert [r.purpose for r in model.requests] == ["execute"] * 3  # no model call to deliver an abort
    events = runner.store.events(result.run_id)
    assert [e.code for e in of_type(events, "correction")] == ["unknown_tool", "no_plan", "malformed_output"]
    assert events[-1].type == "outcome"


def test_a_valid_round_resets_the_correction_count() -> None:
    runner, _ = agent(
        [
            call("nope"),
            call("nope"),
            call("lookup", query="a"),
            call("nope"),
            call("nope"),
            decision("done"),
            "ok",
        ],
        mode="react",
    )

    result = runner.run("go")

    assert result.status == "completed"


@pytest.mark.parametrize(
    ("wire", "output", "message"),
    [
        ("json", "I will look it up", "decision: expected a JSON object, found no '{'"),
        (
            "tagged",
            "Sure, looking now.",
            "decision: expected <decision>{…}</decision> within the first 500 characters; "
            "found a plain reply",
        ),
        (
            "tagged",
            '<decision>{"action": "continue"',
            "decision: the JSON object inside <decision> is not closed (the output ended)",
        ),
        (
            "json",
            '{"action": "fly"}',
            "action: expected one of continue, ask_user, confirm, next_plan, done, abort, got 'fly'",
        ),
        (
            "json",
            '{"action": "continue", "tool_call": "lookup"}',
            "tool_call: expected an object, got a string",
        ),
    ],
)
def test_malformed_output_is_a_correction_with_the_parsers_message(
    wire: Wire, output: str, message: str
) -> None:
    runner, _ = agent([output, decision("ask_user", speak="?", wire=wire)], wire=wire, mode="react")

    result = runner.run("go")

    (correction,) = of_type(runner.store.events(result.run_id), "correction")
    assert (correction.code, correction.message) == ("malformed_output", message)
    first = of_type(runner.store.events(result.run_id), "round")[0]
    assert first.decision == {} and first.validation["flow_reason"] == f"malformed output: {message}"
    assert result.waiting


def test_the_round_budget_ends_the_run_exhausted() -> None:
    runner, model = agent([call("lookup", query=str(i)) for i in range(10)], mode="react", max_rounds=3)

    result = runner.run("keep going")

    assert result.outcome is not None
    assert (result.status, result.outcome.code) == ("exhausted", "max_rounds")
    assert result.answer == "I used all 3 rounds before finishing."
    assert len(model.requests) == 3
    assert len(of_type(runner.store.events(result.run_id), "round")) == 3


def test_an_exhausted_plan_lists_its_progress() -> None:
    runner, _ = agent(
        [
            plan(("Look", "seen"), ("Act", "acted")),
            call("lookup", query="a"),
            decision("next_plan", goal_check="seen"),
        ],
        mode="plan",
        max_rounds=3,
    )

    result = runner.run("two steps")

    assert result.answer == "I used all 3 rounds before finishing.\n\nProgress:\n[x] Look\n[ ] Act"


def test_the_same_call_with_nothing_new_is_corrected_then_aborted_as_stalled() -> None:
    desk = make_desk()
    runner, model = agent([call("echo", text="hi")] * 4, desk, mode="react")

    result = runner.run("echo")

    assert desk.names() == ["echo", "echo"]  # the third identical call is not run
    events = runner.store.events(result.run_id)
    (correction,) = of_type(events, "correction")
    assert correction.code == "stalled"
    assert correction.message == (
        "stalled: 'echo' was called with the same arguments 2 rounds in a row and returned nothing new; "
        "change the arguments, use another tool, or ask the user"
    )
    assert result.outcome is not None
    assert (result.status, result.outcome.code) == ("aborted", "stalled")
    assert [r.result for r in of_type(events, "round")][-1] == {"action": "abort", "code": "stalled"}
    assert len(model.requests) == 4


def test_a_call_that_learns_something_new_is_no_stall() -> None:
    runner, _ = agent(
        [call("lookup", query="a"), call("lookup", query="b")] * 3 + [decision("done"), "ok"], mode="react"
    )

    assert runner.run("look").status == "completed"


def test_confirm_on_a_read_tool_is_downgraded_to_continue() -> None:
    desk = make_desk()
    runner, _ = agent(
        [call("lookup", action="confirm", query="a"), decision("done"), "ok"], desk, mode="react"
    )

    result = runner.run("look")

    (first, _) = of_type(runner.store.events(result.run_id), "round")
    assert first.validation["flow_passed"] is True
    assert first.validation["flow_reason"] == "confirm on read tool 'lookup' downgraded to continue"
    assert first.result["action"] == "tool"
    assert desk.names() == ["lookup"]
    assert result.status == "completed"


def test_an_open_interaction_fails_safety() -> None:
    from plangate.agent._validate import Facts, judge
    from plangate.decisions import Decision
    from plangate.tools import Toolset

    facts = Facts(None, 0, 0, Toolset(make_desk().registry), False, None, waiting=True)

    verdict = judge(Decision(action="done"), facts)

    assert (verdict.act, verdict.code) == ("correct", "interaction_open")
    assert verdict.validation.safety_passed is False
    assert verdict.message == "an interaction is open: wait for the person's answer"


def test_a_malformed_plan_is_corrected_and_the_correction_ends_with_the_plan() -> None:
    runner, model = agent(
        [
            '{"action": "plan_done", "plan_steps": []}',
            plan(("Look", "seen")),
            decision("ask_user", speak="?"),
        ],
        mode="plan",
    )

    result = runner.run("plan it")

    (correction,) = of_type(runner.store.events(result.run_id), "correction")
    assert (correction.code, correction.message) == (
        "malformed_plan",
        "plan_steps: at least one step is required when action is 'plan_done'",
    )
    second_plan, first_round = model.requests[1].messages[-1].content, model.requests[2].messages[-1].content
    assert "## correction" in second_plan and "## correction" not in first_round
