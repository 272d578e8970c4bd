"""The condition language: a small, safe expression language for gates, loop exits, step filters and
``done_when`` conditions over a run's evidence receipts.

``compile_condition(text)`` parses once into a typed tree (``plangate.conditions.ast``) and compiles it to
closures; ``Condition.evaluate(ctx)`` returns a ``ConditionResult`` with a verdict and a reason. It cannot run
code, read files outside the context's root, or print environment values. Running formulas, and deciding what
a gate's result means for a run, belong to ``plangate.formulas``.

>>> from plangate.conditions import ConditionContext, StepState, evaluate
>>> ctx = ConditionContext({"build": StepState("build", "complete", {"warnings": 2})})
>>> result = evaluate("build.status == 'complete' and build.output.warnings < 1", ctx)
>>> result.satisfied, result.reason
(False, 'build.output.warnings is 2, not < 1')
"""

from __future__ import annotations

from plangate.conditions._parser import MAX_DEPTH, MAX_LENGTH, MAX_NODES, parse
from plangate.conditions.condition import CACHE_SIZE, Condition, clear_cache, compile_condition, evaluate
from plangate.conditions.context import ConditionContext, ReceiptState, StepState, default_env
from plangate.conditions.errors import ConditionSyntaxError
from plangate.conditions.evidence import compile_done_when, done_when_condition, named_tools
from plangate.conditions.result import ConditionResult

__all__ = [
    "CACHE_SIZE",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "Condition",
    "ConditionContext",
    "ConditionResult",
    "ConditionSyntaxError",
    "ReceiptState",
    "StepState",
    "clear_cache",
    "compile_condition",
    "compile_done_when",
    "default_env",
    "done_when_condition",
    "evaluate",
    "named_tools",
    "parse",
]
