"""How a formula run ends: its ``outcome`` event and the outcome stored with the run, in the agent's shape.

For: one ending shape for every run (SPEC §7): ``{status, stage, code, user_message, internal_reason}``, the
same fields as an agent run's outcome, with ``stage = "run"`` (a formula has no phases) and a code per
ending: ``done`` (every step finished), ``step_failed`` (the message names each failed step and why),
``cancelled``. Not for: deciding that a run ends (the scheduler and ``runtime.cancel`` do).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue

from plangate.events import OutcomeEvent, OutcomeStatus

STAGE = "run"
"""The stage of every formula outcome."""

_CODES: dict[str, str] = {"completed": "done", "failed": "step_failed", "cancelled": "cancelled"}


def outcome_event(status: OutcomeStatus, user_message: str, *, internal_reason: str = "") -> OutcomeEvent:
    """The ``outcome`` event that ends a formula run with ``status``."""
    return OutcomeEvent(
        status=status,
        stage=STAGE,
        code=_CODES.get(status, status),
        user_message=user_message,
        internal_reason=internal_reason,
    )


def stored(event: OutcomeEvent) -> dict[str, JsonValue]:
    """The outcome kept with the run (``RunRecord.outcome``): the event's fields, as an agent run's."""
    return {
        "status": event.status,
        "stage": event.stage,
        "code": event.code,
        "user_message": event.user_message,
        "internal_reason": event.internal_reason,
    }


def failed_steps_message(failed: Iterable[tuple[str, str]]) -> str:
    """``failed steps: publish (rejected: not now); notify (…)``: each failed step with its reason."""
    parts = [f"{step_id} ({reason})" if reason else step_id for step_id, reason in failed]
    return f"failed steps: {'; '.join(parts)}"


__all__ = ["STAGE", "failed_steps_message", "outcome_event", "stored"]
