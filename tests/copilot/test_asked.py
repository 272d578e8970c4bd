"""What a question asks to compute (``plangate.copilot._asked``), rule by rule, on the bundled databases; and
the grammar of the constrained path holding it: every stream a small model may write computes what the
question's words say (the aggregate, what is counted or summed, one value or one per group, the ranking)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plangate.copilot._ops import OpReader
from plangate.copilot._scope import Scope, open_scope
from plangate.copilot.small._asked import Asked, asked
from plangate.copilot.small._constrained import op_lines_schema, question_hints
from plangate.models._grammar import grammar_schema, schema_to_gbnf
from plangate.tools.data import SchemaInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from test_local_grammar import sentences

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture(scope="module")
def shop() -> Scope:
    return open_scope(DATA / "shop.db", categories=True)


@pytest.fixture(scope="module")
def chinook() -> Scope:
    return open_scope(DATA / "chinook.sqlite", categories=True)


def _asked(question: str, schema: SchemaInfo) -> Asked:
    return asked(question, schema)


# -- the aggregate and what it reads -------------------------------------------------------------------------


def test_how_many_x_counts_the_key_of_the_first_table_it_names(shop: Scope, chinook: Scope) -> None:
    assert _asked("How many customers do we have?", shop.schema).counted == ("customers.customer_id",)
    assert _asked("How many customers do we have?", shop.schema).aggs == ("count_distinct",)
    # "orders" is named first: whole table names before partial ones (orders, not order_items)
    found = _asked("How many orders did customers in the North region place in 2025?", shop.schema)
    assert found.counted == ("orders.order_id",)
    assert _asked("How many invoices went out in March 2022?", chinook.schema).counted == (
        "Invoice.InvoiceId",
    )
    # a singular and a past form name the table too
    assert _asked("How many return requests were logged?", shop.schema).counted == ("returns.return_id",)
    # nothing named: either count, of anything
    unnamed = _asked("How many people did we hire in 2024?", chinook.schema)
    assert (unnamed.aggs, unnamed.counted) == (("count", "count_distinct"), ())


def test_units_are_summed_quantities(shop: Scope) -> None:
    found = _asked("What's the total number of units we've sold?", shop.schema)
    assert found.aggs == ("sum",) and set(found.measured) == {"order_items.quantity", "returns.quantity"}
    # the table the question names decides between them
    returned = _asked("For each product category, how many units were returned?", shop.schema)
    assert returned.measured == ("returns.quantity",)
    assert _asked("What are our five best-selling products by units?", shop.schema).aggs == ("sum",)


def test_revenue_is_a_lines_price_times_its_quantity_or_a_total(shop: Scope, chinook: Scope) -> None:
    found = _asked("Which 3 regions had the highest revenue in 2025?", shop.schema)
    # never the list price of products beside the order lines' prices
    assert (found.aggs, found.measured, found.times) == (
        ("sum",),
        ("order_items.unit_price",),
        ("order_items.quantity",),
    )
    spent = _asked("Which five countries have spent the most with us?", chinook.schema)
    assert spent.measured == ("Invoice.Total", "InvoiceLine.UnitPrice")
    assert spent.times == ("InvoiceLine.Quantity",)
    assert _asked("How much did we invoice in 2023?", chinook.schema).aggs == ("sum",)


def test_an_average_reads_the_columns_the_question_names(shop: Scope, chinook: Scope) -> None:
    found = _asked("What's the average list price of our Electronics products?", shop.schema)
    assert found.aggs == ("avg",) and "products.unit_price" in found.measured
    assert _asked("What does an average invoice come to?", chinook.schema).measured == ("Invoice.Total",)


def test_the_most_x_counts_x_and_the_most_expensive_thing_counts_nothing(shop: Scope, chinook: Scope) -> None:
    assert _asked("Which three artists have the most albums?", chinook.schema).counted == ("Album.AlbumId",)
    assert _asked("Which product gets the most return requests?", shop.schema).counted == (
        "returns.return_id",
    )
    assert _asked("What's the most expensive product we sell?", shop.schema).aggs == ()


def test_a_category_value_in_the_question_is_no_instruction(chinook: Scope) -> None:
    question = "Which sales support agent has the most customers assigned?"
    assert _asked(question, chinook.schema).aggs == ("sum",)  # "sales", read as money
    ignoring = asked(question, chinook.schema, ignore=("Sales Support Agent",))
    assert ignoring.counted == ("Customer.CustomerId",)


# -- one value or one per group, the ranking ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "grouped", "desc", "limit"),
    [
        ("How many customers do we have?", False, None, None),
        ("What was net revenue in the first quarter of 2026?", False, None, None),
        ("How many orders came in through each sales channel?", True, None, None),
        ("Break our customers down by segment.", True, None, None),
        ("Show me order counts month by month for 2025.", True, None, None),
        ("Which 3 regions had the highest revenue in 2025?", True, True, 3),
        ("What are our five best-selling products by units?", True, True, 5),
        ("Rank the top 3 product categories by 2026 net revenue", True, True, 3),
        ("Which customer account has placed the most orders?", True, True, 1),
        ("Which products sold best in the third quarter of 2026?", True, True, None),
        ("Which region had the fewest orders?", True, False, 1),
    ],
)
def test_groups_rankings_and_their_size(
    shop: Scope, question: str, grouped: bool, desc: bool | None, limit: int | None
) -> None:
    found = _asked(question, shop.schema)
    assert (found.grouped, found.desc, found.limit) == (grouped, desc, limit)


def test_a_value_the_question_leaves_out_is_negated(shop: Scope) -> None:
    hints = question_hints(
        "What's the total number of units we've sold, leaving cancelled orders aside?",
        shop.categories,
        shop.schema,
    )
    assert ("orders.status", "cancelled") in hints.mentions and hints.negated == {"cancelled"}
    kept = question_hints("How many orders ended up cancelled?", shop.categories, shop.schema)
    assert kept.negated == frozenset()
    without = question_hints("Revenue in 2025, not counting cancelled orders", shop.categories, shop.schema)
    assert without.negated == {"cancelled"}


# -- the grammar holds it ----------------------------------------------------------------------------------


def _streams(scope: Scope, question: str, n: int = 80) -> list[dict[str, object]]:
    hints = question_hints(question, scope.categories, scope.schema)
    grammar = schema_to_gbnf(grammar_schema(op_lines_schema(scope.schema, hints)))
    found = []
    for text in sentences(grammar, n, seed=len(question)):
        reader = OpReader()
        [op] = [*reader.feed(text), *reader.close()]
        found.append(op.fields["step"]["tool"]["args"])  # type: ignore[index, call-overload]
    return found


def test_every_stream_for_one_count_counts_it_and_groups_nothing(shop: Scope) -> None:
    for args in _streams(shop, "How many customers do we have?"):
        assert args["measures"] == [{"agg": "count_distinct", "column": "customers.customer_id"}]
        assert (args["group_by"], args["order_by"], args["limit"]) == ([], [], 1)


def test_every_stream_for_the_demo_question_ranks_revenue_per_group(shop: Scope) -> None:
    for args in _streams(shop, "Which 3 regions had the highest revenue in 2025?"):
        assert args["measures"] == [
            {"agg": "sum", "column": "order_items.unit_price", "times": "order_items.quantity"}
        ]
        assert args["group_by"] == ["regions.name"]
        assert args["order_by"] == [{"column": "sum", "desc": True}] and args["limit"] == 3
        assert args["period"] == {"column": "orders.order_date", "from": "2025", "to": "2025"}


def test_every_stream_for_units_not_cancelled_filters_them_out(shop: Scope) -> None:
    question = "What's the total number of units we've sold, leaving cancelled orders aside?"
    for args in _streams(shop, question):
        assert args["filters"] == [{"column": "orders.status", "op": "!=", "value": "cancelled"}]
        assert args["measures"][0]["agg"] == "sum"  # type: ignore[index]


def test_a_total_or_a_lines_price_times_its_quantity_and_never_another_product(chinook: Scope) -> None:
    measures = {
        str(args["measures"])
        for args in _streams(chinook, "Which five countries have spent the most with us?")
    }
    assert measures <= {
        str([{"agg": "sum", "column": "Invoice.Total"}]),
        str([{"agg": "sum", "column": "InvoiceLine.UnitPrice", "times": "InvoiceLine.Quantity"}]),
    }


def test_the_narrowed_grammar_compiles_in_llama_cpp(shop: Scope, chinook: Scope) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    for scope, question in (
        (shop, "Which 3 regions had the highest revenue in 2025?"),
        (chinook, "Which five countries have spent the most with us?"),
        (shop, "How many customers do we have?"),
    ):
        hints = question_hints(question, scope.categories, scope.schema)
        LlamaGrammar.from_string(
            schema_to_gbnf(grammar_schema(op_lines_schema(scope.schema, hints))), verbose=False
        )
