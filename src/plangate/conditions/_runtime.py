"""What the compiled closures and the reason writer share: value kinds, typed comparison, lookups, display.

This module defines the meaning of values (``1 == 1.0``, a boolean is not a number, ordering across kinds is
not satisfied), how steps and outputs are found, and how values are shown in reasons. Both evaluation paths
read the context through it, which keeps their verdicts equal. It compiles nothing and words no reason.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final, TypeAlias

from plangate.conditions import ast
from plangate.conditions.context import ConditionContext, ReceiptState, StepState
from plangate.errors import Signal


class _Missing:
    """The value of a reference that does not exist. Compares like ``null``; shown as ``missing``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()

# How long a value may get in a reason before it is cut, and how deep a container is shown.
_SHOW_CHARS = 80
_SHOW_DEPTH = 3

ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# ``a OP b`` is ``b FLIPPED[OP] a``.
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Unsatisfied(Signal):  # a verdict carried out of nested closures, not a failure
    """Ends an evaluation as unsatisfied with ``reason``: an unknown step, a refused file path.

    Raised deep inside closures so that ``not`` cannot turn "step 'x' not found" into a pass.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# What a bare ``status`` (or, inside ``receipts.…(p)``, a bare ``tool``) refers to: an aggregate's element,
# or ``None`` for the current step. The parser never lets a step field meet a receipt in focus, or the
# other way round.
Focus: TypeAlias = StepState | ReceiptState | None
Member: TypeAlias = StepState | ReceiptState
Getter: TypeAlias = Callable[[ConditionContext, Focus], object]
Test: TypeAlias = Callable[[ConditionContext, Focus], bool]


def redacted_source(node: ast.Expr) -> str:
    """``to_source`` for reasons: every literal compared with ``env.X`` is shown as ``'***'``.

    A literal an environment variable is tested against may be that variable's value.
    """
    return ast.to_source(_redact(node))


def _redact(node: ast.Expr) -> ast.Expr:
    # Returns ``node`` itself when nothing below it changes, which is nearly always.
    if isinstance(node, ast.Compare):
        left, right = _redact(node.left), _redact(node.right)
        if isinstance(left, ast.EnvRef) and isinstance(right, ast.Literal):
            right = ast.Literal("***")
        elif isinstance(right, ast.EnvRef) and isinstance(left, ast.Literal):
            left = ast.Literal("***")
        if left is node.left and right is node.right:
            return node
        return dataclasses.replace(node, left=left, right=right)
    if isinstance(node, ast.Not):
        operand = _redact(node.operand)
        return node if operand is node.operand else dataclasses.replace(node, operand=operand)
    if isinstance(node, ast.And | ast.Or):
        operands = tuple(_redact(operand) for operand in node.operands)
        if all(new is old for new, old in zip(operands, node.operands, strict=True)):
            return node
        return dataclasses.replace(node, operands=operands)
    if isinstance(node, ast.Aggregate):
        predicate = _redact(node.predicate)
        return node if predicate is node.predicate else dataclasses.replace(node, predicate=predicate)
    return node


# -- kinds and typed comparison ------------------------------------------------------------------------------


def kind_of(value: object) -> str:
    """The language's name for the kind of ``value``: string, number, boolean, null, list, object."""
    if value is None or value is MISSING:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "list"
    return type(value).__name__


def equal(left: object, right: object) -> bool:
    """Typed equality: kinds must match (``1 == 1.0``, but ``true`` is not ``1`` and not ``'True'``)."""
    kind = kind_of(left)
    if kind != kind_of(right):
        return False
    if kind == "null":
        return True
    if kind == "list" and isinstance(left, Sequence) and isinstance(right, Sequence):
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
    if kind == "object" and isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(equal(left[key], right[key]) for key in left)
    return bool(left == right)


def orderable(left: object, right: object) -> bool:
    """True when ``<`` and friends mean something between the two: two numbers or two strings."""
    kind = kind_of(left)
    return kind in ("number", "string") and kind == kind_of(right)


def compare(op: str, left: object, right: object) -> bool:
    """Apply comparison ``op`` with the language's typing; anything not comparable is simply false."""
    if op == "==":
        return equal(left, right)
    if op == "!=":
        return not equal(left, right)
    return orderable(left, right) and ORDERING[op](left, right)


