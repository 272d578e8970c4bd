"""The copilot's decisions, rule by rule: next_step, fill_input, retry_after_review, the retry instructions,
and how attempts and turns are judged."""

from __future__ import annotations

import pytest

from plangate.copilot import policy
from plangate.copilot.policy import HistoryItem, Terminal
from plangate.copilot.results import Attempt, Review, Signal
from plangate.formulas import Issue
from plangate.formulas.loader import validate_formula

FORMULA = validate_formula({"formula": "f", "steps": [{"id": "a", "llm": {"prompt": "hi"}}]})
ERROR = Issue(level="error", code="unknown-column", path="steps[0]", message="unknown column 'x'")
WARNING = Issue(level="warning", code="unknown-var", path="vars.question", message="not declared")


def _formula(vars: dict[str, object]) -> object:
    return validate_formula({"formula": "f", "vars": vars, "steps": [{"id": "a", "llm": {"prompt": "p"}}]})


# -- next_step -----------------------------------------------------------------------------------------------


def test_a_reply_is_answered_without_a_workflow() -> None:
    assert policy.next_step(Terminal("reply", "hello")) == "reply"


def test_a_stream_that_ended_on_ask_asks() -> None:
    assert policy.next_step(Terminal("ask", "which year?")) == "asked"


def test_an_empty_generation_is_retried() -> None:
    assert policy.next_step(Terminal("error", "nothing", "empty_generation")) == "retry"


@pytest.mark.parametrize("code", ["model_error", "source_error", None])
def test_any_other_error_fails(code: str | None) -> None:
    assert policy.next_step(Terminal("error", "boom", code)) == "fail"


def test_error_issues_after_the_self_check_fail() -> None:
    assert policy.next_step(Terminal("final", formula=FORMULA, issues=(ERROR,))) == "fail"


def test_error_issues_without_a_self_check_do_not_fail_here() -> None:
    terminal = Terminal("final", formula=FORMULA, issues=(ERROR,))
    assert policy.next_step(terminal, self_checked=False) == "run"


def test_warnings_do_not_stop_a_run() -> None:
    assert policy.next_step(Terminal("final", formula=FORMULA, issues=(WARNING,))) == "run"


def test_autorun_false_builds_without_running() -> None:
    assert policy.next_step(Terminal("final", formula=FORMULA, autorun=False)) == "ready"


def test_a_clean_final_formula_runs() -> None:
    assert policy.next_step(Terminal("final", formula=FORMULA)) == "run"


def test_a_final_op_without_a_formula_fails() -> None:
    assert policy.next_step(Terminal("final", formula=None)) == "fail"


# -- fill_input ----------------------------------------------------------------------------------------------


def test_without_declared_vars_the_run_gets_the_question_and_history() -> None:
    history = [HistoryItem("q1", "a1")]
    assert policy.fill_input(FORMULA, "why?", history) == {
        "question": "why?",
        "history": [{"question": "q1", "answer": "a1"}],
    }


@pytest.mark.parametrize("name", ["question", "user_query", "Topic", "INPUT", "main_topic"])
def test_the_question_goes_to_the_var_whose_name_looks_like_a_question(name: str) -> None:
    formula = _formula({"region": {"default": "north"}, name: {"description": "asked"}})
    values = policy.fill_input(formula, "why?", [])
    assert values[name] == "why?"
    assert values["region"] == "north"


@pytest.mark.parametrize("name", ["问题", "需求", "主题", "Question", "search_query"])
def test_names_that_look_like_a_question(name: str) -> None:
    # Formula var names are ASCII identifiers today; the rule also reads the Chinese names the spec lists.
    assert policy.QUESTION_VAR.search(name)


@pytest.mark.parametrize("name", ["region", "year", "limit", "history_size"])
def test_names_that_do_not(name: str) -> None:
    assert not policy.QUESTION_VAR.search(name)


def test_else_the_question_goes_to_the_first_required_var() -> None:
    formula = _formula({"a": {"default": "x"}, "b": {"required": True}, "c": {"required": True}})
    assert policy.fill_input(formula, "why?", []) == {"a": "x", "b": "why?", "c": "", "history": []}


def test_else_the_question_goes_to_the_first_var() -> None:
    formula = _formula({"first": {"default": "x"}, "second": {}})
    assert policy.fill_input(formula, "why?", []) == {"first": "why?", "second": "", "history": []}


def test_declared_vars_get_their_defaults_or_empty_text() -> None:
    formula = _formula({"question": {}, "n": {"default": 3}, "label": {}})
    assert policy.fill_input(formula, "q", []) == {"question": "q", "n": 3, "label": "", "history": []}


def test_history_keeps_the_last_six_turns_with_answers_clipped_to_600_characters() -> None:
    history = [HistoryItem(f"q{i}", "x" * 1000 if i == 9 else f"a{i}") for i in range(10)]
    items = policy.fill_input(FORMULA, "q", history)["history"]
    assert isinstance(items, list)
    assert [item["question"] for item in items] == [f"q{i}" for i in range(4, 10)]  # type: ignore[index]
    last = items[-1]
    assert isinstance(last, dict) and isinstance(last["answer"], str)
    assert len(last["answer"]) == 600 and last["answer"].endswith("…")


