"""``ConditionResult``: the verdict of one evaluation and the reason for it, in words a person can read.

The verdict is computed when the result is made; the reason is written the first time it is read (then
kept), because most gates are checked far more often than their reasons are shown. This module holds the
result type only; how a reason is worded is the compiler's business.
"""

from __future__ import annotations

from collections.abc import Callable

from plangate.conditions.context import ConditionContext

Explain = Callable[[ConditionContext], tuple[bool, str]]


class ConditionResult:
    """Whether a condition holds, and why.

    Create one directly with both fields, or get one from ``Condition.evaluate``, which defers writing the
    reason until it is first read. Truthiness is ``satisfied``.

    Attributes:
        satisfied: the verdict.
    """

    __slots__ = ("_pending", "_reason", "satisfied")

    satisfied: bool

    def __init__(self, satisfied: bool, reason: str) -> None:
        self.satisfied = satisfied
        self._reason: str | None = reason
        # What writes the reason, and what it explains; kept only until the reason is written.
        self._pending: tuple[Explain, ConditionContext] | None = None

    @classmethod
    def deferred(cls, satisfied: bool, explain: Explain, context: ConditionContext) -> ConditionResult:
        """A result whose reason is ``explain(context)``, written on first read.

        Args:
            satisfied: the verdict already computed.
            explain: re-runs the evaluation in words, returning its verdict and the reason.
            context: what to explain against; released once the reason is written.
        """
        result = object.__new__(cls)
        result.satisfied = satisfied
        result._reason = None
        result._pending = (explain, context)
        return result

    @property
    def reason(self) -> str:
        """Why the condition holds or not, e.g. ``b.output.n is 2, not > 3``."""
        reason = self._reason
        if reason is None:
            reason = self._write()
        return reason

    def _write(self) -> str:
        assert self._pending is not None  # set whenever ``_reason`` is None
        explain, context = self._pending
        verdict, reason = explain(context)
        if verdict != self.satisfied:
            # Only possible when the context was changed between evaluating and reading the reason.
            reason += " (the context changed after evaluation: this reason no longer matches the verdict)"
        self._reason = reason
        self._pending = None
        return reason

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


__all__ = ["ConditionResult"]
