"""``done_when`` conditions: the completion of an agent (or of a plan step) stated over the run's receipts.

For: checking a ``done_when`` a developer wrote (``compile_done_when``: it must range over ``receipts`` and
read nothing of formula steps, which an agent run does not have; a ``source`` it compares must be a real
one), telling a plan step's ``done_when`` that is such a condition from one written in words
(``done_when_condition``), and listing the tools a condition names (``named_tools``, for load-time checks).
Not for: evaluating (``Condition.evaluate`` on a context whose ``receipts`` are the run's) or deciding what a
condition that holds does to a run (the agent runtime).

>>> from plangate.conditions import ConditionContext, ReceiptState
>>> done = compile_done_when("receipts.any(tool == 'place' and success)")
>>> ctx = ConditionContext(receipts=[ReceiptState("place", True, None, "write_receipt", "placed t9")])
>>> done.evaluate(ctx).satisfied, done.evaluate(ctx).reason.split(":")[0]
(True, "receipt #1 (place, write_receipt) satisfies tool == 'place' and success")
"""

from __future__ import annotations

from plangate.conditions import ast
from plangate.conditions._lexer import describe
from plangate.conditions.condition import Condition, compile_condition
from plangate.conditions.errors import ConditionSyntaxError

_SETS = "receipts.any(...), receipts.all(...) or receipts.count(...)"


def compile_done_when(expression: str) -> Condition:
    """Compile a ``done_when`` condition and check that it is one the agent runtime can decide.

    Raises:
        ConditionSyntaxError: the text does not parse (an unknown receipt field among the reasons), reads
            step states, ranges over no receipts, or compares ``source`` with a source that does not exist.
        TypeError: ``expression`` is not a string.
    """
    condition = compile_condition(expression)
    tree = condition.ast
    readers = ast.step_readers(tree)
    if readers:
        node = readers[0]
        found = describe(ast.to_source(node))
        raise ConditionSyntaxError(
            expression,
            node.position,
            "a condition over the run's receipts",
            found,
            message=f"a done_when condition reads the run's receipts only; found {found} at column "
            f"{node.position + 1} (an agent run has no steps to read)",
        )
    if not ast.reads_receipts(tree):
        raise ConditionSyntaxError(
            expression,
            0,
            _SETS,
            describe(expression),
            message=f"a done_when condition ranges over the run's receipts: expected {_SETS}",
        )
    for field, value, position in _compared(tree):
        if field == "source" and value not in ast.RECEIPT_SOURCES:
            raise ConditionSyntaxError(
                expression,
                position,
                f"one of {', '.join(ast.RECEIPT_SOURCES)}",
                describe(str(value)),
                message=f"unknown receipt source {ast.format_scalar(value)} at column {position + 1}; "
                f"expected {', '.join(map(ast.quote, ast.RECEIPT_SOURCES))}",
            )
    return condition


def done_when_condition(text: str) -> Condition | None:
    """The condition a plan step's ``done_when`` states, or None when it is written in words.

    Words are a claim the model makes and proves with a receipt; a condition the runtime checks itself.
    """
    if "receipts" not in text:
        return None
    try:
        return compile_done_when(text)
    except ConditionSyntaxError:
        return None


def named_tools(condition: Condition) -> tuple[str, ...]:
    """The tool names the condition compares ``tool`` with (``tool == 'place'``), in order."""
    seen: dict[str, None] = {}
    for field, value, _ in _compared(condition.ast):
        if field == "tool" and isinstance(value, str):
            seen.setdefault(value, None)
    return tuple(seen)


def _compared(tree: ast.Expr) -> list[tuple[str, ast.Scalar, int]]:
    """Every receipt field compared with a constant: ``(field, constant, where the constant is)``."""
    found: list[tuple[str, ast.Scalar, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for field, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(field, ast.ReceiptField) and isinstance(other, ast.Literal):
                found.append((field.field, other.value, other.position))
    return found


__all__ = ["compile_done_when", "done_when_condition", "named_tools"]
