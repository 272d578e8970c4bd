"""The parser: precedence, the shape of the tree, and exact errors (message and position) for bad input."""

from __future__ import annotations

import pickle

import pytest

from plangate.conditions import ConditionSyntaxError, compile_condition, parse
from plangate.conditions import ast as A
from plangate.errors import UserError


def _status(step: str, value: str) -> A.Compare:
    return A.Compare("==", A.StepField(step, "status"), A.Literal(value))


def test_and_binds_tighter_than_or() -> None:
    a, b, c = _status("a", "x"), _status("b", "y"), _status("c", "z")
    assert parse("a.status == 'x' and b.status == 'y' or c.status == 'z'") == A.Or((A.And((a, b)), c))
    assert parse("a.status == 'x' or b.status == 'y' and c.status == 'z'") == A.Or((a, A.And((b, c))))
    assert parse("a.status == 'x' and (b.status == 'y' or c.status == 'z')") == A.And((a, A.Or((b, c))))


def test_not_binds_tighter_than_and_but_looser_than_a_comparison() -> None:
    a, b = _status("a", "x"), _status("b", "y")
    assert parse("not a.status == 'x' and b.status == 'y'") == A.And((A.Not(a), b))
    assert parse("!a.status == 'x'") == A.Not(a)


def test_chains_of_one_operator_are_one_node() -> None:
    tree = parse("a.status == 'x' and b.status == 'y' && c.status == 'z'")
    assert isinstance(tree, A.And)
    assert len(tree.operands) == 3


def test_count_keeps_its_predicate_and_its_threshold_apart() -> None:
    tree = parse("children(tests).count(status == 'complete') >= 2")
    assert tree == A.Compare(
        ">=",
        A.Aggregate(
            "count", "children", "tests", A.Compare("==", A.StepField(None, "status"), A.Literal("complete"))
        ),
        A.Literal(2),
    )


def test_names_resolve_to_what_they_mean() -> None:
    assert parse("run-tests.status") == A.StepField("run-tests", "status")
    assert parse("step.output.a.b") == A.StepField(None, "output", ("a", "b"))
    assert parse("output.a") == A.StepField(None, "output", ("a",))
    assert parse("vars.environment") == A.VarRef("environment")
    assert parse("env.CI") == A.EnvRef("CI")
    assert parse("steps.complete") == A.StatusCount("complete")
    assert parse("file.exists('x')") == A.FileExists("x")
    assert parse("children(step).any(true)") == A.Aggregate("any", "children", None, A.Literal(True))


def test_inside_a_receipts_predicate_bare_names_are_the_receipts_fields() -> None:
    tool = A.Compare("==", A.ReceiptField("tool"), A.Literal("place"))
    assert parse("receipts.any(tool == 'place')") == A.Aggregate("any", "receipts", None, tool)
    assert parse("receipts.all(output.a.b)") == A.Aggregate(
        "all", "receipts", None, A.ReceiptField("output", ("a", "b"))
    )
    # ``step`` is the receipt's plan step there, and a step's own fields come back inside a nested set.
    assert parse("receipts.any(step == 1)") == A.Aggregate(
        "any", "receipts", None, A.Compare("==", A.ReceiptField("step"), A.Literal(1))
    )
    assert parse("receipts.any(steps.all(step.status == 'x'))").predicate == A.Aggregate(  # type: ignore[union-attr]
        "all", "steps", None, A.Compare("==", A.StepField(None, "status"), A.Literal("x"))
    )
    assert compile_condition("receipts.any(tool == 'x') and build.status == 'y'").references == ("build",)


def test_nodes_know_where_they_start_without_it_being_part_of_their_identity() -> None:
    tree = parse("  a.status ==   'x'")
    assert isinstance(tree, A.Compare)
    assert (tree.position, tree.left.position, tree.right.position) == (2, 2, 16)
    assert tree == parse("a.status=='x'")


def test_references_name_each_step_once_in_order() -> None:
    condition = compile_condition(
        "b.status == 'x' and children(a).all(c.output.ok) or b.output.n > 1 and status == 'y'"
    )
    assert condition.references == ("b", "a", "c")


