"""The conversation, the ReAct record and the evidence of a run, folded from what the store holds.

For: one ``apply(event)`` that the live loop calls after each commit and that loading calls over the whole
event log, so a resumed run sees exactly what the model saw before. This is what keeps the snapshot small:
the record grows with the run, so it lives in the append-only event log, never in the rewritten snapshot.
Not for: rendering prompts (``_context.py``) or judging rounds (``_validate.py``).

Where each part comes from: the user's prompt is the run's input; ``speak`` events are the assistant's visible
turns; ``round`` / ``tool_call`` / ``tool_result`` events make the ReAct record; ``correction`` events are
hidden notes kept until a round passes or a plan is accepted; an ``interaction_resolved`` event adds the
person's words (an answer, or the reason a plan was declined), read from the interaction's stored resolution;
a planning pass that asked for another one (a ``status`` event, stage ``plan``, code ``continue``) keeps its
reason; a fork's new instruction (a ``status`` event, code ``instruction``) is a turn of the user. ``order``
keeps turns, records and completed plan steps in the order they happened, for a prompt that only ever grows
at its end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from pydantic import JsonValue

from plangate._json import Encoder
from plangate.conditions import ReceiptState
from plangate.events import (
    CorrectionEvent,
    Event,
    InteractionResolvedEvent,
    JsonObject,
    PlanEvent,
    RoundEvent,
    SpeakEvent,
    StatusEvent,
    StepAdvancedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.store import Receipt

_VALIDATION_FLAGS = ("flow_passed", "evidence_passed", "safety_passed")


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of the visible conversation."""

    role: str
    text: str


@dataclass(slots=True)
class Act:
    """One entry of the ReAct record: a thought, a tool call and what it returned."""

    round: int | None
    step_index: int | None
    thought: str
    tool: str
    arguments: JsonObject | None
    observation: str | None = None
    success: bool | None = None
    _text: str | None = field(default=None, repr=False)

    def text(self) -> str:
        """The entry as the prompt shows it (computed once the observation is known)."""
        if self._text is not None:
            return self._text
        where = []
        if self.round is not None:
            where.append(f"round {self.round}")
        if self.step_index is not None:
            where.append(f"step {self.step_index + 1}")
        lines = [f"[{' · '.join(where) or 'after a person answered'}]"]
        if self.thought:
            lines.append(f"thought: {self.thought}")
        if self.arguments is not None:
            lines.append(f"call: {self.tool} {_compact(self.arguments)}")
        else:
            lines.append(f"call: {self.tool}")
        lines.append(f"observation: {self.observation if self.observation is not None else '(none yet)'}")
        text = "\n".join(lines)
        if self.observation is not None:
            self._text = text
        return text


@dataclass(frozen=True, slots=True)
class Advance:
    """The plan moved to its next step, as the next prompt says it (claimed by the model, or proven by the
    runtime)."""

    text: str


