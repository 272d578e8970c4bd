"""The typed syntax tree of a condition, and the ways to print it.

Nodes are frozen dataclasses built by the parser; the compiler turns them into closures. This module only
describes and prints expressions (``to_source`` for canonical text, ``dump`` for an s-expression); it does not
parse or evaluate them.

``position`` (the 0-based column where a node starts) is carried for messages but is not part of a node's
identity: two trees parsed from differently spaced text compare equal.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal as TypingLiteral

Scalar = str | int | float | bool | None
CompareOp = TypingLiteral["==", "!=", "<", "<=", ">", ">="]
StepFieldName = TypingLiteral["status", "id", "output"]
ReceiptFieldName = TypingLiteral["tool", "success", "step", "source", "output"]
AggregateKind = TypingLiteral["all", "any", "count"]
AggregateScope = TypingLiteral["children", "descendants", "steps", "receipts"]

STATUSES = ("pending", "ready", "running", "waiting", "complete", "failed", "skipped", "cancelled")
RECEIPT_FIELDS: tuple[ReceiptFieldName, ...] = ("tool", "success", "step", "source", "output")
"""What a receipt offers inside ``receipts.any(...)``, ``receipts.all(...)`` and ``receipts.count(...)``."""
RECEIPT_SOURCES = ("tool_observation", "write_receipt", "user_reply")


@dataclass(frozen=True, slots=True)
class Node:
    """Base of every node."""

    position: int = field(default=0, compare=False, repr=False, kw_only=True)


# Each node's ``__init__`` writes its slots through their descriptors: the same frozen result as the
# dataclass-generated one (which goes through ``object.__setattr__``), in about half the time. The parser
# builds several nodes per comparison, so this is a visible part of compiling.


@dataclass(frozen=True, slots=True, init=False)
class Literal(Node):
    """A string, number, ``true``, ``false`` or ``null`` written in the expression."""

    value: Scalar

    def __init__(self, value: Scalar, *, position: int = 0) -> None:
        _literal_value(self, value)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class StepField(Node):
    """A field of a step: ``build.status``, ``tests.output.summary.failed``, ``step.id``, bare ``status``.

    Attributes:
        step: the step id, or ``None`` for the step in focus (the current step; inside an aggregate
            predicate, the element being tested).
        field: ``status``, ``id`` or ``output``.
        path: for ``output``, the keys below it (``("summary", "failed")``); empty for the whole output.
    """

    step: str | None
    field: StepFieldName
    path: tuple[str, ...] = ()

    def __init__(
        self, step: str | None, field: StepFieldName, path: tuple[str, ...] = (), *, position: int = 0
    ) -> None:
        _field_step(self, step)
        _field_field(self, field)
        _field_path(self, path)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class ReceiptField(Node):
    """A field of the receipt being tested inside a ``receipts`` aggregate: ``tool``, ``output.placed``.

    Attributes:
        field: ``tool``, ``success``, ``step``, ``source`` or ``output``.
        path: for ``output``, the keys below it; empty for the whole output (and for the other fields).
    """

    field: ReceiptFieldName
    path: tuple[str, ...] = ()

    def __init__(self, field: ReceiptFieldName, path: tuple[str, ...] = (), *, position: int = 0) -> None:
        _receipt_field(self, field)
        _receipt_path(self, path)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class VarRef(Node):
    """``vars.NAME``: a formula variable."""

    name: str

    def __init__(self, name: str, *, position: int = 0) -> None:
        _var_name(self, name)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class EnvRef(Node):
    """``env.NAME``: an environment variable, read from the context's allow-listed environment."""

    name: str

    def __init__(self, name: str, *, position: int = 0) -> None:
        _env_name(self, name)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class FileExists(Node):
    """``file.exists('path')``: true when the path (after ``{{var}}`` substitution) exists under the root."""

    path: str

    def __init__(self, path: str, *, position: int = 0) -> None:
        _file_path(self, path)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class StatusCount(Node):
    """``steps.<status>``: how many steps are in that status."""

    status: str

    def __init__(self, status: str, *, position: int = 0) -> None:
        _count_status(self, status)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class Aggregate(Node):
    """``children(x).all(p)``, ``descendants(x).any(p)``, ``steps.count(p)``, ``receipts.any(p)``.

    ``count`` is a number; its threshold is the other side of the enclosing ``Compare``, a separate node.

    Attributes:
        kind: ``all``, ``any`` or ``count``.
        scope: ``children``, ``descendants``, ``steps`` (every step of the context) or ``receipts`` (the
            run's evidence receipts).
        step: the parent step id for ``children``/``descendants`` (``None``: the step in focus); ``None`` for
            ``steps`` and ``receipts``.
        predicate: tested against each element, which becomes the step (or the receipt) in focus.
    """

    kind: AggregateKind
    scope: AggregateScope
    step: str | None
    predicate: Expr

    def __init__(
        self,
        kind: AggregateKind,
        scope: AggregateScope,
        step: str | None,
        predicate: Expr,
        *,
        position: int = 0,
    ) -> None:
        _aggregate_kind(self, kind)
        _aggregate_scope(self, scope)
        _aggregate_step(self, step)
        _aggregate_predicate(self, predicate)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class Compare(Node):
    """``left OP right`` with one of the six comparison operators."""

    op: CompareOp
    left: Expr
    right: Expr

    def __init__(self, op: CompareOp, left: Expr, right: Expr, *, position: int = 0) -> None:
        _compare_op(self, op)
        _compare_left(self, left)
        _compare_right(self, right)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class Not(Node):
    """``not x`` / ``!x``."""

    operand: Expr

    def __init__(self, operand: Expr, *, position: int = 0) -> None:
        _not_operand(self, operand)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class And(Node):
    """``a and b and ...``: two or more operands, evaluated left to right, stopping at the first false."""

    operands: tuple[Expr, ...]

    def __init__(self, operands: tuple[Expr, ...], *, position: int = 0) -> None:
        _and_operands(self, operands)
        _position(self, position)


