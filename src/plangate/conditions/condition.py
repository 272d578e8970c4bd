"""``Condition``, ``compile_condition`` and ``evaluate``: the front door of the condition language.

This module orchestrates (parse, compile, cache, evaluate, guard); the phases live in ``_lexer``, ``_parser``
and ``_compiler``. It guarantees the two promises callers rely on: compiling raises only
``ConditionSyntaxError`` for bad text, and evaluating never raises at all.
"""

from __future__ import annotations

from functools import lru_cache, partial

from plangate.conditions import ast
from plangate.conditions._compiler import compile_test
from plangate.conditions._explain import explain
from plangate.conditions._parser import parse
from plangate.conditions._runtime import Test
from plangate.conditions.context import ConditionContext
from plangate.conditions.result import ConditionResult, deferred

CACHE_SIZE = 1024


class Condition:
    """A compiled expression, ready to be evaluated many times.

    ``Condition(text)`` parses and compiles every time; ``compile_condition(text)`` does the same through a
    cache. An instance does not change once built (``references`` is worked out on first use) and is safe to
    share between threads.

    ``references`` lists the step ids it names (``build`` in ``build.status``, ``tests`` in
    ``children(tests)``), for load-time checks.

    Attributes:
        expression: the text it was compiled from.
        ast: its syntax tree.
    """

    __slots__ = ("_explain", "_references", "_test", "ast", "expression")

    def __init__(self, expression: str) -> None:
        """Parse and compile ``expression``.

        Raises:
            ConditionSyntaxError: the text does not parse or exceeds a limit.
            TypeError: ``expression`` is not a string.
        """
        if not isinstance(expression, str):
            raise TypeError(f"a condition expression must be a str, not {type(expression).__name__}")
        tree = parse(expression)
        self.expression = expression
        self.ast: ast.Expr = tree
        self._references: tuple[str, ...] | None = None
        self._test: Test = compile_test(tree)
        self._explain = partial(explain, tree)

    @property
    def references(self) -> tuple[str, ...]:
        """The step ids the expression names, in order of first appearance."""
        if self._references is None:
            self._references = ast.references(self.ast)
        return self._references

    def evaluate(self, ctx: ConditionContext) -> ConditionResult:
        """Evaluate against ``ctx``. Never raises: any problem is an unsatisfied result with a reason.

        The reason is written when first read, from the same context; if the context was changed in between so
        that the verdict no longer holds, the reason says so.
        """
        try:
            satisfied = bool(self._test(ctx, None))
        except Exception:  # an unknown step, a refused path, or a context of the wrong shape
            satisfied = False
        return deferred(satisfied, self._explain, ctx)

    def explain(self, ctx: ConditionContext) -> ConditionResult:
        """Evaluate against ``ctx`` and write the reason at once (same verdict as ``evaluate``)."""
        satisfied, reason = self._explain(ctx)
        return ConditionResult(satisfied, reason)

    def __repr__(self) -> str:
        return f"Condition({self.expression!r})"


@lru_cache(maxsize=CACHE_SIZE)
def _cached(expression: str) -> Condition:
    return Condition(expression)


def compile_condition(expression: str) -> Condition:
    """Parse, check and compile ``expression``, reusing a compiled one for text seen recently.

    The cache is a bounded LRU keyed by the exact text (``CACHE_SIZE`` entries); failures are not cached.

    Raises:
        ConditionSyntaxError: the text does not parse or exceeds a limit (length, depth, nodes).
        TypeError: ``expression`` is not a string.
    """
    if not isinstance(expression, str):
        raise TypeError(f"a condition expression must be a str, not {type(expression).__name__}")
    return _cached(expression)


def evaluate(expression: str, ctx: ConditionContext) -> ConditionResult:
    """Compile ``expression`` (cached) and evaluate it against ``ctx``.

    Raises:
        ConditionSyntaxError: the text does not parse. Evaluation itself never raises.
    """
    return compile_condition(expression).evaluate(ctx)


def clear_cache() -> None:
    """Forget every cached compiled condition."""
    _cached.cache_clear()


__all__ = ["CACHE_SIZE", "Condition", "clear_cache", "compile_condition", "evaluate"]
