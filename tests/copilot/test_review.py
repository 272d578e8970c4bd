"""The review's rules, one by one, from a run's events and output; and the model review's limits."""

from __future__ import annotations

import asyncio
import json

import pytest

from plangate.copilot import _review
from plangate.copilot._numbers import Known
from plangate.copilot._run import Read, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot.results import Review, Signal, TurnResult
from plangate.events import StepStateEvent, ToolResultEvent
from plangate.formulas import Plan, check_formula
from plangate.formulas.loader import validate_formula
from plangate.models import ScriptedModel

QUESTION = "Which 3 regions had the highest revenue in 2025?"


def _plan(*steps: dict[str, object]) -> Plan:
    plan, _ = check_formula(validate_formula({"formula": "t", "steps": list(steps)}), {})
    assert plan is not None
    return plan


QUERY = {"id": "q", "tool": {"name": "db_aggregate", "args": {"source": "shop", "table": "orders"}}}
ANSWER = {"id": "answer", "needs": ["q"], "llm": {"prompt": "{{steps.q.output.rows}}"}}


def _outcome(
    *,
    status: str = "completed",
    steps: dict[str, str] | None = None,
    events: list[StepStateEvent] | None = None,
    reads: list[Read] | None = None,
    answer: str = "East had 10.",
    agent_results: list[ToolResultEvent] | None = None,
    plan: Plan | None = None,
) -> RunOutcome:
    found = reads if reads is not None else [Read("q", "db_aggregate", {}, ["name", "n"], [["East", 10]])]
    outcome = RunOutcome("run_x", status, status, plan or _plan(QUERY, ANSWER), "answer", answer)
    outcome.steps = steps or {"q": "complete", "answer": "complete"}
    outcome.step_events = events or []
    outcome.reads = found
    outcome.agent_results = agent_results or []
    if found:
        outcome.result = TurnResult(columns=found[-1].columns, rows=found[-1].rows)
    return outcome


def _signals(
    outcome: RunOutcome, scope: Scope, question: str = "How many orders per region?"
) -> list[Signal]:
    known = _review.known_data(question, outcome.plan, outcome, Known())
    return _review.review_run(question, outcome, scope, known)


def _kinds(signals: list[Signal]) -> list[tuple[str, str]]:
    return [(s.kind, s.severity) for s in signals]


def test_a_clean_run_has_no_signals(shop_scope: Scope) -> None:
    assert _signals(_outcome(), shop_scope) == []


def _retry(step: str, why: str) -> StepStateEvent:
    return StepStateEvent(
        step_id=step, status="ready", reason=f"attempt 1 failed ({why}); retrying", attempt=1
    )


def _state(step: str, status: str, reason: str = "") -> StepStateEvent:
    return StepStateEvent(step_id=step, status=status, reason=reason, attempt=2)  # type: ignore[arg-type]


def test_a_tool_error_is_degraded_when_the_same_tool_later_succeeded(shop_scope: Scope) -> None:
    events = [_retry("q", "db_aggregate: database is locked"), _state("q", "complete")]
    signals = _signals(_outcome(events=events), shop_scope)
    assert _kinds(signals) == [("tool_error", "degraded")]
    assert signals[0].detail == "step 'q': db_aggregate: database is locked; it succeeded later"


def test_a_tool_error_is_broken_when_the_tool_never_succeeded(shop_scope: Scope) -> None:
    events = [_retry("q", "db_aggregate: boom"), _state("q", "failed", "db_aggregate: boom again")]
    outcome = _outcome(
        status="failed", steps={"q": "failed", "answer": "skipped"}, events=events, reads=[], answer=""
    )
    assert _kinds(_signals(outcome, shop_scope)) == [("tool_error", "broken"), ("step_failed", "broken")]


def test_tool_errors_inside_an_agent_step_count_too(shop_scope: Scope) -> None:
    results = [
        ToolResultEvent(
            call_id="1",
            tool="db_query",
            status="failed",
            success=False,
            summary="no such table",
            error_message="no such table: ordrs",
        ),
        ToolResultEvent(call_id="2", tool="db_query", status="done", success=True, summary="3 rows"),
    ]
    signals = _signals(_outcome(agent_results=results), shop_scope)
    assert _kinds(signals) == [("tool_error", "degraded")]


def test_a_failed_step_is_broken(shop_scope: Scope) -> None:
    outcome = _outcome(
        status="failed",
        steps={"q": "complete", "answer": "failed"},
        events=[_state("answer", "failed", "llm: model unavailable")],
        answer="",
    )
    signals = _signals(outcome, shop_scope)
    assert _kinds(signals) == [("step_failed", "broken")]
    assert signals[0].detail == "step 'answer' failed: llm: model unavailable"


