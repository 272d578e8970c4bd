"""How a formula run ends: the run contract's one ``Outcome``, with a formula's stage and codes.

For: the formula's ending codes — ``done`` (every step finished), ``step_failed`` (the message names each
failed step and why), ``cancelled`` — always at ``stage = "run"`` (a formula has no phases), as an
``Outcome`` whose event and stored form the run contract defines (``plangate.runs.outcome``). Not for:
deciding that a run ends (the scheduler and ``runtime.cancel`` do).
"""

from __future__ import annotations

from collections.abc import Iterable

from plangate.formulas._runstate import RunState
from plangate.runs import Outcome, OutcomeStatus
from plangate.runs.usage import children_usage, combined
from plangate.store import Store

STAGE = "run"
"""The stage of every formula outcome."""

_CODES: dict[str, str] = {"completed": "done", "failed": "step_failed", "cancelled": "cancelled"}


def formula_outcome(status: OutcomeStatus, user_message: str, *, internal_reason: str = "") -> Outcome:
    """The outcome that ends a formula run with ``status``."""
    return Outcome(
        status=status,
        stage=STAGE,
        code=_CODES.get(status, status),
        user_message=user_message,
        internal_reason=internal_reason,
    )


def with_steps_usage(outcome: Outcome, store: Store, run_id: str, state: RunState | None = None) -> Outcome:
    """``outcome`` with the model usage of the run's ``llm`` steps (``state``'s), agent steps and
    sub-formulas, when they had any (the store is read only for a plan with steps that start runs)."""
    own = None if state is None else state.usage()
    children = children_usage(store, run_id) if state is None or state.plan.starts_runs() else None
    usage = combined([own, children])
    return outcome if usage is None else outcome.model_copy(update={"usage": usage})


def failed_steps_message(failed: Iterable[tuple[str, str]]) -> str:
    """``failed steps: publish (rejected: not now); notify (…)``: each failed step with its reason."""
    parts = [f"{step_id} ({reason})" if reason else step_id for step_id, reason in failed]
    return f"failed steps: {'; '.join(parts)}"


__all__ = ["STAGE", "failed_steps_message", "formula_outcome", "with_steps_usage"]
