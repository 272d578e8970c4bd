"""Reasons: the evaluation repeated from the syntax tree, this time saying what decided it.

Runs only when a result's reason is read. It reads values through the same ``_runtime`` functions as the
compiled closures and applies the same typed comparison, so its verdict is the closures' verdict; its job is
the words (``b.output.n is 2, not > 3``). No reason ever contains the value of an environment variable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plangate.conditions import ast
from plangate.conditions._compiler import oriented
from plangate.conditions._files import file_exists
from plangate.conditions._runtime import (
    FLIPPED,
    MISSING,
    Focus,
    Member,
    Unsatisfied,
    compare,
    count_status,
    field_value,
    focus_receipt,
    focus_step,
    kind_of,
    members,
    named_step,
    receipt_value,
    redacted_source,
    show,
)
from plangate.conditions.context import ConditionContext, ReceiptState, default_env, env_lookup

Fact = tuple[bool, str]
Shown = tuple[object, str]

_NOUNS = {
    "children": ("child", "children"),
    "descendants": ("descendant", "descendants"),
    "steps": ("step", "steps"),
    "receipts": ("receipt", "receipts"),
}


def explain(tree: ast.Expr, ctx: ConditionContext) -> Fact:
    """The verdict of ``tree`` against ``ctx`` and the reason for it. Never raises.

    No value of the environment the condition may read appears in the reason, wherever it would come from
    (a step's output, a literal compared with something else): see ``ast.hiding``.
    """
    try:
        with ast.hiding(_environment_values(ctx)):
            return why(tree, ctx, None)
    except Unsatisfied as stop:
        return False, stop.reason
    except Exception as exc:  # a context that is not shaped like a ConditionContext
        return False, f"could not evaluate the condition ({type(exc).__name__})"


def _environment_values(ctx: ConditionContext) -> list[str]:
    env = ctx.env if ctx.env is not None else default_env()
    return [value for value in env.values() if isinstance(value, str)]


def why(node: ast.Expr, ctx: ConditionContext, focus: Focus) -> Fact:
    """``node`` as a condition: its verdict and the fact that decided it."""
    handler = _WHY.get(type(node))
    if handler is not None:
        verdict, fact = handler(node, ctx, focus)
        return verdict, fact
    return _truthy(node, ctx, focus)


def shown(node: ast.Expr, ctx: ConditionContext, focus: Focus) -> Shown:
    """``node`` as a value, and how a reason shows that value."""
    handler = _SHOW.get(type(node))
    if handler is not None:
        value, display = handler(node, ctx, focus)
        return value, display
    if type(node) not in _WHY:
        expected = "a node from plangate.conditions.ast"
        raise TypeError(f"cannot explain a {type(node).__name__}: expected {expected}")
    verdict = why(node, ctx, focus)[0]
    return verdict, "true" if verdict else "false"


# -- values --------------------------------------------------------------------------------------------------


def _literal(node: ast.Literal, ctx: ConditionContext, focus: Focus) -> Shown:
    return node.value, ast.format_scalar(node.value)


def _field(node: ast.StepField, ctx: ConditionContext, focus: Focus) -> Shown:
    step = focus_step(ctx, focus) if node.step is None else named_step(ctx, node.step)
    value = field_value(step, node.field, node.path)
    return value, show(value)


def _receipt(node: ast.ReceiptField, ctx: ConditionContext, focus: Focus) -> Shown:
    value = receipt_value(focus_receipt(focus), node.field, node.path)
    return value, show(value)


def _var(node: ast.VarRef, ctx: ConditionContext, focus: Focus) -> Shown:
    value = ctx.vars.get(node.name, MISSING)
    return value, show(value)


def _env(node: ast.EnvRef, ctx: ConditionContext, focus: Focus) -> Shown:
    # The display is a placeholder so that no wording can print the value, even by mistake.
    return env_lookup(ctx, node.name), "(hidden)"


def _status_count(node: ast.StatusCount, ctx: ConditionContext, focus: Focus) -> Shown:
    value = count_status(ctx, node.status)
    return value, show(value)


def _count(node: ast.Aggregate, ctx: ConditionContext, focus: Focus) -> Shown:
    found = members(ctx, focus, node.scope, node.step)
    if not found:
        return 0, f"0 (no {'children' if node.scope in ('children', 'descendants') else node.scope})"
    total = sum(1 for member in found if why(node.predicate, ctx, member)[0])
    return total, f"{total} of {len(found)}"


def _aggregate_value(node: ast.Aggregate, ctx: ConditionContext, focus: Focus) -> Shown:
    if node.kind == "count":
        return _count(node, ctx, focus)
    verdict = _aggregate(node, ctx, focus)[0]
    return verdict, "true" if verdict else "false"


def _truthy(node: ast.Expr, ctx: ConditionContext, focus: Focus) -> Fact:
    value, display = shown(node, ctx, focus)
    verdict = bool(value)
    if isinstance(node, ast.EnvRef):
        state = "is not set" if value is None else "is set" if verdict else "is set but empty"
        return verdict, f"env.{node.name} {state}"
    if isinstance(node, ast.Literal):
        return verdict, f"the constant {display} is {'truthy' if verdict else 'falsy'}"
    return verdict, f"{redacted_source(node)} is {display}"


# -- logic ---------------------------------------------------------------------------------------------------


def _not(node: ast.Not, ctx: ConditionContext, focus: Focus) -> Fact:
    # The fact that made the operand true is the fact that makes ``not`` false, and the other way round.
    verdict, fact = why(node.operand, ctx, focus)
    return not verdict, fact


def _and(node: ast.And, ctx: ConditionContext, focus: Focus) -> Fact:
    facts = []
    for operand in node.operands:
        verdict, fact = why(operand, ctx, focus)
        if not verdict:
            return False, fact
        facts.append(fact)
    return True, " and ".join(facts)


def _or(node: ast.Or, ctx: ConditionContext, focus: Focus) -> Fact:
    facts = []
    for operand in node.operands:
        verdict, fact = why(operand, ctx, focus)
        if verdict:
            return True, fact
        facts.append(fact)
    return False, "; ".join(facts)


def _file(node: ast.FileExists, ctx: ConditionContext, focus: Focus) -> Fact:
    return file_exists(node.path, ctx.vars, ctx.root)


def _aggregate(node: ast.Aggregate, ctx: ConditionContext, focus: Focus) -> Fact:
    if node.kind == "count":
        return _truthy(node, ctx, focus)
    found = members(ctx, focus, node.scope, node.step)
    if not found:
        return False, _empty(node, ctx, focus)
    noun, plural = _NOUNS[node.scope]
    owner = "" if node.scope in ("steps", "receipts") else f" of '{_parent_id(node, ctx, focus)}'"
    predicate = redacted_source(node.predicate)
    for number, member in enumerate(found, start=1):
        verdict, fact = why(node.predicate, ctx, member)
        if node.kind == "all" and not verdict:
            return False, f"{noun} {_label(member, number)}{owner} does not satisfy {predicate}: {fact}"
        if node.kind == "any" and verdict:
            return True, f"{noun} {_label(member, number)}{owner} satisfies {predicate}: {fact}"
    if len(found) == 1:
        # One member decided it: show why, as for a failing member of a larger set.
        verdict, fact = why(node.predicate, ctx, found[0])
        holds = "satisfies" if verdict else "does not satisfy"
        return verdict, f"the only {noun}{owner}, {_label(found[0], 1)}, {holds} {predicate}: {fact}"
    if node.kind == "all":
        return True, f"all {len(found)} {plural}{owner} satisfy {predicate}"
    return False, f"none of the {len(found)} {plural}{owner} satisfy {predicate}"


def _empty(node: ast.Aggregate, ctx: ConditionContext, focus: Focus) -> str:
    """Why an ``all`` or ``any`` over nothing is unsatisfied."""
    if node.scope == "steps":
        return "no steps: the context has none"
    if node.scope == "receipts":
        return "no receipts: the run has none yet"
    parent = focus_step(ctx, focus) if node.step is None else named_step(ctx, node.step)
    return f"no children: step '{parent.id}' has none"


def _label(member: Member, number: int) -> str:
    """How a reason names an element: a step by its id, a receipt by its place and what made it."""
    if isinstance(member, ReceiptState):
        return f"#{number} ({member.tool}, {member.source})"
    return f"'{member.id}'"


def _parent_id(node: ast.Aggregate, ctx: ConditionContext, focus: Focus) -> object:
    return (focus_step(ctx, focus) if node.step is None else named_step(ctx, node.step)).id


# -- comparison ----------------------------------------------------------------------------------------------


def _compare(node: ast.Compare, ctx: ConditionContext, focus: Focus) -> Fact:
    left, op, right = oriented(node)
    try:
        left_value, left_shown = shown(left, ctx, focus)
        right_value, right_shown = shown(right, ctx, focus)
        verdict = compare(op, left_value, right_value)
    except Unsatisfied:
        raise
    except Exception as exc:
        raise Unsatisfied(f"could not evaluate {redacted_source(node)} ({type(exc).__name__})") from None
    sides = _Sides(node, left, op, right, left_value, left_shown, right_value, right_shown)
    return verdict, sides.fact(verdict)


class _Sides:
    """Both sides of one comparison, evaluated, and how to say the outcome."""

    __slots__ = ("left", "lshown", "lvalue", "node", "op", "right", "rshown", "rvalue")

    def __init__(
        self,
        node: ast.Compare,
        left: ast.Expr,
        op: str,
        right: ast.Expr,
        lvalue: object,
        lshown: str,
        rvalue: object,
        rshown: str,
    ) -> None:
        self.node, self.left, self.op, self.right = node, left, op, right
        self.lvalue, self.lshown, self.rvalue, self.rshown = lvalue, lshown, rvalue, rshown

    def fact(self, verdict: bool) -> str:
        if isinstance(self.left, ast.EnvRef):
            return _secret(verdict, self.op, self.left, self.lvalue, self.right, self.rvalue)
        if isinstance(self.right, ast.EnvRef):
            return _secret(verdict, FLIPPED[self.op], self.right, self.rvalue, self.left, self.lvalue)
        op = self.op
        if op not in ("==", "!=") and not verdict:
            problem = self._unordered()
            if problem:
                return problem
        if isinstance(self.left, ast.Literal):  # both sides are constants
            return f"{redacted_source(self.node)} is {'true' if verdict else 'false'}"
        subject = f"{_named(self.left)} is {self.lshown}"
        constant = isinstance(self.right, ast.Literal)
        other = self.rshown if constant else f"{_named(self.right)} ({self.rshown})"
        if op in ("==", "!="):
            if verdict == (op == "=="):  # equal
                return subject if constant else f"{subject}, equal to {other}"
            return f"{subject}, not {other}"
        if verdict:
            return f"{subject} ({op} {other})" if constant else f"{subject}, {op} {other}"
        return f"{subject}, not {op} {other}"

    def _unordered(self) -> str:
        """Why an ordering cannot hold at all, or ``""`` when it simply does not hold."""
        lkind, rkind = kind_of(self.lvalue), kind_of(self.rvalue)
        constants = isinstance(self.left, ast.Literal) and isinstance(self.right, ast.Literal)
        where = "" if constants else f" in {redacted_source(self.node)}"
        if lkind == "boolean" or rkind == "boolean":
            pair = f"{self.lshown} {self.op} {self.rshown}"
            return f"booleans can only be compared with == or !=: {pair}{where}"
        if lkind == "null" or rkind == "null" or lkind == rkind:
            return ""  # a missing value, or two numbers / strings: the plain wording says it
        return f"type mismatch: {self.lshown} ({lkind}) {self.op} {self.rshown} ({rkind}){where}"


def _secret(
    verdict: bool, op: str, env: ast.EnvRef, env_value: object, other: ast.Expr, other_value: object
) -> str:
    """``env.NAME OP other`` (turned so the variable is on the left), explained without a value."""
    # Whether the variable is set and the outcome; never a value, not even the other side's.
    name = f"env.{env.name}"
    if env_value is None:
        return f"{name} is not set"
    target = "the expected value" if isinstance(other, ast.Literal) else _named(other)
    if op in ("==", "!="):
        equal = verdict == (op == "==")
        return f"{name} is set and {'equals' if equal else 'does not equal'} {target}"
    env_kind, other_kind = kind_of(env_value), kind_of(other_value)
    if env_kind != other_kind:
        return f"type mismatch: {name} ({env_kind}) {op} {target} ({other_kind})"
    return f"{name} is set and is {'' if verdict else 'not '}{op} {target}"


def _named(node: ast.Expr) -> str:
    """How a reason names a side of a comparison: its source, in parentheses when it is itself a condition."""
    text = redacted_source(node)
    return f"({text})" if isinstance(node, ast.Compare | ast.Not | ast.And | ast.Or) else text


_WHY: dict[type[ast.Node], Callable[[Any, ConditionContext, Focus], Fact]] = {
    ast.Compare: _compare,
    ast.Not: _not,
    ast.And: _and,
    ast.Or: _or,
    ast.Aggregate: _aggregate,
    ast.FileExists: _file,
}
_SHOW: dict[type[ast.Node], Callable[[Any, ConditionContext, Focus], Shown]] = {
    ast.Literal: _literal,
    ast.StepField: _field,
    ast.ReceiptField: _receipt,
    ast.VarRef: _var,
    ast.EnvRef: _env,
    ast.StatusCount: _status_count,
    ast.Aggregate: _aggregate_value,
}

__all__ = ["explain", "shown", "why"]