def test_a_run_that_stopped_without_a_failed_step_is_still_a_failure(shop_scope: Scope) -> None:
    outcome = _outcome(status="timeout", answer="")
    outcome.reason = "the workflow ran past 600 s and was stopped"
    assert [s.detail for s in _signals(outcome, shop_scope)] == [
        "the workflow ran past 600 s and was stopped"
    ]


def test_an_empty_answer_is_broken(shop_scope: Scope) -> None:
    assert _kinds(_signals(_outcome(answer="   "), shop_scope)) == [("empty_output", "broken")]


def test_a_step_that_hit_the_row_limit_is_degraded(shop_scope: Scope) -> None:
    read = Read("q", "db_query", {"sql": "SELECT order_id AS n FROM orders"}, ["n"], [[10]], truncated=True)
    assert _kinds(_signals(_outcome(reads=[read]), shop_scope)) == [("step_limit_hit", "degraded")]


def test_an_agent_that_ran_out_of_rounds_hit_a_step_limit(shop_scope: Scope) -> None:
    plan = _plan({"id": "a", "agent": {"prompt": "p", "tools": ["db_query"]}})
    outcome = _outcome(
        plan=plan,
        status="failed",
        steps={"a": "failed"},
        reads=[],
        answer="",
        events=[_state("a", "failed", "agent exhausted (exhausted): no rounds left")],
    )
    assert ("step_limit_hit", "degraded") in _kinds(_signals(outcome, shop_scope))


def test_an_empty_query_result_is_degraded(shop_scope: Scope) -> None:
    read = Read("q", "db_query", {"sql": "SELECT count(*) AS n FROM orders WHERE 0"}, ["n"], [])
    signals = _signals(_outcome(reads=[read], answer="None found."), shop_scope)
    assert _kinds(signals) == [("empty_query_result", "degraded")]


def test_no_rows_in_the_asked_range_compares_the_question_with_the_tables_dates(shop_scope: Scope) -> None:
    read = Read(
        "q",
        "db_aggregate",
        {"table": "orders", "period": {"column": "orders.order_date", "from": "2030", "to": "2030"}},
        ["n"],
        [],
    )
    signals = _signals(_outcome(reads=[read], answer="No orders."), shop_scope, "How many orders in 2030?")
    assert _kinds(signals) == [("empty_query_result", "degraded"), ("no_rows_in_range", "degraded")]
    assert signals[1].detail == (
        "the question asks about 2030-01-01 to 2030-12-31, but orders.order_date has rows from 2025-01-01 to "
        "2026-06-30"
    )


def test_no_rows_in_range_reads_the_date_columns_a_query_names(shop_scope: Scope) -> None:
    sql = "SELECT count(*) FROM returns WHERE returned_on >= '2031-01-01'"
    read = Read("q", "db_query", {"source": "shop", "sql": sql}, ["n"], [[0]])
    signals = _signals(_outcome(reads=[read], answer="There were 0."), shop_scope, "Returns in 2031?")
    assert ("no_rows_in_range", "degraded") in _kinds(signals)
    assert "returns.returned_on" in signals[-1].detail


def test_a_period_the_data_covers_raises_no_range_signal(shop_scope: Scope) -> None:
    period = {"column": "orders.order_date", "from": "2025", "to": "2025"}
    read = Read("q", "db_aggregate", {"period": period}, ["n"], [[3]])
    assert _signals(_outcome(reads=[read], answer="3."), shop_scope, "orders in 2025") == []


def test_leaked_markup_is_degraded(shop_scope: Scope) -> None:
    signals = _signals(_outcome(answer='East had 10. <decision>{"action":"done"}</decision>'), shop_scope)
    assert _kinds(signals) == [("leaked_markup", "degraded")]


def test_a_number_not_in_the_data_is_a_broken_invented_number(shop_scope: Scope) -> None:
    signals = _signals(_outcome(answer="East had 10, West had 12."), shop_scope)
    assert _kinds(signals) == [("invented_number", "broken")]
    assert signals[0].detail == "12 is not in the data the run read"


def test_an_answer_that_denies_rows_the_query_returned_is_broken(shop_scope: Scope) -> None:
    signals = _signals(_outcome(answer="The data has no data for this."), shop_scope)
    assert _kinds(signals) == [("answer_denies_rows", "broken")]


def test_the_workflow_arguments_and_row_counts_count_as_read(shop_scope: Scope) -> None:
    plan = _plan(
        {"id": "q", "tool": {"name": "db_aggregate", "args": {"source": "shop", "limit": 3}}}, ANSWER
    )
    reads = [Read("q", "db_aggregate", {}, ["name"], [["East"], ["West"], ["South"]])]
    assert (
        _signals(_outcome(plan=plan, reads=reads, answer="The 3 regions: East, West, South."), shop_scope)
        == []
    )


# -- the model review ----------------------------------------------------------------------------------------