@dataclass(frozen=True, slots=True, init=False)
class Or(Node):
    """``a or b or ...``: two or more operands, evaluated left to right, stopping at the first true."""

    operands: tuple[Expr, ...]

    def __init__(self, operands: tuple[Expr, ...], *, position: int = 0) -> None:
        _or_operands(self, operands)
        _position(self, position)


def _setter(cls: type[Node], name: str) -> Callable[[Node, object], None]:
    setter: Callable[[Node, object], None] = getattr(cls, name).__set__
    return setter


_position = _setter(Node, "position")
_literal_value = _setter(Literal, "value")
_field_step, _field_field, _field_path = (_setter(StepField, name) for name in ("step", "field", "path"))
_receipt_field, _receipt_path = (_setter(ReceiptField, name) for name in ("field", "path"))
_var_name = _setter(VarRef, "name")
_env_name = _setter(EnvRef, "name")
_file_path = _setter(FileExists, "path")
_count_status = _setter(StatusCount, "status")
_aggregate_kind, _aggregate_scope, _aggregate_step, _aggregate_predicate = (
    _setter(Aggregate, name) for name in ("kind", "scope", "step", "predicate")
)
_compare_op, _compare_left, _compare_right = (_setter(Compare, name) for name in ("op", "left", "right"))
_not_operand = _setter(Not, "operand")
_and_operands = _setter(And, "operands")
_or_operands = _setter(Or, "operands")

Expr = (
    Literal
    | StepField
    | ReceiptField
    | VarRef
    | EnvRef
    | FileExists
    | StatusCount
    | Aggregate
    | Compare
    | Not
    | And
    | Or
)

# Binding strength, for putting back only the parentheses that matter.
_PRECEDENCE: dict[type[Node], int] = {Or: 1, And: 2, Not: 3, Compare: 4}
_ATOM = 5


