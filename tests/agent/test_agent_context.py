"""The prompt is a pure function of the run's state, laid out in the order things happened: each round's
prompt extends the last one, and only the small state message at its end (pinned blocks, rounds left,
corrections) changes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agent_helpers import agent, call, decision, make_desk, memory_store, plan

from plangate.agent import Agent, _context
from plangate.agent._context import PINNED, Context, View, catalogue_text, execute_context, history
from plangate.agent._state import AgentConfig, AgentState, Memory
from plangate.agent._transcript import Transcript
from plangate.decisions import PlanStep
from plangate.events import (
    CorrectionEvent,
    InteractionOpenedEvent,
    InteractionResolvedEvent,
    InteractionTool,
    RoundEvent,
    SpeakEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.interactions import Answer, Approve, Reject
from plangate.models import Message, ModelRequest, ScriptedModel
from plangate.tools import ToolRegistry, Toolset, tool

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
PASSED = {"flow_passed": True, "evidence_passed": True, "safety_passed": True}
LOOKUP = {
    "action": "continue",
    "speak": "Looking at your week.",
    "reason": "need the week",
    "tool_call": {"name": "lookup", "arguments": {"query": "week"}},
}


def _compared(
    monkeypatch: pytest.MonkeyPatch,
    owner: object,
    name: str,
    afresh: Callable[[Callable[[Any], Any], Any], object],
    *,
    read: Callable[[Any], object] = lambda made: made,
    found: Callable[[Any], object] = lambda argument: argument,
) -> list[Any]:
    """Have ``owner.name`` check what it makes (``read``) against ``afresh(original, argument)``; returns
    ``found(argument)`` of each call, taken before the call (what it found kept)."""
    original = getattr(owner, name)
    seen: list[Any] = []

    def checked(argument: Any) -> Any:
        seen.append(found(argument))
        made = original(argument)
        assert read(made) == afresh(original, argument)
        return made

    monkeypatch.setattr(owner, name, checked)
    return seen


@pytest.fixture
def kept_as_afresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What an agent keeps from round to round makes what it makes afresh: a history laid out round by
    round comes with its settled start joined already (``History``), and gives the messages its turns
    give alone; argument sources are gathered again only after the records that were final, and are
    those gathered at once; a state encoded by pydantic at once is the JSON of its ``to_snapshot``."""
    joined = _compared(
        monkeypatch,
        Context,
        "messages",
        lambda messages, context: messages(dataclasses.replace(context, history=tuple(context.history))),
        found=lambda context: getattr(getattr(context.history, "joined", None), "turns", 0),
    )
    gathered = _compared(
        monkeypatch,
        _context,
        "argument_sources",
        lambda gather, view: gather(
            dataclasses.replace(view, transcript=dataclasses.replace(view.transcript, sources_kept=None))
        ),
        found=lambda view: getattr(view.transcript.sources_kept, "acts", 0),
    )
    states = _compared(
        monkeypatch,
        AgentState,
        "encoded",
        lambda _, state: state.to_snapshot(),
        read=lambda made: json.loads(made.text),
    )
    yield
    # the test went through prompts whose start came joined and records gathered already (else it proved
    # nothing of them), and commits
    assert max(joined, default=0) > 2
    assert max(gathered, default=0) > 0
    assert states


def _transcript() -> Transcript:
    transcript = Transcript.start("Book the gym")
    for event in (
        RoundEvent(round=1, step_index=0, decision=LOOKUP, validation=PASSED),
        SpeakEvent(text="Looking at your week."),
        ToolCallEvent(call_id="r1", tool="lookup", arguments={"query": "week"}),
        ToolResultEvent(
            call_id="r1", tool="lookup", status="done", success=True, summary="ok", observation="Mon free"
        ),
        RoundEvent(round=2, step_index=0, decision={}, validation={**PASSED, "flow_passed": False}),
        CorrectionEvent(code="malformed_output", message="decision: expected a JSON object"),
    ):
        transcript.apply(event, {})
    return transcript


def _view(transcript: Transcript, wire: str = "json") -> View:
    catalogue = catalogue_text(Toolset(make_desk().registry).catalogue())
    return View(CONFIG, wire, catalogue, transcript, PLAN, 0, 3, 1)  # type: ignore[arg-type]