def _verdict(answer: str, reply: dict[str, object]) -> _review.ModelVerdict | None:
    model = ScriptedModel([json.dumps(reply)])
    known = Known()
    known.add_values([10, "East"])
    review = Review.of([Signal(kind="leaked_markup", detail="```", severity="degraded")])
    found = asyncio.run(_review.model_review(model, QUESTION, answer, _outcome(answer=answer), review, known))
    assert model.requests[0].purpose == "review"
    return found


def test_the_model_review_may_veto_a_retry() -> None:
    review = Review.of([Signal(kind="empty_query_result", detail="no rows", severity="degraded")])
    verdict = _review.ModelVerdict("accept", "an empty result is the right answer here", "none", [])
    after = _review.apply_model_review(review, verdict, None)
    assert (after.verdict, after.note) == ("accept", "an empty result is the right answer here")


def test_the_model_review_cannot_force_a_retry() -> None:
    verdict = _review.ModelVerdict("retry", "do it again", "x", [])
    assert _review.apply_model_review(Review(), verdict, None).verdict == "accept"


def test_a_rewrite_that_adds_a_number_is_reverted() -> None:
    found = _verdict("East had 10.", {"verdict": "accept", "note": "fine", "answer": "East had 10, up 25%."})
    assert found is not None
    assert (found.answer, found.reverted) == ("East had 10.", ["25%"])
    after = _review.apply_model_review(Review(), found, None)
    assert after.note == "fine (its rewrite was reverted: it added 25%)"


def test_a_rewrite_with_only_numbers_from_the_data_is_kept() -> None:
    found = _verdict("```East had 10```", {"verdict": "accept", "note": "", "answer": "East had 10."})
    assert found is not None and (found.answer, found.reverted) == ("East had 10.", [])


@pytest.mark.parametrize("reply", ["not json", '{"verdict": "maybe"}', "[]"])
def test_a_model_review_that_answers_nothing_usable_changes_nothing(reply: str) -> None:
    model = ScriptedModel([reply])
    review = Review.of([Signal(kind="leaked_markup", detail="x", severity="degraded")])
    assert asyncio.run(_review.model_review(model, QUESTION, "a", None, review, Known())) is None


@pytest.mark.parametrize(
    "answer",
    [
        "Nothing beats East with 10.",
        "None of the others come close to East's 10.",
        "West does not have more than 10.",
    ],
)
def test_an_answer_that_only_sounds_negative_is_not_a_denial(shop_scope: Scope, answer: str) -> None:
    assert _signals(_outcome(answer=answer), shop_scope) == []


@pytest.mark.parametrize(
    "answer",
    ["No data was found.", "The table has none for it.", "The data doesn't contain any rows for it."],
)
def test_answers_that_deny_the_rows_are_caught(shop_scope: Scope, answer: str) -> None:
    assert _kinds(_signals(_outcome(answer=answer), shop_scope)) == [("answer_denies_rows", "broken")]


@pytest.mark.parametrize(
    ("question", "sql", "doubt"),
    [
        ("Order counts for each month?", "SELECT count(*) AS n FROM orders", "groups by no date bucket"),
        ("How many orders were placed year by year?", "SELECT count(*) AS n FROM orders", "no date bucket"),
        ("What share of orders were cancelled?", "SELECT count(*) AS n FROM orders", "divides nothing"),
        ("What % of orders came by web?", "SELECT count(*) AS n FROM orders", "divides nothing"),
    ],
)
def test_a_time_grain_or_a_ratio_the_query_does_not_compute_is_not_vouched_for(
    shop_scope: Scope, question: str, sql: str, doubt: str
) -> None:
    read = Read("q", "db_query", {"source": "shop", "sql": sql}, ["n"], [[10]])
    signals = _signals(_outcome(reads=[read], answer="10."), shop_scope, question)
    assert ("query_shape", "degraded") in _kinds(signals)
    assert any(doubt in s.detail for s in signals)


@pytest.mark.parametrize(
    ("question", "sql"),
    [
        (
            "Order counts for each month?",
            "SELECT strftime('%Y-%m', order_date) AS month, count(*) AS n FROM orders GROUP BY 1",
        ),
        (
            "Orders month by month?",
            "SELECT substr(order_date, 1, 7) AS m, count(*) AS n FROM orders GROUP BY m",
        ),
        (
            "What share of orders were placed by web?",
            "SELECT 1.0 * sum(channel = 'web') / count(*) AS share FROM orders",
        ),
    ],
)
def test_a_query_that_buckets_dates_or_divides_answers_those_questions(
    shop_scope: Scope, question: str, sql: str
) -> None:
    read = Read("q", "db_query", {"source": "shop", "sql": sql}, ["k", "n"], [["2025-01", 10]])
    signals = _signals(_outcome(reads=[read], answer="10."), shop_scope, question)
    assert not any("date bucket" in s.detail or "divides" in s.detail for s in signals)
