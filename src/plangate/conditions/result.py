"""``ConditionResult``: the verdict of one evaluation and the reason for it, in words a person can read.

The verdict is computed when the result is made; the reason is written the first time it is read (then
kept), because most gates are checked far more often than their reasons are shown. This module holds the
result type only; how a reason is worded is ``_explain``'s business.
"""

from __future__ import annotations

from collections.abc import Callable

from plangate.conditions.context import ConditionContext

Explain = Callable[[ConditionContext], tuple[bool, str]]
# Until the reason is written, the result holds what writes it and the context it explains.
_Pending = tuple[Explain, ConditionContext]


class ConditionResult:
    """Whether a condition holds, and why.

    Create one directly with both fields, or get one from ``Condition.evaluate``, which defers writing the
    reason until it is first read. Truthiness is ``satisfied``.

    Attributes:
        satisfied: the verdict.
    """

    __slots__ = ("_reason", "satisfied")

    satisfied: bool

    def __init__(self, satisfied: bool, reason: str) -> None:
        self.satisfied = satisfied
        self._reason: str | _Pending = reason

    @property
    def reason(self) -> str:
        """Why the condition holds or not, e.g. ``b.output.n is 2, not > 3``."""
        reason = self._reason
        if isinstance(reason, str):
            return reason
        explain, context = reason
        verdict, text = explain(context)
        if verdict != self.satisfied:
            # Only possible when the context was changed between evaluating and reading the reason.
            text += " (the context changed after evaluation: this reason no longer matches the verdict)"
        self._reason = text  # also lets go of the context
        return text

    def __bool__(self) -> bool:
        return self.satisfied

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConditionResult):
            return NotImplemented
        return self.satisfied == other.satisfied and self.reason == other.reason

    def __hash__(self) -> int:
        return hash((self.satisfied, self.reason))

    def __repr__(self) -> str:
        return f"ConditionResult(satisfied={self.satisfied!r}, reason={self.reason!r})"


_new = object.__new__


def deferred(satisfied: bool, explain: Explain, context: ConditionContext) -> ConditionResult:
    """A result whose reason is ``explain(context)``, written when first read.

    Args:
        satisfied: the verdict already computed.
        explain: repeats the evaluation in words, returning its verdict and the reason.
        context: what to explain against; released once the reason is written.
    """
    # Skipping ``__init__`` (one Python call) is a third of making a result, which every evaluation does.
    result: ConditionResult = _new(ConditionResult)
    result.satisfied = satisfied
    result._reason = (explain, context)
    return result


__all__ = ["ConditionResult", "deferred"]
