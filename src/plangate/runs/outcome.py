"""How every run ends: one ``Outcome`` whatever the engine, and the ``outcome`` event and stored form of it.

For: the shape SPEC §7 promises for every run, agent, formula or copilot turn —
``{status, stage, code, user_message, internal_reason}`` — built once here and turned into the run's last
event (:meth:`Outcome.event`) and the outcome kept with the run (:meth:`Outcome.stored`, what
``RunRecord.outcome`` holds), so the two never disagree. ``internal_reason`` stays in the store and the log,
never in an API response (``server/_public.py`` leaves it out). Not for: deciding that a run ends (each
engine does) or the codes each engine uses (documented beside it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate.events import OutcomeEvent
from plangate.vocab import OutcomeStatus


class Outcome(BaseModel):
    """How a run ended.

    Attributes:
        status: ``completed``, ``failed``, ``aborted``, ``exhausted`` (a budget ran out) or ``cancelled``.
        stage: the phase it ended in (an agent's ``route``, ``plan``, ``execute``; a formula's ``run``; a
            copilot turn's ``turn`` or ``review``).
        code: a stable machine-readable reason (``done``, ``replied``, ``corrections_exhausted``,
            ``stalled``, ``max_rounds``, ``step_failed``, ``cancelled``, a turn's status …).
        user_message: what the person is told.
        internal_reason: for the logs only.
        usage: the run's model usage (``RunUsage.summary``: tokens per model, the cost with prices), when
            it called a model; left out of the stored form and the event otherwise.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: OutcomeStatus
    stage: str
    code: str
    user_message: str
    internal_reason: str = ""
    usage: dict[str, JsonValue] | None = Field(default=None, exclude_if=lambda value: value is None)

    def event(self) -> OutcomeEvent:
        """The ``outcome`` event that ends the run's log."""
        return OutcomeEvent(
            status=self.status,
            stage=self.stage,
            code=self.code,
            user_message=self.user_message,
            internal_reason=self.internal_reason,
            usage=self.usage,
        )

    def stored(self) -> dict[str, JsonValue]:
        """The outcome kept with the run (``RunRecord.outcome``)."""
        stored: dict[str, JsonValue] = {
            "status": self.status,
            "stage": self.stage,
            "code": self.code,
            "user_message": self.user_message,
            "internal_reason": self.internal_reason,
        }
        if self.usage is not None:
            stored["usage"] = self.usage
        return stored

    @classmethod
    def of_event(cls, event: OutcomeEvent) -> Outcome:
        """The outcome an ``outcome`` event says."""
        return cls(
            status=event.status,
            stage=event.stage,
            code=event.code,
            user_message=event.user_message,
            internal_reason=event.internal_reason,
            usage=event.usage,
        )

    @classmethod
    def read(cls, stored: Mapping[str, JsonValue] | None) -> Outcome | None:
        """The outcome a run record keeps, or None when it has none (or one this version cannot read)."""
        if stored is None:
            return None
        try:
            return cls.model_validate({"internal_reason": "", **stored})
        except ValueError:
            return None


__all__ = ["Outcome", "OutcomeStatus"]