@dataclass
class Transcript:
    """What the model is shown of the run's past, folded from events.

    Attributes:
        turns: the visible conversation, starting with the user's prompt.
        acts: the ReAct record, oldest first.
        corrections: hidden corrections since the last round that passed validation.
        advances: the plan steps completed, in order (never folded: a plan has few).
        order: turns, records and advances in the order they happened: ``("turn", i)``, ``("act", j)`` and
            ``("advance", k)`` index ``turns``, ``acts`` and ``advances``.
    """

    turns: list[Turn]
    acts: list[Act] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    advances: list[Advance] = field(default_factory=list)
    order: list[tuple[Literal["turn", "act", "advance"], int]] = field(default_factory=list)
    _round: int | None = None
    _step: int | None = None
    _thought: str = ""
    _calls: dict[str, Act] = field(default_factory=dict)
    _proposed: str = ""
    #: what the prompt's history laid out of this transcript last time (``_context.history``'s to read)
    history_kept: object = field(default=None, repr=False, compare=False)
    #: what the tool calls' argument sources gathered of it last time (``_context.argument_sources``'s)
    sources_kept: object = field(default=None, repr=False, compare=False)

    @classmethod
    def start(cls, prompt: str) -> Transcript:
        """A transcript holding only the user's prompt."""
        return cls(turns=[Turn("user", prompt)], order=[("turn", 0)])

    @classmethod
    def fold(
        cls, prompt: str, events: Iterable[Event], resolutions: Mapping[str, Mapping[str, object]]
    ) -> Transcript:
        """Rebuild a run's transcript from its whole event log.

        Args:
            prompt: the run's prompt.
            events: the run's events, in order.
            resolutions: interaction id → its stored resolution (``{"kind": "answer", "text": ...}``).
        """
        transcript = cls.start(prompt)
        for event in events:
            transcript.apply(event, resolutions)
        return transcript

    def apply(self, event: Event, resolutions: Mapping[str, Mapping[str, object]]) -> None:
        """Take one committed event into account."""
        if isinstance(event, SpeakEvent):
            self._turn("assistant", event.text)
        elif isinstance(event, RoundEvent):
            self._round, self._step = event.round, event.step_index
            self._thought = _text_of(event.decision.get("reason"))
            if all(event.validation.get(flag, True) is True for flag in _VALIDATION_FLAGS):
                self.corrections.clear()
        elif isinstance(event, ToolCallEvent):
            act = self._act(self._round, self._thought, event.tool, dict(event.arguments))
            self._calls[event.call_id] = act
        elif isinstance(event, ToolResultEvent):
            self._result(event)
        elif isinstance(event, CorrectionEvent):
            self.corrections.append(event.message)
        elif isinstance(event, StepAdvancedEvent):
            self._advanced(event)
        elif isinstance(event, InteractionResolvedEvent):
            self.corrections.clear()
            self._resolved(event, resolutions.get(event.interaction_id, {}))
        elif isinstance(event, PlanEvent):
            self.corrections.clear()
            self._proposed = "\n".join(f"{i}. {step.content}" for i, step in enumerate(event.steps, start=1))
        elif isinstance(event, StatusEvent) and event.code == "instruction":
            # A fork's new instruction: the person's words, where the fork starts.
            self.corrections.clear()
            self._turn("user", event.text)
        elif isinstance(event, StatusEvent) and (event.stage, event.code) == ("plan", "continue"):
            # A planner that asks for another pass keeps its reason in view, or the next pass repeats it.
            self.corrections.clear()
            self._turn("assistant", f"(planning) {event.text}".strip())

    def _advanced(self, event: StepAdvancedEvent) -> None:
        done, now = event.from_index + 1, event.to_index + 1
        if event.proof is not None:
            text = f"Step {done} is complete, proven by the runtime: {event.proof.reason}. Now on step {now}."
        else:
            text = f"Step {done} is complete ({event.goal_check}). Now on step {now}."
        self.order.append(("advance", len(self.advances)))
        self.advances.append(Advance(text))

    def _turn(self, role: str, text: str) -> None:
        self.order.append(("turn", len(self.turns)))
        self.turns.append(Turn(role, text))

    def _act(self, round_: int | None, thought: str, tool: str, arguments: JsonObject | None) -> Act:
        act = Act(round_, self._step, thought, tool, arguments)
        self.order.append(("act", len(self.acts)))
        self.acts.append(act)
        return act

    def _result(self, event: ToolResultEvent) -> None:
        act = self._calls.pop(event.call_id, None)
        if act is None:
            # A declined consent request: nothing ran, so there was no tool_call event.
            act = self._act(None, "", event.tool, None)
        act.observation = _observation(event.observation, event.summary)
        act.success = event.success
        act._text = None

    def _resolved(self, event: InteractionResolvedEvent, resolution: Mapping[str, object]) -> None:
        if event.resolution == "answer":
            self._turn("user", _text_of(resolution.get("text")))
        elif event.kind == "plan_consent" and event.resolution == "reject":
            reason = _text_of(resolution.get("reason")) or "No reason given."
            self._turn("user", f"I do not approve the plan\n{self._proposed}\n{reason}")


