"""Whole turns on the bundled shop data with the scripted model: every phase, retry, stream and store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from copilot_helpers import DONE, aggregate_step, answer_step, assert_stored_whole, gold, lines, query_step

from plangate.copilot import Copilot, ask, ask_stream, policy
from plangate.copilot._conversations import Conversations
from plangate.errors import ConfigError, NotFoundError
from plangate.events import OpEvent, OutcomeEvent, ReviewEvent, StatusEvent, StepStateEvent
from plangate.models import ModelRequest, ModelUnavailableError, ScriptedModel
from plangate.store import SQLiteStore, Store

SHOP = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"
QUESTION = "Which 3 regions had the highest revenue in 2025?"
REVENUE = aggregate_step(
    "revenue",
    source="shop",
    table="order_items",
    measures=[
        {"agg": "sum", "column": "order_items.unit_price", "times": "order_items.quantity", "as": "revenue"}
    ],
    group_by=["regions.name"],
    period={"column": "orders.order_date", "from": "2025", "to": "2025"},
    order_by=[{"column": "revenue", "desc": True}],
    limit=3,
)
GOLD_SQL = (
    "SELECT r.name, sum(i.unit_price * i.quantity) AS revenue FROM order_items i JOIN orders o USING "
    "(order_id) "
    "JOIN customers c USING (customer_id) JOIN regions r USING (region_id) "
    "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' GROUP BY r.name ORDER BY "
    "revenue DESC LIMIT 3"
)
GOOD_ANSWER = "East led with 1,328,137.93, then West with 899,479.59 and South with 495,110.24."
REVENUE_OPS = lines(
    {"op": "plan", "summary": "Revenue per region in 2025, top 3"}, REVENUE, answer_step("revenue"), DONE
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened  # type: ignore[misc]
    opened.close()


def _ask(store: Store, *responses: object, question: str = QUESTION, **options: object) -> tuple:
    model = ScriptedModel(list(responses))  # type: ignore[arg-type]
    turn = ask(question, SHOP, model=model, store=store, **options)  # type: ignore[arg-type]
    return turn, model


def test_a_question_becomes_a_checked_run_reviewed_formula(store: Store) -> None:
    turn, model = _ask(store, REVENUE_OPS, GOOD_ANSWER)
    assert (turn.status, turn.answer, turn.reason) == ("done", GOOD_ANSWER, "answered from the data")
    assert turn.result.columns == ["name", "revenue"]
    assert turn.result.rows == gold(SHOP, GOLD_SQL)
    assert turn.formula is not None and [s.id for s in turn.formula.steps] == ["revenue", "answer"]
    assert turn.source == "shop" and turn.model == "scripted"
    [attempt] = turn.attempts
    assert (attempt.status, attempt.review.severity, attempt.review.signals) == ("done", "ok", [])
    assert [request.purpose for request in model.requests] == ["copilot", "generate"]
    # the answer step read the rows and the question
    assert (
        "East" in model.requests[1].messages[-1].content
        and QUESTION in model.requests[1].messages[-1].content
    )
    formula_run = store.get_run(attempt.run_id)  # type: ignore[arg-type]
    assert (formula_run.kind, formula_run.parent_run_id, formula_run.status) == (
        "formula",
        turn.run_id,
        "completed",
    )
    assert_stored_whole(store, turn)


def test_the_turns_outcome_carries_the_usage_of_every_model_call(store: Store) -> None:
    turn, model = _ask(store, REVENUE_OPS, GOOD_ANSWER)
    outcome = store.get_run(turn.run_id).outcome
    assert outcome is not None
    usage = outcome["usage"]
    assert isinstance(usage, dict)
    # Both calls count: the generation (read past its done op to the provider's count, the stream's last
    # chunk) and the answer step's (an llm step: counted by the turn's formula run, added to the turn's).
    generation, answer = model.requests
    assert (generation.purpose, answer.purpose) == ("copilot", "generate")

    def prompt(request: ModelRequest) -> int:
        return sum(-(-len(m.content) // 4) for m in request.messages)

    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (
        2,
        prompt(generation) + prompt(answer),
        -(-len(REVENUE_OPS) // 4) + -(-len(GOOD_ANSWER) // 4),
    )
    events = store.events(turn.run_id)
    assert isinstance(events[-1], OutcomeEvent) and events[-1].usage == usage
    [child] = store.list_runs(parent_run_id=turn.run_id, kind="formula").items
    assert child.outcome is not None and child.outcome["usage"]["calls"] == 1  # type: ignore[index]


def test_the_turns_events_are_its_ops_check_run_review_and_outcome(store: Store) -> None:
    turn, _ = _ask(store, REVENUE_OPS, GOOD_ANSWER)
    events = store.events(turn.run_id)
    ops = [e.op["op"] for e in events if isinstance(e, OpEvent)]
    assert ops == ["plan", "add_step", "add_step", "done", "final"]
    assert all(e.attempt == 1 for e in events if isinstance(e, OpEvent))
    final = next(e for e in events if isinstance(e, OpEvent) and e.op["op"] == "final")
    assert (final.op["autorun"] is True and final.op["issues"] == []) or all(
        i["level"] == "warning"
        for i in final.op["issues"]  # type: ignore[union-attr]
    )
    stages = [(e.stage, e.code) for e in events if isinstance(e, StatusEvent)]
    assert stages == [
        ("turn", "started"),
        ("generate", "attempt"),
        ("check", "passed"),
        ("run", "started"),
        ("run", "completed"),
    ]
    review = next(e for e in events if isinstance(e, ReviewEvent))
    assert (review.verdict, review.severity, review.signals) == ("accept", "ok", [])
    assert isinstance(events[-1], OutcomeEvent) and events[-1].status == "completed"


def test_look_is_answered_with_columns_types_and_five_rows_and_generation_goes_on(store: Store) -> None:
    first = lines(
        {"op": "plan", "summary": "p"},
        {"op": "look", "table": "orders"},
        {"op": "add_step", "step": {"id": "x"}},
    )
    turn, model = _ask(store, first, REVENUE_OPS, GOOD_ANSWER)
    assert turn.status == "done"
    second = model.requests[1]
    assert second.purpose == "copilot"
    assert second.messages[-2].role == "assistant" and '"look"' in second.messages[-2].content
    assert '"x"' not in second.messages[-2].content  # what came after the look was never applied
    looked = second.messages[-1].content
    assert looked.startswith("look orders: orders (4,000 rows): order_id INTEGER key")
    assert "order_date TEXT [2025-01-01 .. 2026-06-30]" in looked
    assert "5 sample rows:" in looked and len(looked.splitlines()) == 9
    assert [s.id for s in turn.formula.steps] == ["revenue", "answer"]  # type: ignore[union-attr]


def test_a_look_at_a_missing_table_names_the_closest_one(store: Store) -> None:
    turn, model = _ask(store, lines({"op": "look", "table": "order"}), REVENUE_OPS, GOOD_ANSWER)
    assert "there is no table 'order' (did you mean 'orders'?)" in model.requests[1].messages[-1].content
    assert turn.status == "done"


def test_check_errors_go_back_to_the_model_and_its_repair_is_applied(store: Store) -> None:
    broken = lines(
        query_step("q", "shop", "SELECT name, count(*) FROM region GROUP BY name"), answer_step("q"), DONE
    )
    repair = lines(
        {
            "op": "update_step",
            "id": "q",
            "tool": {"args": {"sql": "SELECT name, count(*) AS n FROM regions GROUP BY name"}},
        },
        DONE,
    )
    turn, model = _ask(store, broken, repair, "Central, East, North, South and West: counted in the rows.")
    assert [r.purpose for r in model.requests] == ["copilot", "copilot", "generate"]
    repair_request = model.requests[1].messages[-1].content
    assert "unknown table 'region' (did you mean 'regions'?)" in repair_request
    # The repaired query runs; it counts every region's rows, not the year's revenue the question asks for,
    # so the turn says it cannot vouch for the figure.
    assert turn.status == "partial" and "no date bound of the query falls in it" in turn.reason
    ops = [e.op["op"] for e in store.events(turn.run_id) if isinstance(e, OpEvent)]
    assert ops == ["add_step", "add_step", "done", "update_step", "done", "final"]
    checks = [
        (e.code, e.text)
        for e in store.events(turn.run_id)
        if isinstance(e, StatusEvent) and e.stage == "check"
    ]
    assert checks[0][0] == "issues" and "did you mean 'regions'" in checks[0][1] and checks[-1][0] == "passed"


def test_after_two_repair_rounds_the_formula_is_final_and_the_attempt_fails(store: Store) -> None:
    broken = lines(query_step("q", "shop", "SELECT nme FROM regions"), answer_step("q"), DONE)
    turn, model = _ask(store, broken, lines(DONE), lines(DONE))
    assert [r.purpose for r in model.requests] == ["copilot"] * (1 + policy.REPAIR_ROUNDS)
    assert turn.status == "failed" and turn.answer == ""
    assert "unknown column 'nme' in regions (did you mean 'regions.name'?)" in turn.reason
    [attempt] = turn.attempts
    assert attempt.run_id is None and attempt.formula is not None
    assert [i.code for i in attempt.issues if i.level == "error"] == ["unknown-column"]
    assert_stored_whole(store, turn)


def test_an_invented_number_is_retried_with_the_formula_and_the_reason(store: Store) -> None:
    turn, model = _ask(store, REVENUE_OPS, "East led with 1,500,000.", REVENUE_OPS, GOOD_ANSWER)
    assert [a.status for a in turn.attempts] == ["unusable", "done"]
    assert turn.attempts[0].review.kinds() == ["invented_number"]
    assert turn.attempts[0].answer == "East led with 1,500,000."
    retry = model.requests[2].messages[-1].content
    assert "1,500,000 is not in the data the run read" in retry
    assert '"op": "add_step"' in retry and "answer the original question: " + QUESTION in retry
    assert (turn.status, turn.answer) == ("done", GOOD_ANSWER)
    retried = [e for e in store.events(turn.run_id) if isinstance(e, StatusEvent) and e.code == "retry"]
    assert len(retried) == 1
    assert_stored_whole(store, turn)


def test_a_turn_that_stays_unusable_gives_no_answer_and_says_why(store: Store) -> None:
    turn, _ = _ask(store, REVENUE_OPS, "East: 1,500,000.", REVENUE_OPS, "East: 2,000,000.")
    assert [a.status for a in turn.attempts] == ["unusable", "unusable"]
    assert (turn.status, turn.answer) == ("unusable", "")
    assert turn.reason == "invented_number: 2,000,000 is not in the data the run read"
    assert_stored_whole(store, turn)


def test_an_empty_generation_is_retried_with_the_format_hint(store: Store) -> None:
    turn, model = _ask(store, "", REVENUE_OPS, GOOD_ANSWER)
    assert [a.status for a in turn.attempts] == ["failed", "done"]
    assert turn.attempts[0].reason == "The model wrote no op (it wrote nothing)"
    assert model.requests[1].messages[-1].content.endswith("emit one op per line; `look` at a table first.")
    assert turn.status == "done"


def test_garbage_twice_ends_failed_with_what_the_model_wrote(store: Store) -> None:
    turn, _ = _ask(store, "Lorem ipsum dolor sit amet.\n", "I cannot help with that.")
    assert turn.status == "failed" and turn.answer == ""
    assert turn.reason == "The model wrote no op (it wrote not JSON: 'I cannot help with that.')"
    assert_stored_whole(store, turn)


def test_a_model_that_fails_ends_the_turn_failed(store: Store) -> None:
    turn, _ = _ask(store, ModelUnavailableError("the server is down", provider="x"))
    assert turn.status == "failed"
    assert turn.reason.startswith("the model failed: ") and "the server is down" in turn.reason
    assert_stored_whole(store, turn)


def test_a_reply_answers_without_a_workflow(store: Store) -> None:
    turn, _ = _ask(
        store, lines({"op": "reply", "text": "The shop sells in five regions."}), question="What is this?"
    )
    assert (turn.status, turn.answer, turn.formula) == ("done", "The shop sells in five regions.", None)


def test_a_reply_with_a_number_from_nowhere_is_unusable_and_rebuilt(store: Store) -> None:
    turn, model = _ask(
        store, lines({"op": "reply", "text": "Revenue was 12 million."}), REVENUE_OPS, GOOD_ANSWER
    )
    assert [a.status for a in turn.attempts] == ["unusable", "done"]
    assert "12 million is not in the data" in model.requests[1].messages[-1].content
    assert "Build a complete new workflow" in model.requests[1].messages[-1].content


def test_an_ask_op_ends_the_turn_with_the_question(store: Store) -> None:
    turn, _ = _ask(store, lines({"op": "ask", "text": "Revenue before or after discounts?"}))
    assert (turn.status, turn.answer) == ("partial", "Revenue before or after discounts?")
    assert turn.reason == "the copilot asks first: Revenue before or after discounts?"


def test_done_with_run_false_builds_without_running(store: Store) -> None:
    ops = REVENUE_OPS.replace('"run": true', '"run": false')
    turn, model = _ask(store, ops)
    assert turn.status == "partial" and turn.attempts[0].run_id is None
    assert turn.formula is not None and len(model.requests) == 1


def test_no_rows_in_the_asked_range_is_retried_then_reported(store: Store) -> None:
    ops = lines(
        aggregate_step(
            "n",
            source="shop",
            table="orders",
            measures=[{"agg": "count", "column": "*"}],
            period={"column": "orders.order_date", "from": "2030", "to": "2030"},
        ),
        answer_step("n"),
        DONE,
    )
    turn, model = _ask(
        store,
        ops,
        "There were 0 orders.",
        ops,
        "The data has no orders in 2030: 0.",
        question="How many orders were placed in 2030?",
    )
    kinds = [a.review.kinds() for a in turn.attempts]
    assert kinds[0] == ["no_rows_in_range"]
    assert (
        "orders.order_date has rows from 2025-01-01 to 2026-06-30" in model.requests[2].messages[-1].content
    )
    assert turn.status in ("partial", "unusable") and "no_rows_in_range" in turn.reason


def test_a_failing_run_is_reviewed_retried_and_fails_with_the_steps_reason(store: Store) -> None:
    ops = lines(query_step("q", "shop", "SELECT count(*) AS n FROM orders"), answer_step("q"), DONE)
    failing = ModelUnavailableError("answer model is down", provider="x")
    turn, _ = _ask(store, ops, failing, ops, failing, question="How many orders?")
    assert [a.status for a in turn.attempts] == ["failed", "failed"]
    assert turn.attempts[0].review.kinds() == ["step_failed"]
    assert "answer model is down" in turn.reason
    assert_stored_whole(store, turn)


def test_a_conversations_later_turns_see_the_earlier_ones(store: Store) -> None:
    first, _ = _ask(store, REVENUE_OPS, GOOD_ANSWER)
    history_ops = lines(
        query_step("q", "shop", "SELECT count(*) AS n FROM regions"),
        {
            "op": "add_step",
            "step": {
                "id": "answer",
                "needs": ["q"],
                "llm": {"prompt": "{{history}} {{steps.q.output.rows}}"},
            },
        },
        DONE,
    )
    second, model = _ask(
        store,
        history_ops,
        "There are 5 regions.",
        question="And how many regions are there?",
        conversation=first.conversation_id,
    )
    assert second.conversation_id == first.conversation_id and second.status == "done"
    assert f"Q: {QUESTION}\nA: {GOOD_ANSWER}" in model.requests[0].messages[-1].content
    assert GOOD_ANSWER in model.requests[1].messages[-1].content  # {{history}} rode along into the run
    conversation = Conversations(store).get_conversation(first.conversation_id)
    assert conversation.turns == 2 and conversation.title == QUESTION
    assert [t.id for t in Conversations(store).list_turns(first.conversation_id)] == [first.id, second.id]


def test_an_unknown_conversation_or_an_empty_question_stores_nothing(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no conversation 'conv_nope'"):
        _ask(store, REVENUE_OPS, conversation="conv_nope")
    with pytest.raises(ConfigError, match="expected a question"):
        _ask(store, REVENUE_OPS, question="   ")
    assert store.list_runs().items == [] and Conversations(store).list_conversations().items == []


def test_an_unexpected_error_still_ends_the_turn_with_a_reason(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("a defect")

    monkeypatch.setattr(policy, "next_step", broken)
    turn, _ = _ask(store, REVENUE_OPS)
    assert turn.status == "failed"
    assert turn.reason == "the turn stopped on an unexpected error (RuntimeError: a defect)"
    assert_stored_whole(store, turn)


def test_the_stream_yields_ops_progress_review_and_outcome_then_the_turn(store: Store) -> None:
    model = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    stream = ask_stream(QUESTION, SHOP, model=model, store=store)

    async def follow() -> list[object]:
        return [event async for event in stream]

    events = asyncio.run(follow())
    assert stream.turn is not None and stream.turn.status == "done"
    kinds = [type(e).__name__ for e in events]
    # the formula run ends with an outcome of its own (as every run does); the turn's outcome comes last
    turn_outcome = max(i for i, e in enumerate(events) if isinstance(e, OutcomeEvent))
    assert kinds.index("OpEvent") < kinds.index("StepStateEvent") < kinds.index("ReviewEvent") < turn_outcome
    assert isinstance(events[-1], OutcomeEvent) and events[-1].run_id == stream.run_id
    steps = [e for e in events if isinstance(e, StepStateEvent)]
    assert {e.run_id for e in steps} == {stream.turn.attempts[0].run_id}
    assert [(e.step_id, e.status) for e in steps if e.status == "complete"] == [
        ("revenue", "complete"),
        ("answer", "complete"),
    ]
    assert [e.seq for e in events if e.run_id == stream.run_id] == list(
        range(1, len(store.events(stream.run_id)) + 1)
    )


def test_leaving_the_stream_early_cancels_and_stores_the_turn(store: Store) -> None:
    model = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    stream = ask_stream(QUESTION, SHOP, model=model, store=store)

    async def first_op() -> None:
        async for event in stream:
            if isinstance(event, OpEvent):
                break

    asyncio.run(first_op())
    turn = Conversations(store).find_turn(stream.run_id)
    assert turn is not None and turn.status == "cancelled"
    assert turn.attempts[-1].reason == "the turn was cancelled before it finished"
    assert store.get_run(stream.run_id).status == "cancelled"


def test_a_turn_is_stored_whole_or_not_at_all(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise ConfigError("the disk said no")

    monkeypatch.setattr(Conversations, "record_turn", refuse)
    copilot = Copilot(model=ScriptedModel([REVENUE_OPS, GOOD_ANSWER]), store=store)
    prepared = copilot.prepare(QUESTION, SHOP)
    with pytest.raises(ConfigError, match="the disk said no"):
        asyncio.run(copilot.run_turn(prepared))
    assert Conversations(store).find_turn(prepared.run_id) is None
    assert not any(isinstance(e, OutcomeEvent) for e in store.events(prepared.run_id))
    monkeypatch.undo()
    recovered = copilot.recover(prepared.run_id)
    assert recovered.status == "done"  # the attempt that finished is kept; only the interruption is added
    assert recovered.attempts[-1].reason == "the turn was interrupted: its process stopped before it finished"
    assert_stored_whole(store, recovered)


def test_a_model_review_may_veto_a_retry_and_its_added_numbers_are_reverted(store: Store) -> None:
    ops = lines(
        aggregate_step(
            "n",
            source="shop",
            table="orders",
            measures=[{"agg": "count", "column": "*"}],
            period={"column": "orders.order_date", "from": "2030", "to": "2030"},
        ),
        answer_step("n"),
        DONE,
    )
    rewrite = "None in 2030; 12 in 2029."
    review = json.dumps({"verdict": "accept", "note": "no orders in 2030 is the answer", "answer": rewrite})
    turn, model = _ask(
        store,
        ops,
        "There were 0 orders in 2030.",
        review,
        question="How many orders in 2030?",
        model_review=True,
    )
    assert [r.purpose for r in model.requests] == ["copilot", "generate", "review"]
    [attempt] = turn.attempts  # the model vetoed the retry the rules asked for
    assert attempt.review.verdict == "accept" and attempt.review.kinds() == ["no_rows_in_range"]
    assert (
        attempt.review.note == "no orders in 2030 is the answer (its rewrite was reverted: it added 12, 2029)"
    )
    assert (turn.status, turn.answer) == ("partial", "There were 0 orders in 2030.")


def test_a_clean_run_asks_no_model_review(store: Store) -> None:
    turn, model = _ask(store, REVENUE_OPS, GOOD_ANSWER, model_review=True)
    assert turn.status == "done" and [r.purpose for r in model.requests] == ["copilot", "generate"]