def test_the_execute_prompt_is_in_the_order_things_happened_with_the_state_at_the_end() -> None:
    context = execute_context(_view(_transcript()))

    assert [s.name for s in context.sections] == [*PINNED, "correction"]
    assert all(context.section(name).pinned for name in PINNED)  # type: ignore[union-attr]
    messages = context.messages()
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert '"name":"lookup"' in messages[0].content and "Answer in English." in messages[0].content
    assert messages[1].content == "Book the gym"
    assert messages[2].content == "Looking at your week."
    # The record of the call, in the user's voice, after the turn the round spoke; then the state.
    record = (
        '[round 1 · step 1]\nthought: need the week\ncall: lookup {"query":"week"}\nobservation: Mon free'
    )
    closing = messages[3].content
    assert closing.startswith(f"{record}\n\n## current_plan\n")
    plan_text = "1. [>] Look up the week (done when: the week is known)\n2. [ ] Book (done when: booked)"
    assert f"## current_plan\n{plan_text}" in closing
    assert "## current_step\nStep 1 of 2: Look up the week\nDone when: the week is known\n" in closing
    assert "## execution_context\nRound 3 of 10 (7 left after this one)." in closing
    note = "Your last decision was not accepted, for this reason:\n- decision: expected a JSON object"
    assert closing.endswith(f"## correction\n{note}")
    # The stable prefix ends where the state message starts: after the rules, and after the record (the
    # closing message keeps its parts apart for providers that cache by blocks).
    assert [m.cache_point for m in messages] == [True, False, False, False]
    assert messages[3].blocks == ((record, True), (closing.removeprefix(f"{record}\n\n"), False))


def test_the_same_state_gives_the_same_messages() -> None:
    assert (
        execute_context(_view(_transcript())).messages() == execute_context(_view(_transcript())).messages()
    )


def test_a_round_that_passes_clears_the_corrections_and_corrections_never_reach_the_history() -> None:
    transcript = _transcript()
    transcript.apply(
        RoundEvent(round=3, step_index=0, decision={"action": "continue"}, validation=PASSED), {}
    )

    context = execute_context(_view(transcript))

    assert context.section("correction") is None
    assert all("expected a JSON object" not in text for _, text in context.history)


def test_each_round_rebuilds_the_prompt_from_what_changed() -> None:
    runner, model = agent(
        [call("lookup", query="a"), call("lookup", query="b"), decision("done"), "ok"], mode="react"
    )

    runner.run("look twice")

    first, second, third = (_flat(request.messages) for request in model.requests[:3])
    assert "observation: " not in first and "Round 1 of 60" in first
    assert "observation: found a" in second and "found b" not in second and "Round 2 of 60" in second
    assert "observation: found a" in third and "observation: found b" in third


# -- append-only: each prompt extends the last one ------------------------------------------------------


def _flat(messages: list[Message] | tuple[Message, ...]) -> str:
    """A prompt as one text, the way a chat template lays it out."""
    return "".join(f"<|{m.role}|>{m.content}<|end|>" for m in messages)


def _stable(messages: list[Message] | tuple[Message, ...]) -> str:
    """The part of a prompt meant to stay: everything before its state message.

    The state is the last part of the last message (its only part when it is a message of its own); the
    history's last message may be joined with what the next round adds to it, so its end marker is not part
    of what stays.
    """
    *rest, last = messages
    before = "\n\n".join(text for text, _ in last.blocks[:-1])
    flat = _flat(rest)
    if before:
        return f"{flat}<|{last.role}|>{before}"
    return flat.removesuffix("<|end|>")


def _assert_each_prompt_extends_the_last(requests: list[ModelRequest]) -> None:
    for before, after in itertools.pairwise(requests):
        assert _flat(after.messages).startswith(_stable(before.messages)), (before.messages, after.messages)
        # What changed at the end is the state, and what the last round added.
        assert len(_stable(after.messages)) > len(_stable(before.messages))


