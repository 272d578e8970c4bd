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
from plangate.copilot._generate import _op_of
from plangate.copilot._ops import Draft, OpReader
from plangate.copilot._periods import asked_period
from plangate.copilot._scope import Scope, open_scope
from plangate.copilot._strategy import samples_under_grammar
from plangate.copilot.small._constrained import (
    Hints,
    closing_ops,
    linked_columns,
    op_lines_schema,
    period_bounds,
    question_hints,
)
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


def test_the_rows_given_as_the_answer_show_fractions_rounded_as_a_person_reads_them(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    revenue = {"agg": "sum", "column": "order_items.unit_price", "times": "order_items.quantity"}
    query = {
        "op": "add_step",
        "step": {
            "id": "query",
            "title": "Revenue per region",
            "tool": {
                "name": "db_aggregate",
                "args": {
                    "source": "shop",
                    "measures": [revenue],
                    "group_by": ["regions.name"],
                    "period": {"column": "orders.order_date", "from": "2025", "to": "2025"},
                    "filters": [],
                    "order_by": [{"column": "sum_unit_price_x_quantity", "desc": True}],
                    "limit": 3,
                },
            },
        },
    }
    model = Grammared([json.dumps(query) + "\n", "East had 13.28 million."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("Which 3 regions had the highest revenue in 2025?", SHOP, model=model, store=store)
    assert turn.status == "partial" and turn.result.rows[0] == ["East", 1328137.929999979]
    assert turn.answer.splitlines()[1] == "East | 1,328,137.93"  # not the float's 1328137.929999979
    assert [s.kind for s in turn.attempts[0].review.signals] == ["answer_from_rows"]
    # the answer step was shown the rows rounded the same way, not the floats
    prompt = model.requests[1].messages[-1].content
    assert "East | 1,328,137.93" in prompt and "1328137.929999979" not in prompt


def test_a_cell_is_shown_rounded_only_where_it_is_a_fraction() -> None:
    from plangate.copilot._run import shown_cell

    assert [shown_cell(v) for v in (0.30000000000000004, 0.05, 2.0, 300, None, 1e-07)] == [
        "0.3",
        "0.05",
        "2.0",
        "300",
        "NULL",
        "1e-07",
    ]


def _grammared(responses: list[str]) -> ScriptedModel:
    class Grammared(ScriptedModel):
        def grammar_text(self, request: object) -> str:
            return ""

    return Grammared(responses)


def _query_line(source: str, **args: object) -> str:
    step = {"id": "query", "title": "The query", "tool": {"name": "db_aggregate", "args": {"source": source}}}
    step["tool"]["args"].update({"group_by": [], "period": None, "filters": [], "order_by": [], **args})  # type: ignore[index]
    return json.dumps({"op": "add_step", "step": step}) + "\n"


def test_a_period_the_data_does_not_cover_is_answered_so_not_with_a_figure(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    line = _query_line(
        "shop",
        measures=[{"agg": "count_distinct", "column": "orders.order_id"}],
        period={"column": "orders.order_date", "from": "2024", "to": "2024"},
        limit=1,
    )
    model = _grammared([line, "There were 52 orders.", line, "There were 0 orders in 2024."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many orders did we get in 2024?", SHOP, model=model, store=store)
    assert turn.result.rows == [[0]] and turn.status == "partial"
    assert turn.answer == (
        "The data holds nothing for the period asked: the question asks about 2024-01-01 to 2024-12-31, but "
        "orders.order_date has rows from 2025-01-01 to 2026-06-30."
    )
    for attempt in turn.attempts:  # the retry read the same period: the same answer, no "0 orders"
        assert attempt.review.kinds() == ["no_rows_in_range", "no_data_in_range"]
        assert attempt.answer == turn.answer


def test_rows_beyond_those_shown_are_counted_without_failing_the_number_guard(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    chinook = SHOP.with_name("chinook.sqlite")
    line = _query_line(
        "chinook",
        measures=[{"agg": "count", "column": "*"}],
        group_by=["Invoice.BillingCountry"],
        order_by=[{"column": "count", "desc": True}],
        limit=100,
    )
    model = _grammared([line, "There are 999 countries.", line, "There are 999 countries."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many invoices were billed to each country?", chinook, model=model, store=store)
    assert len(turn.result.rows) == 24 and turn.status == "partial" and len(turn.attempts) == 1
    assert turn.answer.splitlines()[-1] == "… 24 rows in all" and "999" not in turn.answer
    assert turn.attempts[0].review.kinds() == ["answer_from_rows"]


def test_a_small_models_list_that_leaves_out_a_row_gives_the_rows_as_the_answer(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    line = _query_line(
        "chinook",
        measures=[{"agg": "sum", "column": "Invoice.Total"}],
        group_by=["Invoice.BillingCountry"],
        order_by=[{"column": "sum_Total", "desc": True}],
        limit=5,
    )
    chinook = SHOP.with_name("chinook.sqlite")
    written = "The five countries that spent the most are France, Germany, Brazil, and Canada."  # not USA
    model = _grammared([line, written])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("Which 5 countries spent the most?", chinook, model=model, store=store)
    assert [row[0] for row in turn.result.rows] == ["USA", "Canada", "France", "Brazil", "Germany"]
    assert turn.status == "partial" and turn.answer.splitlines()[1].startswith("USA | ")
    [signal] = turn.attempts[0].review.signals
    assert signal.kind == "answer_from_rows" and "it leaves out USA" in signal.detail


def test_a_small_models_sentence_that_does_not_state_the_one_value_gives_the_value(tmp_path: Path) -> None:
    from plangate.copilot import ask
    from plangate.store import SQLiteStore

    line = _query_line(
        "shop", measures=[{"agg": "count_distinct", "column": "customers.customer_id"}], limit=1
    )
    # "1" passes the number guard (the result has 1 row, the limit is 1) but it is not the 300 counted
    model = _grammared([line, "The answer to this question is 1."])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many customers do we have?", SHOP, model=model, store=store)
    assert turn.status == "partial" and turn.answer.splitlines()[1] == "300"
    [signal] = turn.attempts[0].review.signals
    assert signal.kind == "answer_from_rows" and "it does not state the 300" in signal.detail


def test_a_one_value_answer_states_it_as_any_rounding_and_an_echoed_prompt_is_markup() -> None:
    from plangate.copilot._numbers import Known
    from plangate.copilot._review import answer_signals
    from plangate.copilot.small._answer import missed_value

    assert missed_value("We have 300 customers.", [[300]]) is None
    assert missed_value("About 1.33 million.", [[1328137.929999979]]) is None
    assert missed_value("Sales were 469.58.", [[469.580000000003]]) is None
    assert missed_value("It is 1.", [[300]]) == "300"
    assert missed_value("Nothing", [["text"]]) is None and missed_value("2", [[1, 2]]) is None
    known = Known()
    known.add_values([2574])
    assert [s.kind for s in answer_signals("2574\nQuestion: How many orders?", known)] == ["leaked_markup"]
    assert answer_signals("The question: how many? 2574.", known) == []


def test_a_sentence_states_a_cell_by_name_or_by_a_rounding_of_its_number() -> None:
    from plangate.copilot.small._answer import _sentence_misses_rows, states_a_cell

    rows: list[list[object]] = [["Jane Peacock", 21], ["Margaret Park", 20]]
    vague = "The most customer support agents have the most customers assigned."
    assert not states_a_cell(vague, rows)  # type: ignore[arg-type]
    assert [s.detail for s in _sentence_misses_rows(vague, rows)] == ["it states nothing the rows hold"]  # type: ignore[arg-type]
    assert states_a_cell("Jane Peacock has the most.", rows)  # type: ignore[arg-type]
    assert states_a_cell("The top agent has 21 customers.", rows)  # type: ignore[arg-type]
    assert _sentence_misses_rows("Nothing here.", [[0]]) == []  # no data: the no-data answer's business


def test_an_answer_naming_every_row_or_none_of_them_leaves_nothing_out() -> None:
    from plangate.copilot.small._answer import omitted_labels

    rows: list[list[object]] = [["USA", 1.0], ["Canada", 2.0], ["United Kingdom", 3.0]]
    assert omitted_labels("USA, Canada and the United Kingdom.", rows) == []  # type: ignore[arg-type]
    assert omitted_labels("Three countries, led by the first.", rows) == []  # type: ignore[arg-type]
    assert omitted_labels("usa and canada", rows) == ["United Kingdom"]  # type: ignore[arg-type]


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
    model = Grammared(
        [first + "\n", "There are none.", line, "East, West, South, North and Central all have customers."]
    )
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask("How many customers per region in 2024?", SHOP, model=model, store=store)
    assert turn.attempts[0].status != "done"
    assert "no_rows_in_range" in turn.attempts[0].review.kinds()
    # The retry counts every customer, leaving the year out: its figure is not what was asked, and says so.
    assert turn.attempts[1].status == "partial" and turn.attempts[1].review.kinds() == ["query_shape"]
    assert "names 2024-01-01 to 2024-12-31, but no date bound" in turn.attempts[1].reason
    assert [(r.purpose, r.temperature) for r in model.requests] == [
        ("copilot", None),
        ("generate", None),
        ("copilot", 0.7),
        ("generate", 0.7),
    ]


def test_the_grammar_offers_the_metric_a_question_names_when_it_agrees_with_its_definition() -> None:
    shop = open_scope(SHOP, categories=True)
    assert shop.semantic is not None

    def offered(question: str) -> tuple[tuple[str, ...], str]:
        hints = question_hints(question, shop.categories, shop.schema, shop.semantic)
        return hints.metrics, json.dumps(op_lines_schema(shop.schema, hints, shop.semantic))

    metrics, grammar = offered("What was our revenue in May 2026?")
    assert metrics == ("revenue",) and '"metric": {"enum": ["revenue"]}' in grammar
    assert '"times"' not in grammar  # the metric is the one measure offered
    # It leaves cancelled orders out: a question that counts them in gets the columns instead.
    metrics, grammar = offered("What was revenue in 2025, cancelled orders included?")
    assert metrics == () and '"metric"' not in grammar
    assert offered("Revenue in 2025, leaving cancelled orders aside")[0] == ("revenue",)
    # Not named, or another figure (an average is not a sum): no metric.
    assert offered("How many orders per channel?")[0] == ()
    assert offered("What is the average revenue per order line?")[0] == ()


def test_a_value_counted_in_is_no_filter_and_a_code_in_capitals_is_matched_as_written(
    chinook_scope: Scope, shop_with_categories: Scope
) -> None:
    hints = question_hints(
        "Total units in Q4 2025, counting cancelled orders too?", shop_with_categories.categories
    )
    assert hints.mentions == []
    hints = question_hints("How many orders were cancelled?", shop_with_categories.categories)
    assert hints.mentions == [("orders.status", "cancelled")]
    chinook = open_scope(chinook_scope.source.describe(), categories=True)
    spent = question_hints("How much have customers spent on Rock tracks?", chinook.categories)
    assert ("Customer.State", "ON") not in spent.mentions and ("Genre.Name", "Rock") in spent.mentions
    assert ("Customer.State", "ON") in question_hints(
        "How many customers are in ON?", chinook.categories
    ).mentions
