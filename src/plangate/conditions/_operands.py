"""Fast closures for the leaves and sets of the language: step and receipt fields, vars, env, literals, files,
aggregates.

Each builder returns a getter ``(ctx, focus) -> value`` or a test ``(ctx, focus) -> bool`` that reads the
context and nothing else. Step fields compared with a constant get one fused closure (lookup and comparison
together), because that shape is most of what gates test. Comparisons and logic are compiled in
``_compiler``; reasons are written by ``_explain``, which reads values through the same ``_runtime``
functions so both agree.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from plangate.conditions import ast
from plangate.conditions._files import file_exists
from plangate.conditions._runtime import (
    MISSING,
    Focus,
    Getter,
    Test,
    Unsatisfied,
    count_status,
    focus_receipt,
    focus_step,
    literal_test,
    lookup,
    members,
    receipt_value,
)
from plangate.conditions.context import ConditionContext, ReceiptState, StepState, env_lookup

Extract = Callable[[StepState], object]


def literal(node: ast.Literal) -> Getter:
    """A constant."""
    constant = node.value
    return lambda ctx, focus: constant


def step_field(node: ast.StepField) -> Getter:
    """``build.status``, ``tests.output.a.b``, ``step.id``, bare ``status`` / ``output.x``."""
    extract = _extractor(node.field, node.path)
    step_id = node.step
    if step_id is None:

        def focused(ctx: ConditionContext, focus: Focus) -> object:
            return extract(focus if type(focus) is StepState else focus_step(ctx, focus))

        return focused
    missing = f"step '{step_id}' not found"

    def named(ctx: ConditionContext, focus: Focus) -> object:
        step = ctx.steps.get(step_id)
        if step is None:
            raise Unsatisfied(missing)
        return extract(step)

    return named


def _extractor(field: ast.StepFieldName, path: tuple[str, ...]) -> Extract:
    # Same results as ``_runtime.field_value``, with the common shapes taken out of the general function.
    if field != "output":
        return operator.attrgetter(field)
    if not path:
        return lambda step: MISSING if step.output is None else step.output
    if len(path) == 1:
        key = path[0]

        def one_key(step: StepState) -> object:
            output = step.output
            if output.__class__ is dict:
                return output.get(key, MISSING)
            return lookup(output, path)

        return one_key
    return lambda step: lookup(step.output, path)


def field_test(node: ast.StepField, op: str, constant: object) -> Test:
    """``node OP constant`` as one closure."""
    step_id = node.step
    if node.field != "output" and isinstance(constant, str) and op in ("==", "!="):
        # Status and id are nearly always compared with a string: inline that comparison as well.
        read: Extract = operator.attrgetter(node.field)
        equal = op == "=="
        if step_id is None:
            return lambda ctx, focus: (
                (read(focus if type(focus) is StepState else focus_step(ctx, focus)) == constant) is equal
            )
        missing = f"step '{step_id}' not found"

        def named_string(ctx: ConditionContext, focus: Focus) -> bool:
            step = ctx.steps.get(step_id)
            if step is None:
                raise Unsatisfied(missing)
            return (read(step) == constant) is equal

        return named_string
    check = literal_test(op, constant)
    if node.field == "output" and len(node.path) == 1:
        return _output_key_test(step_id, node.path, check)
    extract = _extractor(node.field, node.path)
    if step_id is None:
        return lambda ctx, focus: check(
            extract(focus if type(focus) is StepState else focus_step(ctx, focus))
        )
    missing = f"step '{step_id}' not found"

    def named(ctx: ConditionContext, focus: Focus) -> bool:
        step = ctx.steps.get(step_id)
        if step is None:
            raise Unsatisfied(missing)
        return check(extract(step))

    return named


def _output_key_test(step_id: str | None, path: tuple[str, ...], check: Callable[[object], bool]) -> Test:
    # ``x.output.key OP constant`` and, in aggregate predicates, ``output.key OP constant``.
    key = path[0]
    if step_id is None:

        def focused_key(ctx: ConditionContext, focus: Focus) -> bool:
            output = (focus if type(focus) is StepState else focus_step(ctx, focus)).output
            return check(output.get(key, MISSING) if output.__class__ is dict else lookup(output, path))

        return focused_key
    missing = f"step '{step_id}' not found"

    def named_key(ctx: ConditionContext, focus: Focus) -> bool:
        step = ctx.steps.get(step_id)
        if step is None:
            raise Unsatisfied(missing)
        output = step.output
        return check(output.get(key, MISSING) if output.__class__ is dict else lookup(output, path))

    return named_key


def receipt_field(node: ast.ReceiptField) -> Getter:
    """``tool``, ``success``, ``step``, ``source``, ``output.a.b`` of the receipt in focus."""
    field, path = node.field, node.path
    if field != "output":
        read = operator.attrgetter(field)
        return lambda ctx, focus: read(focus if type(focus) is ReceiptState else focus_receipt(focus))
    return lambda ctx, focus: receipt_value(
        focus if type(focus) is ReceiptState else focus_receipt(focus), field, path
    )


def var_ref(node: ast.VarRef) -> Getter:
    """``vars.X``: missing when the variable is not set."""
    name = node.name
    return lambda ctx, focus: ctx.vars.get(name, MISSING)


def env_ref(node: ast.EnvRef) -> Getter:
    """``env.X``, read through the allow-list."""
    name = node.name
    return lambda ctx, focus: env_lookup(ctx, name)


def file_check(node: ast.FileExists) -> Test:
    """``file.exists('path')``."""
    template = node.path
    return lambda ctx, focus: file_exists(template, ctx.vars, ctx.root)[0]


def status_count(node: ast.StatusCount) -> Getter:
    """``steps.complete``."""
    status = node.status
    return lambda ctx, focus: count_status(ctx, status)


def count(node: ast.Aggregate, holds: Test) -> Getter:
    """``<set>.count(p)``: how many members satisfy ``holds``."""
    scope, step_id = node.scope, node.step

    def counted(ctx: ConditionContext, focus: Focus) -> object:
        total = 0
        for member in members(ctx, focus, scope, step_id):
            if holds(ctx, member):
                total += 1
        return total

    return counted


def every(node: ast.Aggregate, holds: Test) -> Test:
    """``<set>.all(p)``: false for an empty set, so a gate cannot open before its children exist."""
    scope, step_id = node.scope, node.step

    def test(ctx: ConditionContext, focus: Focus) -> bool:
        found = members(ctx, focus, scope, step_id)
        if not found:
            return False
        for member in found:
            if not holds(ctx, member):
                return False
        return True

    return test


def some(node: ast.Aggregate, holds: Test) -> Test:
    """``<set>.any(p)``."""
    scope, step_id = node.scope, node.step

    def test(ctx: ConditionContext, focus: Focus) -> bool:
        for member in members(ctx, focus, scope, step_id):
            if holds(ctx, member):
                return True
        return False

    return test


__all__ = [
    "count",
    "env_ref",
    "every",
    "field_test",
    "file_check",
    "literal",
    "receipt_field",
    "some",
    "status_count",
    "step_field",
    "var_ref",
]