@pytest.mark.usefixtures("kept_as_afresh")
def test_prompts_grow_at_their_end_through_questions_answers_consent_and_a_declined_call() -> None:
    script = [
        call("lookup", query="week"),
        decision("ask_user", speak="Morning or evening?"),
        call("place", task="gym", slot=3),
        decision("continue", speak="Let me try another slot."),
        call("place", task="gym", slot=4),
        call("lookup", query="week"),
        decision("done", speak="Booked."),
        "Booked the gym.",
    ]
    desk = make_desk()
    runner, model = agent(script, desk, mode="react")
    result = runner.run("Book the gym")
    assert result.interaction is not None
    result = runner.resume(result.run_id, result.interaction.id, Answer(text="evening, please"))
    assert result.interaction is not None
    result = runner.resume(result.run_id, result.interaction.id, Reject(reason="slot 3 is taken"))
    assert result.interaction is not None
    result = runner.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed"

    executes = [request for request in model.requests if request.purpose == "execute"]
    assert len(executes) == 7
    _assert_each_prompt_extends_the_last(executes)
    last = _flat(executes[-1].messages)
    # Everything is there, in the order it happened: the question, the answer, the refusal, the approval.
    order = [
        "Morning or evening?",
        "evening, please",
        "The user declined the call place",
        "Let me try another slot.",
        '[round 5]\ncall: place {"slot":4,"task":"gym"}\nobservation: placed gym at 4',
        '[round 6]\ncall: lookup {"query":"week"}\nobservation: found week',
    ]
    positions = [last.index(text) for text in order]
    assert positions == sorted(positions)


@pytest.mark.usefixtures("kept_as_afresh")
def test_prompts_grow_at_their_end_across_plan_steps_and_a_resume_in_another_agent() -> None:
    script = [
        plan(("Look", "the week is known"), ("Book", "booked")),
        call("lookup", query="week"),
        decision("next_plan", goal_check="the week is known"),
        call("place", task="gym", slot=3),
        decision("done", goal_check="booked"),
        "Booked.",
    ]
    store = memory_store()
    desk = make_desk()
    model = ScriptedModel(script)
    waiting = Agent(model=model, tools=desk.registry, store=store, mode="plan").run("Book the gym")
    assert waiting.interaction is not None
    # Another agent (another process, say) folds the run from the store and continues it.
    later = ScriptedModel(script[4:])
    done = Agent(model=later, tools=desk.registry, store=store).resume(
        waiting.run_id, waiting.interaction.id, Approve()
    )
    assert done.status == "completed"

    executes = [r for r in [*model.requests, *later.requests] if r.purpose == "execute"]
    assert len(executes) == 4
    _assert_each_prompt_extends_the_last(executes)
    assert "Step 2 of 2: Book" in executes[-1].messages[-1].content


@pytest.mark.usefixtures("kept_as_afresh")
def test_after_compaction_the_prompt_keeps_the_rules_and_the_request_and_grows_at_its_end_again() -> None:
    @tool
    def read_page(n: int) -> str:
        """Read one page."""
        return f"page {n}: " + "numbers and more numbers; " * 40

    def answer(request: ModelRequest) -> str:
        if request.purpose == "compact":
            return "Pages read so far: " + ",".join(
                re.findall(r"observation: page (\d+):", _flat(request.messages))
            )
        if request.purpose == "deliver":
            return "Read."
        number = int(re.findall(r"Round (\d+) of", request.messages[-1].content)[0])
        if number == 40:
            return json.dumps({"action": "done"})
        return json.dumps(
            {"action": "continue", "tool_call": {"name": "read_page", "arguments": {"n": number}}}
        )

    model = ScriptedModel(answer)
    result = Agent(
        model=model, tools=ToolRegistry([read_page]), store=memory_store(), mode="react", context_budget=4_000
    ).run("Read the report")
    assert result.status == "completed"

    executes = [request for request in model.requests if request.purpose == "execute"]
    compacted = [
        index
        for index, (before, after) in enumerate(itertools.pairwise(executes), start=1)
        if not _flat(after.messages).startswith(_stable(before.messages))
    ]
    compacts = sum(1 for request in model.requests if request.purpose == "compact")
    # The prefix breaks only where a compaction folded records out, and there only after the request.
    assert 0 < len(compacted) == compacts
    head = _flat(executes[0].messages[:1]) + "<|user|>Read the report"
    for index in compacted:
        assert _flat(executes[index].messages).startswith(head)
        assert "## run_summary\n" in executes[index].messages[1].content
    # Between compactions, every prompt extends the one before it.
    for index, (before, after) in enumerate(itertools.pairwise(executes), start=1):
        if index not in compacted:
            assert _flat(after.messages).startswith(_stable(before.messages))


def test_the_history_holds_no_hidden_correction_and_no_interaction_bookkeeping() -> None:
    transcript = _transcript()
    consent = InteractionTool(name="place", arguments={"slot": 3}, arguments_digest="d")
    for event in (
        RoundEvent(round=3, step_index=0, decision={"action": "confirm"}, validation=PASSED),
        InteractionOpenedEvent(interaction_id="int_1", kind="confirm", prompt="Allow place?", tool=consent),
        InteractionResolvedEvent(interaction_id="int_1", kind="confirm", resolution="approve"),
        ToolCallEvent(call_id="int_1", tool="place", arguments={"slot": 3}),
        ToolResultEvent(call_id="int_1", tool="place", status="done", success=True, summary="placed"),
    ):
        transcript.apply(event, {})
    history = execute_context(_view(transcript)).history
    assert [role for role, _ in history] == ["user", "assistant", "user", "user"]
    assert history[3] == ("user", '[round 3 · step 1]\ncall: place {"slot":3}\nobservation: placed')


