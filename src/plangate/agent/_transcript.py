"""The conversation, the ReAct record and the evidence of a run, folded from what the store holds.

For: one ``apply(event)`` that the live loop calls after each commit and that loading calls over the whole
event log, so a resumed run sees exactly what the model saw before. This is what keeps the snapshot small:
the record grows with the run, so it lives in the append-only event log, never in the rewritten snapshot.
Not for: rendering prompts (``_context.py``) or judging rounds (``_validate.py``).

Where each part comes from: the user's prompt is the run's input; ``speak`` events are the assistant's
visible turns; ``round`` / ``tool_call`` / ``tool_result`` events make the ReAct record; ``correction``
events are hidden notes kept until a round passes or a plan is accepted; an ``interaction_resolved`` event
adds the person's words (an answer, or the reason a plan was declined), read from the interaction's stored
resolution; a planning pass that asked for another one (a ``status`` event, stage ``plan``, code
``continue``) keeps its reason.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from plangate.events import (
    CorrectionEvent,
    Event,
    InteractionResolvedEvent,
    JsonObject,
    PlanEvent,
    RoundEvent,
    SpeakEvent,
    StatusEvent,
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


@dataclass
class Transcript:
    """What the model is shown of the run's past, folded from events.

    Attributes:
        turns: the visible conversation, starting with the user's prompt.
        acts: the ReAct record, oldest first.
        corrections: hidden corrections since the last round that passed validation.
    """

    turns: list[Turn]
    acts: list[Act] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    _round: int | None = None
    _step: int | None = None
    _thought: str = ""
    _calls: dict[str, Act] = field(default_factory=dict)
    _proposed: str = ""

    @classmethod
    def start(cls, prompt: str) -> Transcript:
        """A transcript holding only the user's prompt."""
        return cls(turns=[Turn("user", prompt)])

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
            self.turns.append(Turn("assistant", event.text))
        elif isinstance(event, RoundEvent):
            self._round, self._step = event.round, event.step_index
            self._thought = _text_of(event.decision.get("reason"))
            if all(event.validation.get(flag, True) is True for flag in _VALIDATION_FLAGS):
                self.corrections.clear()
        elif isinstance(event, ToolCallEvent):
            act = Act(self._round, self._step, self._thought, event.tool, dict(event.arguments))
            self._calls[event.call_id] = act
            self.acts.append(act)
        elif isinstance(event, ToolResultEvent):
            self._result(event)
        elif isinstance(event, CorrectionEvent):
            self.corrections.append(event.message)
        elif isinstance(event, InteractionResolvedEvent):
            self.corrections.clear()
            self._resolved(event, resolutions.get(event.interaction_id, {}))
        elif isinstance(event, PlanEvent):
            self.corrections.clear()
            self._proposed = "\n".join(f"{i}. {step.content}" for i, step in enumerate(event.steps, start=1))
        elif isinstance(event, StatusEvent) and (event.stage, event.code) == ("plan", "continue"):
            # A planner that asks for another pass keeps its reason in view, or the next pass repeats it.
            self.corrections.clear()
            self.turns.append(Turn("assistant", f"(planning) {event.text}".strip()))

    def _result(self, event: ToolResultEvent) -> None:
        act = self._calls.pop(event.call_id, None)
        if act is None:
            # A declined consent request: nothing ran, so there was no tool_call event.
            act = Act(None, self._step, "", event.tool, None)
            self.acts.append(act)
        act.observation = _observation(event.observation, event.summary)
        act.success = event.success
        act._text = None

    def _resolved(self, event: InteractionResolvedEvent, resolution: Mapping[str, object]) -> None:
        if event.resolution == "answer":
            self.turns.append(Turn("user", _text_of(resolution.get("text"))))
        elif event.kind == "plan_consent" and event.resolution == "reject":
            reason = _text_of(resolution.get("reason")) or "No reason given."
            self.turns.append(Turn("user", f"I do not approve the plan\n{self._proposed}\n{reason}"))


class Evidence:
    """Successful receipts per plan step: what ``next_plan`` and ``done`` need under a plan."""

    def __init__(self, receipts: Iterable[Receipt] = ()) -> None:
        self._proved: Counter[int] = Counter()
        for receipt in receipts:
            self.add(receipt.step_index, receipt.success)

    def add(self, step_index: int, success: bool) -> None:
        """Count one receipt bound to ``step_index``."""
        if success:
            self._proved[step_index] += 1

    def count(self, step_index: int) -> int:
        """How many successful receipts are bound to ``step_index``."""
        return self._proved[step_index]


def _observation(value: JsonValue, summary: str) -> str:
    if value is None:
        return summary
    if isinstance(value, str):
        return value
    return _compact(value)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _text_of(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


__all__ = ["Act", "Evidence", "Transcript", "Turn"]