def test_history_rides_along_with_declared_vars_too() -> None:
    formula = _formula({"question": {}})
    assert policy.fill_input(formula, "q", [HistoryItem("a", "b")])["history"] == [
        {"question": "a", "answer": "b"}
    ]


# -- retry_after_review --------------------------------------------------------------------------------------


def _review(*signals: Signal) -> Review:
    return Review.of(list(signals))


BROKEN = Signal(kind="invented_number", detail="12 is not in the data", severity="broken")
REBUILD = Signal(kind="no_rows_in_range", detail="2030 is not covered", severity="degraded")
DEGRADED = Signal(kind="leaked_markup", detail="```", severity="degraded")


def test_a_broken_review_is_retried_on_the_first_attempt() -> None:
    assert policy.retry_after_review(_review(BROKEN), 0) is True


def test_a_rebuild_kind_is_retried_even_when_only_degraded() -> None:
    assert policy.retry_after_review(_review(REBUILD), 0) is True


def test_a_degraded_signal_outside_the_rebuild_set_is_not_retried() -> None:
    assert policy.retry_after_review(_review(DEGRADED), 0) is False


def test_a_clean_review_is_not_retried() -> None:
    assert policy.retry_after_review(Review(), 0) is False


def test_a_review_whose_verdict_is_accept_is_not_retried() -> None:
    vetoed = _review(BROKEN).model_copy(update={"verdict": "accept"})
    assert policy.retry_after_review(vetoed, 0) is False


def test_no_retry_once_the_attempts_are_used_up() -> None:
    assert policy.MAX_ATTEMPTS == 2
    assert policy.retry_after_review(_review(BROKEN), 1) is False


# -- the three retry instructions ----------------------------------------------------------------------------


def test_with_a_formula_the_retry_hands_it_back_with_the_reason_and_asks_for_a_fix() -> None:
    text = policy.retry_instruction("Top 3 regions?", "step 'q' returned no rows", formula_text='{"op":"x"}')
    assert "step 'q' returned no rows" in text and '{"op":"x"}' in text
    assert "raise a step limit, correct an argument, or query differently" in text
    assert text.endswith("answer the original question: Top 3 regions?")


def test_without_a_formula_the_retry_asks_for_a_complete_new_workflow() -> None:
    text = policy.retry_instruction("Top 3 regions?", "12 is not in the data")
    assert text.startswith("Top 3 regions?") and "12 is not in the data" in text
    assert "complete new workflow" in text


def test_after_an_empty_generation_the_retry_adds_the_format_hint() -> None:
    text = policy.retry_instruction("Top 3?", "The model wrote no op", empty=True)
    assert text == "Top 3?\n\nThe model wrote no op; emit one op per line; `look` at a table first."


def test_the_format_hint_is_not_repeated_when_the_correction_says_it() -> None:
    text = policy.empty_instruction("Top 3?", "Write one op per line")
    assert text == "Top 3?\n\nWrite one op per line."


# -- judging attempts and turns ------------------------------------------------------------------------------


def test_attempt_status_follows_the_reviews_severity() -> None:
    assert policy.attempt_status(Review()) == "done"
    assert policy.attempt_status(_review(DEGRADED)) == "partial"
    assert policy.attempt_status(_review(BROKEN)) == "unusable"
    assert policy.attempt_status(Review(), ran=False) == "failed"


def _attempt(n: int, status: str, answer: str = "") -> Attempt:
    return Attempt.model_validate({"n": n, "status": status, "reason": status, "answer": answer})


@pytest.mark.parametrize(
    ("statuses", "chosen"),
    [
        (["unusable", "done"], 2),
        (["partial", "failed"], 1),
        (["done", "done"], 2),
        (["failed", "unusable"], 2),
        (["partial", "cancelled"], 2),
    ],
)
def test_the_turn_reports_the_best_attempt_the_later_on_a_tie(statuses: list[str], chosen: int) -> None:
    attempts = [_attempt(i + 1, status) for i, status in enumerate(statuses)]
    assert policy.chosen_attempt(attempts).n == chosen


def test_a_turn_answers_only_with_a_usable_attempt_clipped_to_4000_characters() -> None:
    assert policy.turn_answer(_attempt(1, "unusable", "made up")) == ""
    assert policy.turn_answer(_attempt(1, "failed", "x")) == ""
    long = policy.turn_answer(_attempt(1, "done", "y" * 5000))
    assert len(long) == policy.ANSWER_CHARS == 4000


def test_review_of_signals_drops_benign_ones_and_takes_the_worst_severity() -> None:
    benign = Signal(kind="note", detail="fine", severity="benign")
    assert Review.of([benign]) == Review(severity="ok", verdict="accept", signals=[])
    review = Review.of([DEGRADED, BROKEN, benign])
    assert (review.severity, review.verdict, review.kinds()) == (
        "broken",
        "retry",
        ["leaked_markup", "invented_number"],
    )