def children(node: Node) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``node``, left to right."""
    if isinstance(node, And | Or):
        return node.operands
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Not):
        return (node.operand,)
    if isinstance(node, Aggregate):
        return (node.predicate,)
    return ()


def walk(node: Node) -> Iterator[Node]:
    """Yield ``node`` and every node below it, depth first, left to right (no recursion)."""
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def references(node: Node) -> tuple[str, ...]:
    """The step ids ``node`` names (``build.status``, ``children(tests)``), in order of first appearance."""
    seen: dict[str, None] = {}
    for item in walk(node):
        if isinstance(item, StepField | Aggregate) and item.step is not None:
            seen.setdefault(item.step, None)
    return tuple(seen)


def reads_receipts(node: Node) -> bool:
    """Whether ``node`` ranges over the run's receipts somewhere (``receipts.any(...)`` and the like)."""
    return any(isinstance(item, Aggregate) and item.scope == "receipts" for item in walk(node))


def step_readers(node: Node) -> tuple[Expr, ...]:
    """The parts of ``node`` that read step states (fields, step sets, status counts), in order."""
    return tuple(
        item
        for item in walk(node)
        if isinstance(item, StepField | StatusCount)
        or (isinstance(item, Aggregate) and item.scope != "receipts")
    )


def format_scalar(value: Scalar) -> str:
    """Write a scalar the way the language spells it: ``'text'``, ``3``, ``2.5``, ``true``, ``null``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, float) and not math.isfinite(value):
        # Only ``1e999`` and the like produce these; spell them so they read back as numbers.
        return "nan" if math.isnan(value) else "1e999" if value > 0 else "-1e999"
    return repr(value)


# Values no string written by ``quote`` may show while a reason is worded (``hiding``).
_HIDDEN: ContextVar[tuple[str, ...]] = ContextVar("plangate_condition_hidden", default=())
HIDDEN_MARK = "***"
"""What a hidden value is written as."""


@contextlib.contextmanager
def hiding(values: Collection[str]) -> Iterator[None]:
    """While the block runs, every occurrence of each of ``values`` inside a string that ``quote`` writes is
    written ``***`` instead (longest first, so one value inside another is hidden whole).

    Reasons are worded inside such a block with the environment's values: every string a reason shows, a
    step's output or a literal of the condition, is written by ``quote``, so none can echo one of them.
    """
    hidden = tuple(sorted({value for value in values if value}, key=len, reverse=True))
    token = _HIDDEN.set(hidden)
    try:
        yield
    finally:
        _HIDDEN.reset(token)


def quote(text: str) -> str:
    """Write ``text`` as a single-quoted string literal that the lexer reads back unchanged (outside a
    ``hiding`` block, where hidden values are written ``***``)."""
    for value in _HIDDEN.get():
        text = text.replace(value, HIDDEN_MARK)
    escaped = (
        text.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\r", "\\r")
        .replace("\0", "\\0")
    )
    if not escaped.isprintable():
        # Characters beyond \uFFFF stay as they are: the lexer takes any character inside quotes.
        escaped = "".join(
            f"\\u{ord(ch):04x}" if not ch.isprintable() and ord(ch) <= 0xFFFF else ch for ch in escaped
        )
    return f"'{escaped}'"


def to_source(node: Node) -> str:
    """Canonical text of ``node``: single quotes, single spaces, ``and``/``or``/``not``, minimal parentheses.

    Parsing the result gives back an equal tree.
    """
    if isinstance(node, Literal):
        return format_scalar(node.value)
    if isinstance(node, StepField):
        return _field_source(node)
    if isinstance(node, ReceiptField):
        return ".".join((node.field, *node.path))
    if isinstance(node, VarRef):
        return f"vars.{node.name}"
    if isinstance(node, EnvRef):
        return f"env.{node.name}"
    if isinstance(node, FileExists):
        return f"file.exists({quote(node.path)})"
    if isinstance(node, StatusCount):
        return f"steps.{node.status}"
    if isinstance(node, Aggregate):
        return f"{scope_source(node)}.{node.kind}({to_source(node.predicate)})"
    if isinstance(node, Compare):
        return f"{_wrapped(node.left, 4)} {node.op} {_wrapped(node.right, 4)}"
    if isinstance(node, Not):
        return f"not {_wrapped(node.operand, 2)}"
    if isinstance(node, And):
        return " and ".join(_wrapped(item, 2) for item in node.operands)
    if isinstance(node, Or):
        return " or ".join(_wrapped(item, 1) for item in node.operands)
    raise TypeError(f"to_source: expected a condition node, found {type(node).__name__}")


def scope_source(node: Aggregate) -> str:
    """The set an aggregate ranges over, as written: ``children(tests)``, ``steps``, ``receipts``."""
    if node.scope in ("steps", "receipts"):
        return node.scope
    return f"{node.scope}({node.step if node.step is not None else 'step'})"


def _field_source(node: StepField) -> str:
    parts = [node.field, *node.path]
    if node.step is not None:
        parts.insert(0, node.step)
    return ".".join(parts)


def _wrapped(node: Expr, weaker_or_equal: int) -> str:
    # Parenthesise a child whose operator binds no tighter than ``weaker_or_equal``.
    text = to_source(node)
    if _PRECEDENCE.get(type(node), _ATOM) <= weaker_or_equal:
        return f"({text})"
    return text


def dump(node: Node, indent: int | None = None) -> str:
    """An s-expression of ``node`` for tests and ``--ast``: ``(== (field build status) 'complete')``.

    Args:
        node: the tree to print.
        indent: ``None`` for one line; a number of spaces to put each sub-expression on its own line.
    """
    return _dump(node, indent, 0)


def _dump(node: Node, indent: int | None, level: int) -> str:
    head, subs = _dump_parts(node)
    if not subs:
        return head
    if indent is None:
        return f"({head} {' '.join(_dump(sub, None, 0) for sub in subs)})"
    pad = " " * (indent * (level + 1))
    inner = "\n".join(pad + _dump(sub, indent, level + 1) for sub in subs)
    return f"({head}\n{inner})"


def _dump_parts(node: Node) -> tuple[str, tuple[Node, ...]]:
    if isinstance(node, Literal):
        return format_scalar(node.value), ()
    if isinstance(node, StepField):
        step = node.step if node.step is not None else "<focus>"
        return f"(field {' '.join([step, node.field, *node.path])})", ()
    if isinstance(node, ReceiptField):
        return f"(receipt {' '.join([node.field, *node.path])})", ()
    if isinstance(node, VarRef):
        return f"(var {node.name})", ()
    if isinstance(node, EnvRef):
        return f"(env {node.name})", ()
    if isinstance(node, FileExists):
        return f"(file-exists {quote(node.path)})", ()
    if isinstance(node, StatusCount):
        return f"(status-count {node.status})", ()
    if isinstance(node, Aggregate):
        if node.scope in ("steps", "receipts"):
            scope = f"({node.scope})"
        else:
            scope = f"({node.scope} {node.step or '<focus>'})"
        return f"{node.kind} {scope}", (node.predicate,)
    if isinstance(node, Compare):
        return node.op, (node.left, node.right)
    if isinstance(node, Not | And | Or):
        return type(node).__name__.lower(), children(node)
    raise TypeError(f"dump: expected a condition node, found {type(node).__name__}")


__all__ = [
    "RECEIPT_FIELDS",
    "RECEIPT_SOURCES",
    "STATUSES",
    "Aggregate",
    "AggregateKind",
    "AggregateScope",
    "And",
    "Compare",
    "CompareOp",
    "EnvRef",
    "Expr",
    "FileExists",
    "Literal",
    "Node",
    "Not",
    "Or",
    "ReceiptField",
    "ReceiptFieldName",
    "Scalar",
    "StatusCount",
    "StepField",
    "StepFieldName",
    "VarRef",
    "children",
    "dump",
    "format_scalar",
    "quote",
    "reads_receipts",
    "references",
    "step_readers",
    "to_source",
    "walk",
]