# Exact errors: (expression, position, message). Columns in messages count from 1.
ERRORS: list[tuple[str, int, str]] = [
    ("", 0, "expected an expression at column 1, found end of input"),
    ("   ", 3, "expected an expression at column 4, found end of input"),
    ("build.status ==", 15, "expected a value after '==' at column 16, found end of input"),
    ("build.status == 'complete' and", 30, "expected a value after 'and' at column 31, found end of input"),
    (
        "build.status = 'complete'",
        13,
        "expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '=' (use '==' to compare)",
    ),
    (
        "build.status === 'complete'",
        13,
        "expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '==='"
        " (use '==' to compare)",
    ),
    (
        "build.status <> 'complete'",
        13,
        "expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '<>' (use '!=')",
    ),
    (
        "build.status !== 'complete'",
        13,
        "expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '!==' (use '!=')",
    ),
    (
        "a.output.n => 3",
        11,
        "expected a comparison operator (==, !=, <, <=, >, >=) at column 12, found '=>' (use '>=')",
    ),
    ("a.status == 'x' & b.status == 'y'", 16, "expected '&&' or 'and' at column 17, found '&'"),
    ("a.status == 'x' | b.status == 'y'", 16, "expected '||' or 'or' at column 17, found '|'"),
    ("a.status == 'x' foo", 16, "unexpected 'foo' after the expression at column 17"),
    ("a.status == 'x' b.status == 'y'", 16, "unexpected 'b.status' after the expression at column 17"),
    ("a.status == 'x' == 'y'", 16, "unexpected '==' after the expression at column 17"),
    (
        "(a.status == 'x'",
        16,
        "expected ')' at column 17, found end of input (the '(' at column 1 is not closed)",
    ),
    ("a.status == 'x')", 15, "unexpected ')' after the expression at column 16"),
    ("()", 1, "expected a value after '(' at column 2, found ')'"),
    ("build", 5, "expected '.' and 'status', 'id' or 'output' after 'build' at column 6, found end of input"),
    ("build.", 6, "expected 'status', 'id' or 'output' after 'build.' at column 7, found end of input"),
    ("build.foo", 6, "expected 'status', 'id' or 'output' after 'build.' at column 7, found 'foo'"),
    ("build.status.x", 12, "expected an operator after 'build.status' at column 13, found '.x'"),
    ("build . status . x", 15, "expected an operator after 'build.status' at column 16, found '.x'"),
    ("build . output . a . 1", 21, "expected an output key after 'a.' at column 22, found '1'"),
    ("build.output.", 13, "expected an output key after 'output.' at column 14, found end of input"),
    ("build.output.1", 13, "expected an output key after 'output.' at column 14, found '1'"),
    (".status", 0, "expected an expression at column 1, found '.'"),
    (
        "a.status == 'unterminated",
        25,
        "expected a closing ' at column 26, found end of input (the string at column 13 is not closed)",
    ),
    (
        'a.status == "unterminated',
        25,
        'expected a closing " at column 26, found end of input (the string at column 13 is not closed)',
    ),
    (
        "a.status == 'bad \\q escape'",
        17,
        "expected an escape (\\\\, \\', \\\", \\n, \\t, \\r, \\0 or \\uXXXX) at column 18, found '\\q'",
    ),
    (
        "a.status == 'bad \\u12 escape'",
        17,
        "expected an escape (\\\\, \\', \\\", \\n, \\t, \\r, \\0 or \\uXXXX) at column 18, found '\\u12'",
    ),
    ("1e", 0, "expected a number at column 1, found '1e'"),
    ("1.2.3", 0, "expected a number at column 1, found '1.2.3'"),
    ("3x == 3", 0, "expected a number at column 1, found '3x'"),
    ("a.output.n > 1.", 13, "expected a number at column 14, found '1.'"),
    ("a.output.n + 1", 11, "expected a name, a value, an operator or a parenthesis at column 12, found '+'"),
    (
        "a.output.n > --1",
        13,
        "expected a name, a value, an operator or a parenthesis at column 14, found '-'",
    ),
    ("a.status == @", 12, "expected a name, a value, an operator or a parenthesis at column 13, found '@'"),
    ("a[0] == 1", 1, "expected a name, a value, an operator or a parenthesis at column 2, found '['"),
    (
        "steps",
        5,
        "expected '.' and all, any, count or a step status (pending, ready, running, waiting, complete,"
        " failed, skipped, cancelled) after 'steps' at column 6, found end of input",
    ),
    (
        "steps.foo",
        6,
        "expected all, any, count or a step status (pending, ready, running, waiting, complete, failed,"
        " skipped, cancelled) after 'steps.' at column 7, found 'foo'",
    ),
    ("steps.all", 9, "expected '(' after 'all' at column 10, found end of input"),
    ("steps.count()", 12, "expected a value after '(' at column 13, found ')'"),
    ("children", 8, "expected '(' after 'children' at column 9, found end of input"),
    ("children()", 9, "expected a step id after 'children(' at column 10, found ')'"),
    ("children('tests')", 9, "expected a step id after 'children(' at column 10, found \"'tests'\""),
    ("children(tests", 14, "expected ')' after 'children(tests' at column 15, found end of input"),
    (
        "children(tests)",
        15,
        "expected '.all(', '.any(' or '.count(' after 'children(tests)' at column 16, found end of input",
    ),
    (
        "children(tests).size(x)",
        16,
        "expected all, any or count after 'children(tests).' at column 17, found 'size'",
    ),
    (
        "children(tests).all(status == 'x'",
        33,
        "expected ')' at column 34, found end of input (the 'all(' at column 20 is not closed)",
    ),
    ("file.exists(x)", 12, "expected a quoted path after 'file.exists(' at column 13, found 'x'"),
    ("file.exists('x'", 15, "expected ')' after the path of file.exists at column 16, found end of input"),
    ("file.read('x')", 5, "expected 'exists' after 'file.' at column 6, found 'read'"),
    ("vars", 4, "expected '.' and a variable name after 'vars' at column 5, found end of input"),
    ("vars.a.b", 6, "expected an operator after 'vars.a' at column 7, found '.b'"),
    ("env.'CI'", 4, "expected an environment variable name after 'env.' at column 5, found \"'CI'\""),
    ("step.x", 5, "expected 'status', 'id' or 'output' after 'step.' at column 6, found 'x'"),
    ("not", 3, "expected a value after 'not' at column 4, found end of input"),
    ("!", 1, "expected a value after '!' at column 2, found end of input"),
    ("a.status == 'x' or or b.status == 'y'", 19, "expected a value after 'or' at column 20, found 'or'"),
    ("and a.status == 'x'", 0, "expected an expression at column 1, found 'and'"),
    ("status.output", 6, "expected an operator after 'status' at column 7, found '.output'"),
    ("children.x(a)", 8, "expected '(' after 'children' at column 9, found '.x'"),
    ("children(a.b).all(true)", 9, "expected a step id after 'children(' at column 10, found 'a.b'"),
    ("true false", 5, "unexpected 'false' after the expression at column 6"),
    ("receipts", 8, "expected '.' and all, any or count after 'receipts' at column 9, found end of input"),
    ("receipts.first(tool)", 9, "expected all, any or count after 'receipts.' at column 10, found 'first'"),
    ("receipts.any", 12, "expected '(' after 'any' at column 13, found end of input"),
    ("receipts.any(success).x", 21, "unexpected '.' after the expression at column 22"),
    (
        "receipts.any(tol == 'place')",
        13,
        "unknown receipt field 'tol' at column 14; expected tool, success, step, source or output (did you "
        "mean 'tool'?)",
    ),
    (
        "receipts.any(status == 'done')",
        13,
        "unknown receipt field 'status' at column 14; expected tool, success, step, source or output (a "
        "receipt says how its call went in 'success')",
    ),
    ("receipts.any(tool.name == 'x')", 17, "expected an operator after 'tool' at column 18, found '.name'"),
    ("receipts.any(output.)", 20, "expected an output key after 'output.' at column 21, found ')'"),
    (
        "receipts.any(children(step).any(true))",
        22,
        "expected a step id after 'children(' at column 23, found 'step' (inside a receipts predicate the "
        "element in focus is a receipt, not a step)",
    ),
    (
        "tool == 'place'",
        5,
        "expected '.' and 'status', 'id' or 'output' after 'tool' at column 6, found '==' (receipt fields "
        "are read inside receipts.any(...), receipts.all(...) or receipts.count(...))",
    ),
    (
        "receipts.any(success",
        20,
        "expected ')' at column 21, found end of input (the 'any(' at column 13 is not closed)",
    ),
]


