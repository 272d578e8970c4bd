"""What expressions mean: typed values, output lookup, missing values, aggregates, unknown steps, reasons."""

from __future__ import annotations

import sys

import pytest
from condition_contexts import pipeline

from plangate.conditions import ConditionContext, StepState, compile_condition, evaluate
from plangate.conditions._runtime import MISSING, compare, literal_test, lookup


def _ctx(**outputs: object) -> ConditionContext:
    return ConditionContext({"s": StepState("s", "complete", dict(outputs))})


@pytest.mark.parametrize(
    ("expression", "satisfied"),
    [
        ("1 == 1.0", True),
        ("1e6 == 1000000", True),
        ("s.output.n == 1e6", True),
        ("s.output.f == 1", True),
        ("s.output.t == 1", False),
        ("s.output.t == true", True),
        ("s.output.one == true", False),
        ("s.output.t == 'True'", False),
        ("s.output.t == 'true'", False),
        ("s.output.text == 1", False),
        ("s.output.text != 1", True),
        ("s.output.n > 999999.5", True),
        ("s.output.text > 'm'", False),
        ("s.output.text < 'm'", True),
        ("s.output.t > false", False),
        ("s.output.t != false", True),
        ("s.output.list == s.output.list", True),
        ("s.output.one == s.output.t", False),
        ("s.output.obj == s.output.obj", True),
    ],
)
def test_values_are_typed(expression: str, satisfied: bool) -> None:
    ctx = _ctx(n=1_000_000, f=1.0, t=True, one=1, text="abc", list=[1, True], obj={"k": [1]})
    assert evaluate(expression, ctx).satisfied is satisfied


def test_booleans_cannot_be_ordered_and_the_reason_says_so() -> None:
    result = evaluate("true > false", ConditionContext())
    assert not result.satisfied
    assert result.reason == "booleans can only be compared with == or !=: true > false"


def test_ordering_across_kinds_is_unsatisfied_not_an_error() -> None:
    result = evaluate("'abc' > 3", ConditionContext())
    assert (result.satisfied, result.reason) == (False, "type mismatch: 'abc' (string) > 3 (number)")
    result = evaluate("s.output.v >= 3", _ctx(v="abc"))
    assert not result.satisfied
    assert result.reason == "type mismatch: 'abc' (string) >= 3 (number) in s.output.v >= 3"


def test_output_lookup_walks_nested_mappings_and_falls_back_to_flat_dotted_keys() -> None:
    ctx = _ctx(**{"errors.count": 0, "a": {"b": {"c": 5}, "x.y": 7}, "p": {"q": 1}, "p.q": 2})
    assert evaluate("s.output.errors.count == 0", ctx).satisfied
    assert evaluate("s.output.a.b.c == 5", ctx).satisfied
    assert evaluate("s.output.a.x.y == 7", ctx).satisfied  # flat key below a nested one
    assert evaluate("s.output.p.q == 1", ctx).satisfied  # the nested spelling wins when both exist
    assert lookup({"a": {"b": 1}}, ("a", "b", "c")) is MISSING
    assert lookup({1: "number key"}, ("1",)) is MISSING


def test_missing_values_are_null() -> None:
    ctx = _ctx(present=None)
    assert evaluate("s.output.absent == null", ctx).satisfied
    assert evaluate("s.output.present == null", ctx).satisfied
    assert not evaluate("s.output.absent != null", ctx).satisfied
    result = evaluate("s.output.absent > 1", ctx)
    assert (result.satisfied, result.reason) == (False, "s.output.absent is missing, not > 1")


@pytest.mark.parametrize(
    ("value", "satisfied"),
    [
        (True, True),
        (False, False),
        ("x", True),
        ("", False),
        (1, True),
        (0, False),
        (0.0, False),
        ([1], True),
        ([], False),
        ({"k": 1}, True),
        ({}, False),
        (None, False),
    ],
)
def test_a_bare_operand_is_truthy(value: object, satisfied: bool) -> None:
    assert evaluate("s.output.v", _ctx(v=value)).satisfied is satisfied
    assert evaluate("not s.output.v", _ctx(v=value)).satisfied is not satisfied


def test_counting_children_with_a_predicate_and_a_threshold() -> None:
    ctx = pipeline()
    assert evaluate("children(tests).count(status == 'complete') >= 2", ctx).satisfied
    assert evaluate("children(tests).count(status == 'complete') == 2", ctx).satisfied
    result = evaluate("children(tests).count(status == 'complete') >= 3", ctx)
    assert not result.satisfied
    assert result.reason == "children(tests).count(status == 'complete') is 2 of 3, not >= 3"
    # The predicate sees each element; the threshold is compared with the number of matches.
    assert evaluate("children(tests).count(status == 'running') == 1", ctx).satisfied
    assert evaluate("children(tests).count(output.duration > 100) == 1", ctx).satisfied


