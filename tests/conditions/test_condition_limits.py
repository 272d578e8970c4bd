"""Resource limits: length, nesting depth and node count end in ConditionSyntaxError, never RecursionError."""

from __future__ import annotations

import pytest

from plangate.conditions import (
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NODES,
    ConditionContext,
    ConditionSyntaxError,
    ReceiptState,
    StepState,
    compile_condition,
    evaluate,
)


def _error(expression: str) -> ConditionSyntaxError:
    with pytest.raises(ConditionSyntaxError) as caught:
        compile_condition(expression)
    return caught.value


def test_the_limits_are_the_documented_ones() -> None:
    assert (MAX_LENGTH, MAX_DEPTH, MAX_NODES) == (4096, 64, 1000)


def test_length() -> None:
    fits = "a.output.k == '" + "x" * (MAX_LENGTH - 16) + "'"
    assert len(fits) == MAX_LENGTH
    compile_condition(fits)
    error = _error(fits + " ")
    assert (error.position, error.message) == (
        4096,
        "expression is too long: 4097 characters, the limit is 4096",
    )


def test_nesting_of_parentheses() -> None:
    compile_condition("(" * MAX_DEPTH + "true" + ")" * MAX_DEPTH)
    error = _error("(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1))
    assert (error.position, error.message) == (
        64,
        "expression is nested more than 64 levels deep at column 65",
    )


def test_nesting_of_not() -> None:
    compile_condition("not " * (MAX_DEPTH - 1) + "true")
    error = _error("not " * MAX_DEPTH + "true")
    assert error.message == "expression is nested more than 64 levels deep at column 1"


def test_tree_depth_counts_nodes_not_only_brackets() -> None:
    # Each level adds an ``or`` and an ``and`` node inside one pair of parentheses.
    expression = "true"
    for _ in range(40):
        expression = f"(true or true and {expression})"
    error = _error(expression)
    assert "nested more than 64 levels deep" in error.message


def test_thousands_of_levels_never_reach_python_recursion() -> None:
    for expression in ("(" * 2000 + "true" + ")" * 2000, "!" * 4000 + "true", "not " * 1000 + "true"):
        assert "nested more than 64 levels deep" in _error(expression).message


def test_node_count() -> None:
    compile_condition("||".join(["1"] * 999))  # 999 literals and one ``or``
    error = _error("||".join(["1"] * 1000))
    assert (error.position, error.message) == (0, "expression is too large: more than 1000 nodes at column 1")
    # Three nodes for the comparison, so the 998th literal (at 21 + 997 * 3) is node 1001.
    error = _error("a.status == 'x' and (" + "||".join(["1"] * 1000) + ")")
    assert (error.position, error.message) == (
        3012,
        "expression is too large: more than 1000 nodes at column 3013",
    )


def test_long_output_paths_are_bounded() -> None:
    compile_condition("a.output." + ".".join(["k"] * MAX_DEPTH))
    assert (
        "nested more than 64 levels deep" in _error("a.output." + ".".join(["k"] * (MAX_DEPTH + 1))).message
    )


def test_receipt_predicates_count_towards_the_limits() -> None:
    compile_condition("receipts.any(" * (MAX_DEPTH - 1) + "success" + ")" * (MAX_DEPTH - 1))
    assert (
        "nested more than 64 levels deep"
        in _error("receipts.any(" * MAX_DEPTH + "success" + ")" * MAX_DEPTH).message
    )
    compile_condition("receipts.any(output." + ".".join(["k"] * MAX_DEPTH) + ")")
    deep = _error("receipts.any(output." + ".".join(["k"] * (MAX_DEPTH + 1)) + ")")
    assert "nested more than 64 levels deep" in deep.message
    assert "more than 1000 nodes" in _error("receipts.any(" + "||".join(["1"] * 1000) + ")").message


def test_many_receipts_evaluate_with_a_bounded_reason() -> None:
    receipts = [ReceiptState("read", True, None, "tool_observation", {"n": n}) for n in range(10_000)]
    result = evaluate("receipts.count(output.n >= 0) == 10000", ConditionContext(receipts=receipts))
    assert (result.satisfied, result.reason) == (True, "receipts.count(output.n >= 0) is 10000 of 10000")


def test_deep_data_does_not_break_evaluation() -> None:
    deep: dict[str, object] = {}
    cursor = deep
    for _ in range(5000):
        cursor["k"] = {}
        cursor = cursor["k"]  # type: ignore[assignment]
    nested: list[object] = []
    for _ in range(5000):
        nested = [nested]
    ctx = ConditionContext({"a": StepState("a", "complete", {"deep": deep, "list": nested})})
    for expression in ("a.output.deep == a.output.deep", "a.output.list == a.output.list", "a.output.deep"):
        result = evaluate(expression, ctx)
        assert isinstance(result.reason, str) and result.reason
