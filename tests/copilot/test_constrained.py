"""The grammar path of a small local model: every op stream its grammar allows is a structured query on real
tables and columns, holding what the question states plainly.

A random walk over the generated grammar (the reader of ``tests/models/test_local_grammar.py``) stands in for
a sampler; each sentence goes through the same op reader, draft and check a turn uses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from plangate.copilot._check import check_draft
from plangate.copilot._constrained import (
    Hints,
    closing_ops,
    linked_columns,
    op_lines_schema,
    period_bounds,
    question_hints,
    samples_under_grammar,
)
from plangate.copilot._generate import _op_of
from plangate.copilot._ops import Draft, OpReader
from plangate.copilot._periods import asked_period
from plangate.copilot._scope import Scope, open_scope
from plangate.models import ScriptedModel
from plangate.models._grammar import DATE_BOUND, grammar_schema, schema_to_gbnf
from plangate.tools.data.periods import BOUND_PATTERN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from test_local_grammar import sentences

SHOP = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"
# Only a query's semantics may still be wrong (say, ordering by an aggregate no measure uses): never a name.
NAME_CODES = {
    "schema",
    "unknown-table",
    "unknown-column",
    "unknown-tool",
    "out-of-scope-source",
    "missing-source",
    "not-automatic",
    "op",
    "no-steps",
}


@pytest.fixture(scope="module")
def shop_with_categories() -> Scope:
    return open_scope(SHOP, categories=True)


def _walk(scope: Scope, question: str, n: int) -> list[tuple[Draft, list[str]]]:
    hints = question_hints(question, scope.categories, scope.schema)
    grammar = schema_to_gbnf(grammar_schema(op_lines_schema(scope.schema, hints)))
    found = []
    for text in sentences(grammar, n, seed=len(question)):
        reader = OpReader()
        ops = [*reader.feed(text), *reader.close()]
        assert [op.name for op in ops] == ["add_step"], text
        draft = Draft("t")
        assert draft.apply(ops[0]) is None
        for op in closing_ops():
            assert draft.apply(_op_of(op)) is None
        _, _, issues = check_draft(draft, scope, {"question": question, "history": []})
        found.append((draft, [issue.code for issue in issues if issue.level == "error"]))
    return found


@pytest.mark.parametrize(
    "question",
    [
        "Which 3 regions had the highest revenue in 2025?",
        "How many cancelled orders were placed on the web in March 2026?",
        "What is the average discount per product category?",
    ],
)
def test_every_stream_the_shop_grammar_allows_names_only_real_tables_and_columns(
    shop_with_categories: Scope, question: str
) -> None:
    for draft, codes in _walk(shop_with_categories, question, 150):
        assert not set(codes) & NAME_CODES, (codes, draft.steps)


def test_the_grammar_holds_the_period_the_limits_and_the_values_the_question_names(
    shop_with_categories: Scope,
) -> None:
    question = "Top 3 cancelled orders per channel in March 2026?"
    for draft, _ in _walk(shop_with_categories, question, 100):
        args = draft.steps[0]["tool"]["args"]  # type: ignore[index]
        assert args["period"] is None or (args["period"]["from"], args["period"]["to"]) == (
            "2026-03",
            "2026-03",
        )
        assert args["limit"] in (3, 10)
        assert all(f == {"column": "orders.status", "op": "=", "value": "cancelled"} for f in args["filters"])
        assert "table" not in args


def test_without_a_named_period_there_is_no_period_and_without_named_values_no_filter(
    shop_with_categories: Scope,
) -> None:
    for draft, _ in _walk(shop_with_categories, "What is the average discount per category?", 60):
        args = draft.steps[0]["tool"]["args"]  # type: ignore[index]
        assert args["period"] is None and args["filters"] == []


def test_every_stream_the_chinook_grammar_allows_names_only_real_tables_and_columns(
    chinook_scope: Scope,
) -> None:
    scope = open_scope(chinook_scope.source.describe(), categories=True)
    for draft, codes in _walk(scope, "Which 5 genres earned the most in 2024?", 150):
        assert not set(codes) & NAME_CODES, (codes, draft.steps)


def test_the_question_is_linked_to_the_columns_it_names(shop_scope: Scope, chinook_scope: Scope) -> None:
    # a table the question names offers the columns that name its rows
    assert linked_columns("Which 3 regions had the highest revenue?", shop_scope.schema) == ["regions.name"]
    assert linked_columns("Which artist has the most albums?", chinook_scope.schema) == [
        "Album.Title",
        "Artist.Name",
    ]
    # a column it names is offered itself, plurals folded
    assert "Invoice.BillingCountry" in linked_columns("Top countries by total", chinook_scope.schema)
    assert "orders.channel" in linked_columns("orders per channel", shop_scope.schema)
    assert linked_columns("What happened?", shop_scope.schema) == []


def test_hints_read_numbers_words_and_category_values(shop_with_categories: Scope) -> None:
    hints = question_hints(
        "Top three web orders that were cancelled in 2025", shop_with_categories.categories
    )
    assert hints.period == ("2025", "2025")
    assert hints.limits == [3, 2025] or hints.limits == [3]
    assert ("orders.channel", "web") in hints.mentions and ("orders.status", "cancelled") in hints.mentions


@pytest.mark.parametrize(
    ("question", "bounds"),
    [
        ("in 2025", ("2025", "2025")),
        ("in Q1 2026", ("2026-01", "2026-03")),
        ("on 2025-03-04", ("2025-03-04", "2025-03-04")),
    ],
)
def test_a_period_becomes_the_bounds_db_aggregate_takes(question: str, bounds: tuple[str, str]) -> None:
    period = asked_period(question)
    assert period is not None and period_bounds(period) == bounds


def test_the_grammar_compiles_in_llama_cpp(shop_with_categories: Scope) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    hints = Hints(
        period=("2025", "2025"),
        limits=[3],
        mentions=[("orders.status", "cancelled")],
        linked=["regions.name"],
    )
    LlamaGrammar.from_string(
        schema_to_gbnf(grammar_schema(op_lines_schema(shop_with_categories.schema, hints))), verbose=False
    )


def test_the_bound_pattern_is_the_one_the_grammar_reads() -> None:
    assert DATE_BOUND == BOUND_PATTERN


def test_only_models_that_sample_under_grammars_get_the_lines_schema() -> None:
    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    assert samples_under_grammar(Grammared([])) and not samples_under_grammar(ScriptedModel([]))


def test_a_constrained_turn_sends_the_lines_schema_and_closes_the_workflow_itself(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.events import OpEvent
    from plangate.store import SQLiteStore

    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    query = {
        "op": "add_step",
        "step": {
            "id": "query",
            "title": "Regions",
            "tool": {
                "name": "db_aggregate",
                "args": {
                    "source": "shop",
                    "measures": [{"agg": "count", "column": "*"}],
                    "group_by": ["regions.name"],
                    "period": None,
                    "filters": [],
                    "order_by": [{"column": "count", "desc": True}],
                    "limit": 10,
                },
            },
        },
    }
    model = Grammared([json.dumps(query) + "\n", "Central, East, North, South and West all have customers."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many customers per region?", SHOP, model=model, store=store)
        ops = [e.op for e in store.events(turn.run_id) if isinstance(e, OpEvent)]
    schema = model.requests[0].response_schema
    assert schema is not None and list(schema.schema) == ["x-lines"]
    assert [op["op"] for op in ops] == ["add_step", "add_step", "done", "final"]
    assert [op.get("by") for op in ops[:3]] == [None, "copilot", "copilot"]
    assert turn.status == "done" and [s.id for s in turn.formula.steps] == ["query", "answer"]  # type: ignore[union-attr]


def test_a_small_models_broken_sentence_about_sound_rows_gives_the_rows_as_the_answer(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    query = {
        "op": "add_step",
        "step": {
            "id": "query",
            "title": "Customers",
            "tool": {
                "name": "db_aggregate",
                "args": {
                    "source": "shop",
                    "measures": [{"agg": "count_distinct", "column": "customers.customer_id"}],
                    "group_by": [],
                    "period": None,
                    "filters": [],
                    "order_by": [],
                    "limit": 1,
                },
            },
        },
    }
    model = Grammared([json.dumps(query) + "\n", "We have 3,014 customers."])  # 300 in the data
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many customers do we have?", SHOP, model=model, store=store)
    [attempt] = turn.attempts  # no retry: the query was right, only its sentence was not
    assert (turn.status, turn.result.rows) == ("partial", [[300]])
    assert "300" in turn.answer and "3,014" not in turn.answer
    [signal] = attempt.review.signals
    assert (signal.kind, signal.severity) == ("answer_from_rows", "degraded")
    assert "3,014 is not in the data" in signal.detail


def test_a_constrained_retry_samples_its_query_and_its_answer_more_freely(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    query = {
        "op": "add_step",
        "step": {
            "id": "query",
            "title": "Regions",
            "tool": {
                "name": "db_aggregate",
                "args": {
                    "source": "shop",
                    "measures": [{"agg": "count", "column": "*"}],
                    "group_by": ["regions.name"],
                    "period": None,
                    "filters": [],
                    "order_by": [{"column": "count", "desc": True}],
                    "limit": 10,
                },
            },
        },
    }
    line = json.dumps(query) + "\n"
    # The first query reads a year the data does not hold: the review asks for a rebuilt workflow.
    empty = dict(query["step"]["tool"]["args"])  # type: ignore[index]
    empty["period"] = {"column": "orders.order_date", "from": "2024", "to": "2024"}
    first = json.dumps({**query, "step": {**query["step"], "tool": {"name": "db_aggregate", "args": empty}}})
    model = Grammared([first + "\n", "There are none.", line, "Every region has customers."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many customers per region in 2024?", SHOP, model=model, store=store)
    assert turn.attempts[0].status != "done" and turn.attempts[1].status == "done"
    assert "no_rows_in_range" in turn.attempts[0].review.kinds()
    assert [(r.purpose, r.temperature) for r in model.requests] == [
        ("copilot", None),
        ("generate", None),
        ("copilot", 0.7),
        ("generate", 0.7),
    ]
