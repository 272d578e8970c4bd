"""What a copilot turn gives back: the ``Turn``, its attempts, each attempt's ``Review`` and its signals.

For: the values ``ask`` returns and ``--json`` prints, and their conversion to and from the store's records
(``TurnRecord`` / ``AttemptRecord``, plain JSON). Not for: deciding anything (``policy``) or producing them
(the turn's phases).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate.copilot._conversations import AttemptRecord, TurnRecord, TurnStatus
from plangate.formulas import Formula, Issue
from plangate.formulas.loader import validate_formula

Severity = Literal["broken", "degraded", "benign"]
"""How bad a review signal is: ``broken`` (the answer must not be used), ``degraded`` (usable with care),
``benign`` (worth a note; dropped from reviews)."""
ReviewSeverity = Literal["ok", "degraded", "broken"]
Verdict = Literal["accept", "retry"]
_RANK: dict[str, int] = {"ok": 0, "benign": 0, "degraded": 1, "broken": 2}


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Signal(_Value):
    """One finding of a review: ``kind`` (``invented_number``, ``step_failed``, …), what, how bad."""

    kind: str
    detail: str
    severity: Severity


class Review(_Value):
    """The review of one attempt.

    Attributes:
        severity: the worst signal's (``ok`` without signals).
        verdict: ``retry`` when a signal is worth another attempt (the policy still decides), else ``accept``.
        signals: what the rules (and the model review, when asked) found; benign ones are dropped.
        note: what the model review said, when it ran.
    """

    severity: ReviewSeverity = "ok"
    verdict: Verdict = "accept"
    signals: list[Signal] = Field(default_factory=list)
    note: str = ""

    @classmethod
    def of(cls, signals: list[Signal], note: str = "") -> Review:
        """The review these signals make: benign ones dropped, the worst severity, ``retry`` if any is
        left."""
        kept = [signal for signal in signals if signal.severity != "benign"]
        worst: ReviewSeverity = "ok"
        for signal in kept:
            if _RANK[signal.severity] > _RANK[worst]:
                worst = "broken" if signal.severity == "broken" else "degraded"
        return cls(severity=worst, verdict="retry" if kept else "accept", signals=kept, note=note)

    def kinds(self) -> list[str]:
        """The kinds of its signals, in order."""
        return [signal.kind for signal in self.signals]

    def summary(self) -> str:
        """One line: ``invented_number: 1,234 is not in the data; empty_query_result: …``."""
        return "; ".join(f"{signal.kind}: {signal.detail}" for signal in self.signals)


class TurnResult(_Value):
    """The rows an answer is based on."""

    columns: list[str] = Field(default_factory=list)
    rows: list[list[JsonValue]] = Field(default_factory=list)


class Attempt(_Value):
    """One try at the question: build (and repair) a formula, run it, review it.

    Attributes:
        n: 1 for the first attempt, 2 for the retry.
        status: ``failed`` (nothing usable was built or ran), ``cancelled``, ``unusable`` (it ran, and the
            review says the answer must not be used), ``partial`` (usable with care, or built but not run,
            or a question back to the user), ``done``.
        reason: why it ended so, for a person.
        formula: the formula it built, or None.
        run_id: its formula run, or None when nothing ran.
        answer: what it answered (kept even when unusable, for inspection).
        issues: the check's issues left in its final formula.
    """

    n: int
    status: TurnStatus
    reason: str
    review: Review = Field(default_factory=Review)
    formula: Formula | None = None
    run_id: str | None = None
    answer: str = ""
    result: TurnResult = Field(default_factory=TurnResult)
    issues: list[Issue] = Field(default_factory=list)
    started_at: float = 0.0
    finished_at: float = 0.0

    def record(self) -> AttemptRecord:
        """The attempt as the store keeps it."""
        return AttemptRecord(
            n=self.n,
            status=self.status,
            reason=self.reason,
            review=self.review.model_dump(mode="json"),
            formula=formula_json(self.formula),
            run_id=self.run_id,
            answer=self.answer,
            result=self.result.model_dump(mode="json"),
            issues=[issue.model_dump(mode="json") for issue in self.issues],
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    @classmethod
    def from_record(cls, record: AttemptRecord) -> Attempt:
        """An attempt read back from the store."""
        return cls(
            n=record.n,
            status=record.status,
            reason=record.reason,
            review=Review.model_validate(record.review),
            formula=_formula(record.formula),
            run_id=record.run_id,
            answer=record.answer,
            result=TurnResult.model_validate(record.result),
            issues=[Issue.model_validate(issue) for issue in record.issues],
            started_at=record.started_at,
            finished_at=record.finished_at,
        )


class Turn(_Value):
    """A question answered (or not) about registered data.

    Attributes:
        id: ``turn_…``.
        conversation_id: the conversation it belongs to.
        run_id: the ``ask`` run whose events are its ops, review and outcome.
        status: the status of the attempt it reports (the best one; the later on a tie).
        reason: why it ended so.
        answer: the answer, for ``done`` and ``partial`` turns (empty otherwise: read ``reason``), clipped
            to 4,000 characters.
        attempts: every attempt, in order.
        result: the rows the answer is based on.
        formula: the formula that produced it (save it, run it, edit it like any other).
        source: the data source asked about.
        model: the model that built the formula.
        usage: the model usage of the turn (its generation, its review and its formula runs'), as its
            run's outcome shows it (with ``cost`` when every model has a price); None when no call reported
            any, or for a turn read back from its conversation (its run's outcome keeps it).
    """

    id: str
    conversation_id: str
    run_id: str
    question: str
    status: TurnStatus
    reason: str
    answer: str
    attempts: list[Attempt]
    result: TurnResult = Field(default_factory=TurnResult)
    formula: Formula | None = None
    source: str = ""
    model: str = ""
    owner: str = "local"
    created_at: float = 0.0
    finished_at: float = 0.0
    usage: dict[str, JsonValue] | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The turn as ``plangate ask --json`` prints it."""
        return {
            "turn_id": self.id,
            "conversation_id": self.conversation_id,
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "answer": self.answer,
            "attempts": [
                {
                    "status": attempt.status,
                    "reason": attempt.reason,
                    "review": {
                        "severity": attempt.review.severity,
                        "signals": [signal.model_dump(mode="json") for signal in attempt.review.signals],
                    },
                }
                for attempt in self.attempts
            ],
            "result": self.result.model_dump(mode="json"),
            "formula": formula_json(self.formula),
            "usage": self.usage,
        }

    def record(self) -> TurnRecord:
        """The turn as the store keeps it."""
        return TurnRecord(
            id=self.id,
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            owner=self.owner,
            question=self.question,
            status=self.status,
            reason=self.reason,
            answer=self.answer,
            result=self.result.model_dump(mode="json"),
            formula=formula_json(self.formula),
            source=self.source,
            model=self.model,
            created_at=self.created_at,
            finished_at=self.finished_at,
            attempts=[attempt.record() for attempt in self.attempts],
        )

    @classmethod
    def from_record(cls, record: TurnRecord) -> Turn:
        """A turn read back from the store."""
        return cls(
            id=record.id,
            conversation_id=record.conversation_id,
            run_id=record.run_id,
            question=record.question,
            status=record.status,
            reason=record.reason,
            answer=record.answer,
            attempts=[Attempt.from_record(attempt) for attempt in record.attempts],
            result=TurnResult.model_validate(record.result),
            formula=_formula(record.formula),
            source=record.source,
            model=record.model,
            owner=record.owner,
            created_at=record.created_at,
            finished_at=record.finished_at,
        )


def formula_json(formula: Formula | None) -> dict[str, JsonValue] | None:
    """A formula as the JSON a ``.formula.json`` file holds (what ``validate_formula`` reads back)."""
    if formula is None:
        return None
    data: dict[str, JsonValue] = formula.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["formula"] = formula.formula
    return data


def _formula(data: dict[str, JsonValue] | None) -> Formula | None:
    return None if data is None else validate_formula(data, source="<stored turn>")


__all__ = [
    "Attempt",
    "Review",
    "ReviewSeverity",
    "Severity",
    "Signal",
    "Turn",
    "TurnResult",
    "Verdict",
    "formula_json",
]