def literal_test(op: str, literal: object) -> Callable[[object], bool]:
    """A one-argument test ``value OP literal``, specialised to the literal's kind (the hot path).

    Agrees with ``compare(op, value, literal)`` on the values outputs hold (JSON-like data).
    """
    if literal is None:
        return _is_null if op == "==" else _is_not_null if op == "!=" else _never
    if isinstance(literal, bool):
        if op in ("==", "!="):
            return partial(operator.is_ if op == "==" else operator.is_not, literal)
        return _never
    if isinstance(literal, str):
        if op in ("==", "!="):
            # ``str.__eq__`` answers False for anything that is not a string, which is the typed meaning.
            return partial(operator.eq if op == "==" else operator.ne, literal)
        order = ORDERING[op]
        return lambda value: isinstance(value, str) and order(value, literal)
    # A number. ``True == 1`` in Python, so booleans are turned away explicitly.
    if op in ("==", "!="):
        same = op == "=="
        return lambda value: (
            (isinstance(value, int | float) and value.__class__ is not bool and value == literal) is same
        )
    order = ORDERING[op]
    return lambda value: (
        isinstance(value, int | float) and value.__class__ is not bool and order(value, literal)
    )


def _is_null(value: object) -> bool:
    return value is None or value is MISSING


def _is_not_null(value: object) -> bool:
    return value is not None and value is not MISSING


def _never(value: object) -> bool:
    return False


# -- steps and outputs ---------------------------------------------------------------------------------------


def named_step(ctx: ConditionContext, step_id: str) -> StepState:
    """The step called ``step_id``, or an unsatisfied verdict ``step 'x' not found``."""
    step = ctx.steps.get(step_id)
    if step is None:
        raise Unsatisfied(f"step '{step_id}' not found")
    return step


def focus_step(ctx: ConditionContext, focus: Focus) -> StepState:
    """The step a bare ``status`` means: the aggregate element being tested, else the current step."""
    if isinstance(focus, StepState):
        return focus
    if focus is not None:
        raise Unsatisfied("a receipt has no status or id: its fields are tool, success, step, source, output")
    current = ctx.current_step
    if current is None:
        raise Unsatisfied("there is no current step to read status, id or output from")
    step = ctx.steps.get(current)
    if step is None:
        raise Unsatisfied(f"current step '{current}' not found")
    return step


def lookup(value: object, path: tuple[str, ...]) -> object:
    """Walk ``path`` down nested mappings; where that fails, try the rest of the path as one dotted key.

    ``{"errors": {"count": 0}}`` and ``{"errors.count": 0}`` both give 0 for ``("errors", "count")``.
    Returns ``MISSING`` when neither finds a value.
    """
    current = value
    for key in path:
        if not isinstance(current, dict):
            break
        current = current.get(key, MISSING)
        if current is MISSING:
            break
    else:
        return current
    return _lookup_slow(value, path)


def _lookup_slow(value: object, path: tuple[str, ...]) -> object:
    visited: list[tuple[Mapping[object, object], int]] = []
    current = value
    for index, key in enumerate(path):
        if not isinstance(current, Mapping):
            break
        visited.append((current, index))
        if key not in current:
            break
        current = current[key]
    else:
        return current
    # Deepest first: the most nested spelling wins over a flat key higher up.
    for mapping, index in reversed(visited):
        if index + 1 < len(path):
            flat = ".".join(path[index:])
            if flat in mapping:
                return mapping[flat]
    return MISSING


def field_value(step: StepState, field: str, path: tuple[str, ...]) -> object:
    """``status``, ``id``, or the output (``path`` below it) of ``step``; ``MISSING`` where there is none."""
    if field == "status":
        return step.status
    if field == "id":
        return step.id
    output = step.output
    if not path:
        return MISSING if output is None else output
    return lookup(output, path)


def focus_receipt(focus: Focus) -> ReceiptState:
    """The receipt being tested inside ``receipts.…(p)``."""
    if isinstance(focus, ReceiptState):
        return focus
    raise Unsatisfied("there is no receipt in focus: receipt fields are read inside receipts.any/all/count")


def receipt_value(receipt: ReceiptState, field: str, path: tuple[str, ...]) -> object:
    """``tool``, ``success``, ``step``, ``source``, or the output (``path`` below it) of ``receipt``."""
    if field == "output":
        output = receipt.output
        return output if not path else lookup(output, path)
    value: object = getattr(receipt, field)
    return value