def test_there_are_many_error_cases() -> None:
    assert len(ERRORS) >= 40


@pytest.mark.parametrize(
    ("expression", "position", "message"), ERRORS, ids=[e[0] or "<empty>" for e in ERRORS]
)
def test_exact_error(expression: str, position: int, message: str) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        compile_condition(expression)
    error = caught.value
    assert (error.position, error.message, str(error)) == (position, message, message)
    assert error.expression == expression
    assert isinstance(error, UserError)


def test_a_syntax_error_is_data() -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        compile_condition("build.status == ")
    error = caught.value
    assert (error.expected, error.found, error.position) == ("a value after '=='", "end of input", 16)
    assert error.render() == (
        "build.status == \n                ^\nexpected a value after '==' at column 17, found end of input"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.position, copy.expected, copy.found) == (
        error.message,
        error.position,
        error.expected,
        error.found,
    )


def test_render_keeps_the_caret_aligned_in_long_and_multi_line_expressions() -> None:
    expression = "a.status == 'x' and\n" + " and ".join(["b.status == 'y'"] * 20) + " and ?"
    with pytest.raises(ConditionSyntaxError) as caught:
        compile_condition(expression)
    shown, caret, message = caught.value.render().splitlines()
    assert shown.startswith("...") and "\n" not in shown
    assert shown[caret.index("^")] == "?"
    assert message.endswith("found '?'")