@dataclass(frozen=True, slots=True)
class Held:
    """One receipt of the run, as the runtime keeps it: its plan step, its summary, and what a condition
    reads of it (and, for a call, its arguments' digest: what tells an identical call again)."""

    step_index: int
    summary: str
    state: ReceiptState
    digest: str = ""


def held(
    step_index: int,
    *,
    tool: str,
    source: str,
    success: bool,
    summary: str,
    output: JsonValue,
    planned: bool,
    digest: str = "",
) -> Held:
    """A receipt as conditions see it: its step is the plan step's number (from 1), or None without a plan."""
    step = step_index + 1 if planned else None
    return Held(step_index, summary, ReceiptState(tool, success, step, source, output), digest)


class Evidence:
    """The run's receipts: how many successful ones each plan step has (what ``next_plan`` and ``done`` need
    under a plan), and every receipt in order, for ``done_when`` conditions."""

    def __init__(self, receipts: Iterable[Receipt] = (), *, planned: bool = False) -> None:
        self._proved: Counter[int] = Counter()
        # kept as receipts come: every round asks, and they only grow
        self._failed: dict[str, str] = {}
        self._succeeded: dict[str, str] = {}
        self.records: list[Held] = []
        for receipt in receipts:
            self.add(
                held(
                    receipt.step_index,
                    tool=receipt.name,
                    source=receipt.source,
                    success=receipt.success,
                    summary=receipt.summary,
                    output=receipt.output,
                    planned=planned,
                    digest=receipt.arguments_digest,
                )
            )

    def add(self, record: Held) -> None:
        """Take one committed receipt into account."""
        self.records.append(record)
        state = record.state
        if state.success:
            self._proved[record.step_index] += 1
            if state.source == "write_receipt" and record.digest:
                self._succeeded[f"{state.tool}:{record.digest}"] = record.summary
        elif (
            state.source == "write_receipt"
            and record.digest
            and not record.summary.startswith(UNKNOWN_OUTCOME)
        ):
            self._failed[f"{state.tool}:{record.digest}"] = record.summary

    def count(self, step_index: int) -> int:
        """How many successful receipts are bound to ``step_index``."""
        return self._proved[step_index]

    def succeeded_writes(self) -> Mapping[str, str]:
        """The writes that ran and succeeded in this run, by call key (``tool:digest``), with the receipt's
        summary: an identical call is not put to a person again, and each counts once as a change made."""
        return MappingProxyType(self._succeeded)

    def failed_writes(self) -> dict[str, str]:
        """The writes that ran and failed in this run, by call key (``tool:digest``), with the failure's
        summary: an identical call is not put to a person again. A write whose outcome a person settled
        (``outcome unknown``) did not fail, as far as the run knows."""
        return dict(self._failed)


UNKNOWN_OUTCOME = "outcome unknown"
"""How the summary of a write's receipt starts when a person settled a write whose outcome was lost."""


def receipt_states(records: Sequence[Held], step_index: int | None = None) -> list[ReceiptState]:
    """What a condition ranges over: every receipt, or those bound to plan step ``step_index``."""
    return [r.state for r in records if step_index is None or r.step_index == step_index]


def _observation(value: JsonValue, summary: str) -> str:
    if value is None:
        return summary
    if isinstance(value, str):
        return value
    return _compact(value)


_COMPACT = Encoder(separators=(",", ":"), sort_keys=True)


def _compact(value: object) -> str:
    return _COMPACT.encode(value)  # one encoder for every record (``json.dumps`` makes one per call)


def _text_of(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


__all__ = [
    "UNKNOWN_OUTCOME",
    "Act",
    "Advance",
    "Evidence",
    "Held",
    "Transcript",
    "Turn",
    "held",
    "receipt_states",
]
