"""The public API: compiling and its cache, results and their lazily written reasons, robustness."""

from __future__ import annotations

import pytest

from plangate.conditions import (
    CACHE_SIZE,
    Condition,
    ConditionContext,
    ConditionResult,
    StepState,
    clear_cache,
    compile_condition,
    evaluate,
)
from plangate.conditions import ast as A
from plangate.conditions._compiler import compile_test


def _ctx(status: str = "complete") -> ConditionContext:
    return ConditionContext({"build": StepState("build", status, {"n": 2})})


def test_compile_condition_caches_by_text_and_condition_does_not() -> None:
    clear_cache()
    first = compile_condition("build.status == 'complete'")
    assert compile_condition("build.status == 'complete'") is first
    assert compile_condition("build.status ==  'complete'") is not first
    assert Condition("build.status == 'complete'") is not first
    clear_cache()
    assert compile_condition("build.status == 'complete'") is not first


def test_the_cache_is_bounded_and_keeps_the_recently_used() -> None:
    clear_cache()
    kept = compile_condition("build.output.n == 0")
    oldest = compile_condition("build.output.n == 1")
    for n in range(2, CACHE_SIZE + 1):
        compile_condition("build.output.n == 0")  # recently used, so it survives
        compile_condition(f"build.output.n == {n}")
    assert compile_condition("build.output.n == 0") is kept
    assert compile_condition("build.output.n == 1") is not oldest


def test_a_condition_exposes_its_text_tree_and_references() -> None:
    condition = compile_condition("build.status == 'complete' and children(tests).any(status == 'failed')")
    assert condition.expression == "build.status == 'complete' and children(tests).any(status == 'failed')"
    assert isinstance(condition.ast, A.And)
    assert condition.references == ("build", "tests")
    assert (
        repr(condition)
        == "Condition(\"build.status == 'complete' and children(tests).any(status == 'failed')\")"
    )


def test_only_strings_compile() -> None:
    for value in (None, 3, b"build.status == 'x'"):
        with pytest.raises(TypeError, match="a condition expression must be a str"):
            compile_condition(value)  # type: ignore[arg-type]


def test_evaluate_is_compile_then_evaluate() -> None:
    result = evaluate("build.output.n > 1", _ctx())
    assert result == ConditionResult(True, "build.output.n is 2 (> 1)")
    assert result == compile_condition("build.output.n > 1").evaluate(_ctx())


def test_a_result_is_a_verdict_and_a_reason() -> None:
    result = ConditionResult(False, "build.output.n is 2, not > 3")
    assert not result
    assert (result.satisfied, result.reason) == (False, "build.output.n is 2, not > 3")
    assert repr(result) == "ConditionResult(satisfied=False, reason='build.output.n is 2, not > 3')"
    assert result != ConditionResult(True, "build.output.n is 2, not > 3")
    assert result != ConditionResult(False, "another reason")
    assert hash(result) == hash(ConditionResult(False, "build.output.n is 2, not > 3"))
    assert result != (False, "build.output.n is 2, not > 3")


def test_the_reason_is_written_from_the_context_when_first_read_then_kept() -> None:
    steps = {"build": StepState("build", "running")}
    ctx = ConditionContext(steps)
    condition = compile_condition("build.status == 'complete'")

    kept = condition.evaluate(ctx)
    assert kept.reason == "build.status is 'running', not 'complete'"
    steps["build"] = StepState("build", "complete")
    assert kept.reason == "build.status is 'running', not 'complete'"  # written once, not re-read

    late = condition.evaluate(ConditionContext({"build": StepState("build", "running")}))
    changed = ConditionContext(steps)
    assert condition.evaluate(changed).satisfied
    moved = condition.evaluate(ctx)  # satisfied now; the context changes again before the reason is read
    steps["build"] = StepState("build", "failed")
    assert moved.satisfied
    assert moved.reason == (
        "build.status is 'failed', not 'complete' "
        "(the context changed after evaluation: this reason no longer matches the verdict)"
    )
    assert late.reason == "build.status is 'running', not 'complete'"


def test_explain_writes_the_reason_at_once_with_the_same_verdict() -> None:
    condition = compile_condition("build.output.n > 3")
    assert condition.explain(_ctx()) == ConditionResult(False, "build.output.n is 2, not > 3")
    assert condition.explain(_ctx()) == condition.evaluate(_ctx())


@pytest.mark.parametrize(
    "ctx",
    [
        None,
        "not a context",
        ConditionContext({"build": {"status": "complete"}}),  # type: ignore[dict-item]
        ConditionContext([StepState("build", "complete")]),  # type: ignore[arg-type]
        ConditionContext({"build": StepState("build", "complete", output=42)}),  # type: ignore[arg-type]
    ],
)
def test_evaluation_never_raises_whatever_the_context(ctx: object) -> None:
    for expression in (
        "build.status == 'complete'",
        "build.output.n > 1",
        "children(build).all(true)",
        "steps.complete > 0",
        "env.CI",
        "status == 'x'",
    ):
        result = compile_condition(expression).evaluate(ctx)  # type: ignore[arg-type]
        assert isinstance(result.satisfied, bool)
        assert result.reason


def test_a_broken_context_says_what_could_not_be_evaluated() -> None:
    ctx = ConditionContext({"build": {"status": "complete"}})  # type: ignore[dict-item]
    result = evaluate("build.status == 'complete'", ctx)
    assert (result.satisfied, result.reason) == (
        False,
        "could not evaluate build.status == 'complete' (AttributeError)",
    )
    result = evaluate("children(build).all(true)", None)  # type: ignore[arg-type]
    assert (result.satisfied, result.reason) == (False, "could not evaluate the condition (AttributeError)")


def test_compiling_a_foreign_node_is_an_explicit_error() -> None:
    class Strange(A.Node):
        pass

    with pytest.raises(TypeError) as caught:
        compile_test(Strange())
    assert str(caught.value) == "cannot compile a Strange: expected a node from plangate.conditions.ast"
    with pytest.raises(TypeError, match="to_source: expected a condition node, found Strange"):
        A.to_source(Strange())


def test_the_package_docstring_example_runs() -> None:
    import doctest

    import plangate.conditions

    outcome = doctest.testmod(plangate.conditions, raise_on_error=False)
    assert (outcome.attempted, outcome.failed) == (4, 0)


def test_nodes_are_frozen_and_compare_without_their_position() -> None:
    import dataclasses

    node = A.Compare("==", A.StepField("a", "status", position=0), A.Literal("x", position=12), position=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.op = "!="  # type: ignore[misc]
    moved = A.Compare("==", A.StepField("a", "status", position=3), A.Literal("x", position=20), position=3)
    assert node == moved and hash(node) == hash(moved)
    assert dataclasses.replace(node, op="!=") == A.Compare("!=", node.left, node.right)
    assert repr(A.Literal("x")) == "Literal(value='x')"