def test_empty_sets_neither_all_nor_any_and_count_zero() -> None:
    ctx = ConditionContext({"p": StepState("p", "running")})
    for expression in ("children(p).all(status == 'complete')", "children(p).any(status == 'complete')"):
        result = evaluate(expression, ctx)
        assert (result.satisfied, result.reason) == (False, "no children: step 'p' has none")
    result = evaluate("children(p).count(status == 'complete') == 0", ctx)
    assert (result.satisfied, result.reason) == (
        True,
        "children(p).count(status == 'complete') is 0 (no children)",
    )
    assert not evaluate("steps.all(true)", ConditionContext()).satisfied


def test_descendants_cover_every_level_once_even_with_a_shared_child() -> None:
    shared = StepState("shared", "complete")
    parent = StepState("parent", "running", {}, [StepState("a", "complete", {}, [shared]), shared])
    ctx = ConditionContext({"parent": parent})
    assert evaluate("descendants(parent).count(true) == 2", ctx).satisfied
    assert evaluate("children(parent).count(true) == 2", ctx).satisfied


def test_an_unknown_step_is_unsatisfied_even_under_not() -> None:
    ctx = pipeline()
    for expression in ("x.status == 'complete'", "not x.status == 'complete'", "x.status != 'complete'"):
        result = evaluate(expression, ctx)
        assert (result.satisfied, result.reason) == (False, "step 'x' not found")
    assert compile_condition("not x.status == 'complete'").references == ("x",)


def test_bare_fields_mean_the_current_step_and_inside_aggregates_the_element() -> None:
    ctx = pipeline()
    assert evaluate("status == 'ready' and step.id == 'deploy-staging'", ctx).satisfied
    assert evaluate("children(tests).any(id == 'tests-e2e' and status == 'running')", ctx).satisfied
    no_current = ConditionContext(ctx.steps)
    result = evaluate("status == 'ready'", no_current)
    assert (result.satisfied, result.reason) == (
        False,
        "there is no current step to read status, id or output from",
    )


def test_and_says_which_side_failed_with_actual_values() -> None:
    ctx = ConditionContext({"a": StepState("a", "complete"), "b": StepState("b", "complete", {"n": 2})})
    result = evaluate("a.status == 'complete' and b.output.n > 3", ctx)
    assert (result.satisfied, result.reason) == (False, "b.output.n is 2, not > 3")
    result = evaluate("a.status == 'complete' and b.output.n > 1", ctx)
    assert (result.satisfied, result.reason) == (True, "a.status is 'complete' and b.output.n is 2 (> 1)")


def test_or_says_why_every_side_failed_and_not_inverts() -> None:
    ctx = ConditionContext({"a": StepState("a", "running", {"n": 2})})
    result = evaluate("a.status == 'complete' or a.output.n > 3", ctx)
    assert (result.satisfied, result.reason) == (
        False,
        "a.status is 'running', not 'complete'; a.output.n is 2, not > 3",
    )
    result = evaluate("not (a.status == 'complete' or a.output.n > 3)", ctx)
    assert (result.satisfied, result.reason) == (
        True,
        "a.status is 'running', not 'complete'; a.output.n is 2, not > 3",
    )
    result = evaluate("not a.status == 'running'", ctx)
    assert (result.satisfied, result.reason) == (False, "a.status is 'running'")


VALUES: list[object] = [None, MISSING, True, False, 0, 1, 1.0, -2.5, "", "a", "1", [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_the_fast_literal_test_agrees_with_typed_compare(op: str) -> None:
    for literal in (None, True, False, 0, 1, 1.0, -2.5, "", "a", "1"):
        check = literal_test(op, literal)
        for value in VALUES:
            assert check(value) is compare(op, value, literal), (value, op, literal)


HUGE = 10**5000
BIG = "1.79769313486...e+308 (an integer of 309 digits)"


@pytest.mark.parametrize(
    ("expression", "satisfied", "reason"),
    [
        ("s.output.n > 1.5", True, "s.output.n is 1e+5000 (an integer of 5,001 digits) (> 1.5)"),
        ("s.output.n == 1.5", False, "s.output.n is 1e+5000 (an integer of 5,001 digits), not 1.5"),
        ("s.output.n < 1.5", False, "s.output.n is 1e+5000 (an integer of 5,001 digits), not < 1.5"),
        ("s.output.n > 1e308", True, "s.output.n is 1e+5000 (an integer of 5,001 digits) (> 1e+308)"),
        ("s.output.m < 1.5", True, "s.output.m is -1e+5000 (an integer of 5,001 digits) (< 1.5)"),
        ("s.output.k > 1e308", True, f"s.output.k is {BIG} (> 1e+308)"),
        ("s.output.k == s.output.f", False, f"s.output.k is {BIG}, not s.output.f (1.7976931348623157e+308)"),
    ],
)
def test_big_integers_compare_exactly_with_floats_and_say_so(
    expression: str, satisfied: bool, reason: str
) -> None:
    big = int(sys.float_info.max) + 1  # one more than the largest float: not equal to it, though close
    ctx = ConditionContext(
        {"s": StepState("s", "complete", {"n": HUGE, "m": -HUGE, "k": big, "f": sys.float_info.max})}
    )
    for result in (evaluate(expression, ctx), compile_condition(expression).evaluate(ctx)):
        assert (result.satisfied, result.reason) == (satisfied, reason)
