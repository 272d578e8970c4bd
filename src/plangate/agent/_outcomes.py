"""The endings the runtime decides on its own, with the words the person reads.

For: one place for every outcome that is not the model's choice (the budget ran out, corrections ran out, a
stall, a model that failed, the runtime's own failure), so their codes and messages stay consistent between
the loop, the phases and the tests. Not for: announcing an outcome (``_deliver.py``) or the model's own
``done`` / ``abort``.
"""

from __future__ import annotations

from plangate.agent.result import Outcome

MAX_CORRECTIONS = 3
"""Consecutive corrections that end a run (``aborted``, ``corrections_exhausted``)."""


def exhausted(stage: str, max_rounds: int) -> Outcome:
    """No round of the budget is left."""
    return Outcome(
        status="exhausted",
        stage=stage,
        code="max_rounds",
        user_message=f"I used all {max_rounds} rounds before finishing.",
    )


def corrections_exhausted(stage: str, last: str) -> Outcome:
    """The model was corrected ``MAX_CORRECTIONS`` times in a row; ``last`` is the last correction."""
    return Outcome(
        status="aborted",
        stage=stage,
        code="corrections_exhausted",
        user_message=(
            f"I could not produce a valid next step after {MAX_CORRECTIONS} corrections in a row, "
            "so I stopped."
        ),
        internal_reason=last,
    )


def stalled(reason: str, user_message: str | None = None) -> Outcome:
    """The same call kept returning nothing new after the model was warned (or, with ``user_message``, the
    model kept asking for a write that had already failed)."""
    return Outcome(
        status="aborted",
        stage="execute",
        code="stalled",
        user_message=user_message
        or "I kept making the same call without learning anything new, so I stopped.",
        internal_reason=reason,
    )


def model_failed(stage: str, failure: Exception) -> Outcome:
    """The model raised instead of answering."""
    return Outcome(
        status="aborted",
        stage=stage,
        code="model_error",
        user_message="The model failed to answer, so I stopped.",
        internal_reason=f"{type(failure).__name__}: {failure}",
    )


def internal_error(stage: str, failure: Exception, unsettled_write: str | None = None) -> Outcome:
    """The runtime itself failed in ``stage``: the run ends instead of staying ``running`` forever.

    The exception goes to ``internal_reason`` (the store and the log) only; the person reads that the run
    stopped, and, when a write had started without its result being recorded, that it may have happened.
    """
    message = "An internal error stopped the run; nothing more was done."
    if unsettled_write is not None:
        message += f" The call {unsettled_write} had started and may or may not have happened: please check."
    reason = f"{type(failure).__name__}: {failure}"
    return Outcome(
        status="aborted",
        stage=stage,
        code="internal_error",
        user_message=message,
        internal_reason=reason[:_MAX_REASON],
    )


# An exception's text can be as long as the hostile value that caused it; the store keeps a bounded part.
_MAX_REASON = 2000


__all__ = [
    "MAX_CORRECTIONS",
    "corrections_exhausted",
    "exhausted",
    "internal_error",
    "model_failed",
    "stalled",
]