def members(ctx: ConditionContext, focus: Focus, scope: str, step_id: str | None) -> Sequence[Member]:
    """What an aggregate ranges over: a parent's children or descendants, every step, or the receipts."""
    if scope == "steps":
        return list(ctx.steps.values())
    if scope == "receipts":
        return ctx.receipts
    parent = focus_step(ctx, focus) if step_id is None else named_step(ctx, step_id)
    if scope == "children":
        return parent.children
    return descendants(parent)


def descendants(parent: StepState) -> list[StepState]:
    """Every step below ``parent``, depth first in document order; a step reached twice is listed once."""
    found: list[StepState] = []
    seen = {id(parent)}
    stack = list(reversed(parent.children))
    while stack:
        step = stack.pop()
        if id(step) in seen:
            continue
        seen.add(id(step))
        found.append(step)
        stack.extend(reversed(step.children))
    return found


def count_status(ctx: ConditionContext, status: str) -> int:
    """How many steps of the context are in ``status``."""
    count = 0
    for step in ctx.steps.values():
        if step.status == status:
            count += 1
    return count


# -- showing values in reasons -------------------------------------------------------------------------------


def show(value: object) -> str:
    """Show a value the way the language writes it, shortened for a one-line reason."""
    try:
        text = _show(value, _SHOW_DEPTH)
    except (ValueError, OverflowError, RecursionError):  # a value no display can spell: say what it is
        text = f"<a {kind_of(value)}>"
    if len(text) > _SHOW_CHARS:
        text = text[: _SHOW_CHARS - 3] + "..."
    return text


# Integers at least this large are shown by their leading digits and their size: the full digits would be
# cut anyway, and beyond 4,300 digits Python refuses to write them.
_LONG_INT = 10**24
_LEADING_DIGITS = 12


def show_int(value: int) -> str:
    """An integer as a reason shows it: exact below 10^24, else ``1.5...e+5000 (an integer of 5,001 digits)``
    (``...`` when digits were left out), so that the number is never read as something it is not."""
    size = abs(value)
    if size < _LONG_INT:
        return repr(value)
    digits = _digit_count(size)
    scale = 10 ** (digits - _LEADING_DIGITS)
    lead = size // scale
    exact = lead * scale == size
    leading = str(lead).rstrip("0") if exact else str(lead)
    mantissa = leading[0] + ("." + leading[1:] if len(leading) > 1 else "")
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa}{'' if exact else '...'}e+{digits - 1} (an integer of {digits:,} digits)"


def _digit_count(size: int) -> int:
    # From the bit length (str() of a huge integer is refused), then corrected by one either way.
    digits = max(1, int(size.bit_length() * math.log10(2)))
    while 10 ** (digits - 1) > size:
        digits -= 1
    while 10**digits <= size:
        digits += 1
    return digits


def _show(value: object, depth: int) -> str:
    if value is MISSING:
        return "missing"
    if value is None or isinstance(value, bool | str):
        return ast.format_scalar(value)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return repr(value)
        return show_int(value) if isinstance(value, int) else ast.format_scalar(value)
    if isinstance(value, Mapping):
        if depth <= 0:
            return "{...}"
        items = list(value.items())[:8]
        inner = ", ".join(f"{_show(key, 0)}: {_show(item, depth - 1)}" for key, item in items)
        return "{" + inner + (", ...}" if len(value) > 8 else "}")
    if isinstance(value, list | tuple):
        if depth <= 0:
            return "[...]"
        inner = ", ".join(_show(item, depth - 1) for item in value[:8])
        return "[" + inner + (", ...]" if len(value) > 8 else "]")
    return f"<{type(value).__name__}>"


__all__ = [
    "FLIPPED",
    "MISSING",
    "ORDERING",
    "Focus",
    "Getter",
    "Member",
    "Test",
    "Unsatisfied",
    "compare",
    "count_status",
    "descendants",
    "equal",
    "field_value",
    "focus_receipt",
    "focus_step",
    "kind_of",
    "literal_test",
    "lookup",
    "members",
    "named_step",
    "orderable",
    "receipt_value",
    "redacted_source",
    "show",
    "show_int",
]
