"""The prompt is a pure function of the run's state, with its pinned blocks as named sections."""

from __future__ import annotations

from agent_helpers import agent, call, decision, make_desk

from plangate.agent._context import PINNED, View, catalogue_text, execute_context
from plangate.agent._state import AgentConfig
from plangate.agent._transcript import Transcript
from plangate.decisions import PlanStep
from plangate.events import CorrectionEvent, RoundEvent, SpeakEvent, ToolCallEvent, ToolResultEvent
from plangate.tools import Toolset

CONFIG = AgentConfig(
    model="scripted",
    tools=["lookup"],
    mode="plan",
    max_rounds=10,
    always_execute=False,
    plan_consent=False,
    system_prompt="Answer in English.",
)
PLAN = [
    PlanStep(content="Look up the week", done_when="the week is known"),
    PlanStep(content="Book", done_when="booked"),
]


def _transcript() -> Transcript:
    transcript = Transcript.start("Book the gym")
    passed = {"flow_passed": True, "evidence_passed": True, "safety_passed": True}
    for event in (
        RoundEvent(
            round=1,
            step_index=0,
            decision={"action": "continue", "reason": "need the week"},
            validation=passed,
        ),
        SpeakEvent(text="Looking at your week."),
        ToolCallEvent(call_id="r1", tool="lookup", arguments={"query": "week"}),
        ToolResultEvent(
            call_id="r1", tool="lookup", status="done", success=True, summary="ok", observation="Mon free"
        ),
        RoundEvent(round=2, step_index=0, decision={}, validation={**passed, "flow_passed": False}),
        CorrectionEvent(code="malformed_output", message="decision: expected a JSON object"),
    ):
        transcript.apply(event, {})
    return transcript


def _view(transcript: Transcript) -> View:
    catalogue = catalogue_text(Toolset(make_desk().registry).catalogue())
    return View(CONFIG, "json", catalogue, transcript, PLAN, 0, 3, 1)


def test_the_execute_prompt_has_its_parts_in_order_with_pinned_sections() -> None:
    context = execute_context(_view(_transcript()))

    assert [s.name for s in context.sections] == ["react_record", *PINNED, "correction"]
    assert all(context.section(name).pinned for name in PINNED)  # type: ignore[union-attr]
    messages = context.messages()
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert '"name":"lookup"' in messages[0].content and "Answer in English." in messages[0].content
    assert (messages[1].content, messages[2].content) == ("Book the gym", "Looking at your week.")
    closing = messages[3].content
    assert (
        '## react_record\n[round 1 · step 1]\nthought: need the week\ncall: lookup {"query":"week"}\n'
        in closing
    )
    assert "observation: Mon free" in closing
    plan = "1. [>] Look up the week (done when: the week is known)\n2. [ ] Book (done when: booked)"
    assert f"## current_plan\n{plan}" in closing
    assert "## current_step\nStep 1 of 2: Look up the week\nDone when: the week is known\n" in closing
    assert "## execution_context\nRound 3 of 10 (7 left after this one)." in closing
    note = "Your last decision was not accepted, for this reason:\n- decision: expected a JSON object"
    assert closing.endswith(f"## correction\n{note}")


def test_the_same_state_gives_the_same_messages() -> None:
    assert (
        execute_context(_view(_transcript())).messages() == execute_context(_view(_transcript())).messages()
    )


def test_a_round_that_passes_clears_the_corrections_and_corrections_never_reach_the_conversation() -> None:
    transcript = _transcript()
    passed = {"flow_passed": True, "evidence_passed": True, "safety_passed": True}
    transcript.apply(
        RoundEvent(round=3, step_index=0, decision={"action": "continue"}, validation=passed), {}
    )

    context = execute_context(_view(transcript))

    assert context.section("correction") is None
    assert all("expected a JSON object" not in turn.text for turn in context.conversation)


def test_each_round_rebuilds_the_prompt_from_what_changed() -> None:
    runner, model = agent(
        [call("lookup", query="a"), call("lookup", query="b"), decision("done"), "ok"], mode="react"
    )

    runner.run("look twice")

    first, second, third = (request.messages[-1].content for request in model.requests[:3])
    assert "react_record" not in first and "Round 1 of 60" in first
    assert "observation: found a" in second and "found b" not in second and "Round 2 of 60" in second
    assert "observation: found a" in third and "observation: found b" in third