def test_argument_sources_gathered_round_by_round_are_those_gathered_at_once() -> None:
    transcript = Transcript.start("Book the gym on day 3")
    views: list[View] = []

    def gathered(memory: Memory | None = None) -> list[str]:
        # what a round gathers, going on from the last round, and what gathering it all at once gives
        view = dataclasses.replace(_view(transcript), memory=memory)
        afresh = dataclasses.replace(transcript, sources_kept=None)
        alone = _context.argument_sources(dataclasses.replace(view, transcript=afresh))
        views.append(view)
        made = _context.argument_sources(view)
        assert made == alone
        return made

    def call_(number: int, observation: str | None, success: bool = True) -> None:
        transcript.apply(ToolCallEvent(call_id=f"r{number}", tool="lookup", arguments={"n": number}), {})
        if observation is not None:
            result(number, observation, success)

    def result(number: int, observation: str, success: bool = True) -> None:
        status = "done" if success else "failed"
        event = ToolResultEvent(
            call_id=f"r{number}", tool="lookup", status=status, success=success, summary="",
            observation=observation,
        )
        transcript.apply(event, {})

    call_(1, "Mon free")
    call_(2, "no such day", success=False)
    assert gathered() == ["Book the gym on day 3", "Mon free"]
    call_(3, None)  # its observation is still to come: the next round looks at it again
    assert gathered() == ["Book the gym on day 3", "Mon free"]
    result(3, "Tue free")
    call_(4, "Wed free")
    transcript.apply(SpeakEvent(text="Which day?"), {})
    answered = InteractionResolvedEvent(interaction_id="i1", kind="ask_user", resolution="answer")
    transcript.apply(answered, {"i1": {"text": "Tuesday"}})
    assert gathered() == ["Book the gym on day 3", "Tuesday", "Mon free", "Tue free", "Wed free"]
    # Compaction folds the assistant's turn and the first two records: gathered again, without them.
    folded = Memory(summary="Monday is free.", turns=1, acts=2)
    assert gathered(folded) == ["Book the gym on day 3", "Tuesday", "Tue free", "Wed free"]
    folded = Memory(summary="Monday and Tuesday are free.", turns=2, acts=3)
    assert gathered(folded) == ["Book the gym on day 3", "Wed free"]
    # What an earlier round kept, used again after a later round went on from it, holds only its own.
    assert gathered() == ["Book the gym on day 3", "Tuesday", "Mon free", "Tue free", "Wed free"]
    earlier = transcript.sources_kept
    call_(5, "Thu free")
    assert gathered() == ["Book the gym on day 3", "Tuesday", "Mon free", "Tue free", "Wed free", "Thu free"]
    transcript.sources_kept = earlier
    call_(6, "Fri free")
    assert gathered()[-2:] == ["Thu free", "Fri free"]


def test_a_history_laid_out_again_from_an_earlier_round_s_joined_start_holds_only_its_own() -> None:
    transcript = Transcript.start("Read the pages")

    def record(number: int) -> None:
        transcript.apply(ToolCallEvent(call_id=f"r{number}", tool="lookup", arguments={"n": number}), {})
        event = ToolResultEvent(
            call_id=f"r{number}", tool="lookup", status="done", success=True, summary="",
            observation=f"page {number}",
        )
        transcript.apply(event, {})

    def messages() -> list[Message]:
        laid_out = history(_view(transcript))
        made = Context("rules", laid_out, ()).messages()
        assert made == Context("rules", tuple(laid_out), ()).messages()  # joined from scratch
        return made

    record(1)
    transcript.apply(SpeakEvent(text="Reading on."), {})
    record(2)
    messages()
    earlier = transcript.history_kept
    record(3)
    messages()
    transcript.history_kept = earlier  # what a later round went on from, used again
    transcript.apply(SpeakEvent(text="One more."), {})
    record(4)
    last = messages()
    assert [message.role for message in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "page 3" in last[3].content and last[4].content == "One more." and "page 4" in last[5].content
