"""``done_when`` conditions over a run's receipts: what is one, what is refused (exactly), what it names."""

from __future__ import annotations

import doctest

import pytest

import plangate.conditions.evidence
from plangate.conditions import (
    ConditionContext,
    ConditionSyntaxError,
    ReceiptState,
    compile_done_when,
    done_when_condition,
    named_tools,
)


def test_a_done_when_over_receipts_compiles_and_decides_on_the_receipts() -> None:
    done = compile_done_when("receipts.any(tool == 'place' and success)")
    failed = ReceiptState("place", False, None, "write_receipt", {"placed": False})
    read = ReceiptState("get_overview", True, None, "tool_observation", "3 free slots")
    assert not done.evaluate(ConditionContext(receipts=[read, failed])).satisfied
    placed = ReceiptState("place", True, None, "write_receipt", {"placed": True})
    assert done.evaluate(ConditionContext(receipts=[read, failed, placed])).satisfied


# (expression, position, message): a done_when the agent runtime cannot decide is refused, with its column.
REFUSED: list[tuple[str, int, str]] = [
    (
        "build.status == 'complete'",
        0,
        "a done_when condition reads the run's receipts only; found 'build.status' at column 1 (an agent "
        "run has no steps to read)",
    ),
    (
        "receipts.any(success) and steps.failed == 0",
        26,
        "a done_when condition reads the run's receipts only; found 'steps.failed' at column 27 (an agent "
        "run has no steps to read)",
    ),
    (
        "receipts.any(steps.any(status == 'x'))",
        13,
        "a done_when condition reads the run's receipts only; found \"steps.any(status == 'x')\" at column "
        "14 (an agent run has no steps to read)",
    ),
    (
        "true",
        0,
        "a done_when condition ranges over the run's receipts: expected receipts.any(...), "
        "receipts.all(...) or receipts.count(...)",
    ),
    (
        "receipts.any(source == 'write_reciept')",
        23,
        "unknown receipt source 'write_reciept' at column 24; expected 'tool_observation', 'write_receipt', "
        "'user_reply'",
    ),
    (
        "receipts.any(tol == 'place')",
        13,
        "unknown receipt field 'tol' at column 14; expected tool, success, step, source or output (did you "
        "mean 'tool'?)",
    ),
]


@pytest.mark.parametrize(("expression", "position", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_done_when_that_the_runtime_cannot_decide_is_refused(
    expression: str, position: int, message: str
) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        compile_done_when(expression)
    assert (caught.value.position, caught.value.message) == (position, message)
    assert caught.value.render().splitlines()[1] == " " * position + "^"


def test_a_plan_steps_done_when_is_a_condition_only_when_it_reads_as_one() -> None:
    assert done_when_condition("receipts.count(tool == 'lookup') >= 2") is not None
    for words in ("the review is placed", "receipts are in", "receipts.any(tol == 'x')", "build.status"):
        assert done_when_condition(words) is None


def test_the_tools_a_condition_names_are_listed_once_in_order() -> None:
    done = compile_done_when(
        "receipts.any(tool == 'place') and receipts.count('lookup' == tool) > 1 "
        "or receipts.any(tool != 'place')"
    )
    assert named_tools(done) == ("place", "lookup")


def test_the_module_example_runs() -> None:
    outcome = doctest.testmod(plangate.conditions.evidence, raise_on_error=False)
    assert (outcome.attempted, outcome.failed) == (4, 0)
