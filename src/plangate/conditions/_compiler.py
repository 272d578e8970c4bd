"""The compiler: a syntax tree in, one closure ``(ctx, focus) -> bool`` out, by dispatch on node type.

Every node can be compiled two ways: as a test (comparisons and logic as such, any other value by its
truthiness) and as a value (a condition's value is its verdict). The closures only compute verdicts; they
raise ``Unsatisfied`` for an unknown step or a refused path and never build text. Reasons are ``_explain``'s
job, done from the tree when someone reads one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plangate.conditions import _operands as operands
from plangate.conditions import ast
from plangate.conditions._runtime import FLIPPED, Focus, Getter, Test, compare, literal_test
from plangate.conditions.context import ConditionContext


def compile_test(node: ast.Node) -> Test:
    """``node`` as a condition.

    Raises:
        TypeError: ``node`` is not one of the node types of ``plangate.conditions.ast``.
    """
    handler = _TESTS.get(type(node))
    if handler is not None:
        return handler(node)
    get = compile_value(node)
    return lambda ctx, focus: bool(get(ctx, focus))


def compile_value(node: ast.Node) -> Getter:
    """``node`` as a value.

    Raises:
        TypeError: ``node`` is not one of the node types of ``plangate.conditions.ast``.
    """
    handler = _VALUES.get(type(node))
    if handler is not None:
        return handler(node)
    if type(node) in _TESTS:
        return compile_test(node)
    expected = "a node from plangate.conditions.ast"
    raise TypeError(f"cannot compile a {type(node).__name__}: expected {expected}")


def oriented(node: ast.Compare) -> tuple[ast.Expr, str, ast.Expr]:
    """``left, op, right`` with a lone constant moved to the right: ``3 < x`` is read as ``x > 3``."""
    if isinstance(node.left, ast.Literal) and not isinstance(node.right, ast.Literal):
        return node.right, FLIPPED[node.op], node.left
    return node.left, node.op, node.right


def _compare(node: ast.Compare) -> Test:
    left, op, right = oriented(node)
    if isinstance(right, ast.Literal):
        if isinstance(left, ast.StepField):
            return operands.field_test(left, op, right.value)
        check = literal_test(op, right.value)
        get = compile_value(left)
        return lambda ctx, focus: check(get(ctx, focus))
    get_left, get_right = compile_value(left), compile_value(right)
    return lambda ctx, focus: compare(op, get_left(ctx, focus), get_right(ctx, focus))


def _not(node: ast.Not) -> Test:
    inner = compile_test(node.operand)
    return lambda ctx, focus: not inner(ctx, focus)


def _and(node: ast.And) -> Test:
    tests = tuple(compile_test(operand) for operand in node.operands)
    if len(tests) == 2:
        first, second = tests
        return lambda ctx, focus: first(ctx, focus) and second(ctx, focus)

    def every(ctx: ConditionContext, focus: Focus) -> bool:
        for test in tests:
            if not test(ctx, focus):
                return False
        return True

    return every


def _or(node: ast.Or) -> Test:
    tests = tuple(compile_test(operand) for operand in node.operands)
    if len(tests) == 2:
        first, second = tests
        return lambda ctx, focus: first(ctx, focus) or second(ctx, focus)

    def some(ctx: ConditionContext, focus: Focus) -> bool:
        for test in tests:
            if test(ctx, focus):
                return True
        return False

    return some


def _aggregate_test(node: ast.Aggregate) -> Test:
    holds = compile_test(node.predicate)
    if node.kind == "all":
        return operands.every(node, holds)
    if node.kind == "any":
        return operands.some(node, holds)
    get = operands.count(node, holds)
    return lambda ctx, focus: bool(get(ctx, focus))


def _aggregate_value(node: ast.Aggregate) -> Getter:
    if node.kind == "count":
        return operands.count(node, compile_test(node.predicate))
    return _aggregate_test(node)


# Handlers take their own node type; the tables are keyed by that type, so the lookup is the type check.
# A node type in neither table is an explicit error (see ``compile_value``).
_TESTS: dict[type[ast.Node], Callable[[Any], Test]] = {
    ast.Compare: _compare,
    ast.Not: _not,
    ast.And: _and,
    ast.Or: _or,
    ast.Aggregate: _aggregate_test,
    ast.FileExists: operands.file_check,
}
_VALUES: dict[type[ast.Node], Callable[[Any], Getter]] = {
    ast.Literal: operands.literal,
    ast.StepField: operands.step_field,
    ast.ReceiptField: operands.receipt_field,
    ast.VarRef: operands.var_ref,
    ast.EnvRef: operands.env_ref,
    ast.StatusCount: operands.status_count,
    ast.Aggregate: _aggregate_value,
}

__all__ = ["compile_test", "compile_value", "oriented"]
