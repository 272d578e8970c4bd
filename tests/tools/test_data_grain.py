"""Aggregation that cannot fan out: a structured query's measure is computed at its own grain whatever the
joins repeat, and equals a hand-written reference query, on Chinook and on the shop data.

The fan trap these tests pin: ``sum(Invoice.Total)`` per genre joined through ``InvoiceLine`` counted each
invoice's total once per line (Rock 7,720.02). A measure of a table whose rows a join repeats is taken over
each of its rows once per group (the invoices that hold a Rock line, each once); money per genre is the
lines' own sum (Rock 826.65).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from plangate.tools.data import (
    AggregateError,
    DataSources,
    QueryLimits,
    SchemaInfo,
    compile_aggregate,
    parse_aggregate,
)
from plangate.tools.data.results import ColumnInfo, ForeignKey, TableInfo
from plangate.tools.sql_guard import check_read_only

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
CHINOOK = DATA / "chinook.sqlite"
SHOP = DATA / "shop.db"
LINES = "FROM InvoiceLine il JOIN Track t ON t.TrackId = il.TrackId JOIN Genre g ON g.GenreId = t.GenreId"


def _schema(path: Path) -> SchemaInfo:
    return DataSources().register(path.stem, path).schema(QueryLimits())


@pytest.fixture(scope="module")
def chinook() -> SchemaInfo:
    return _schema(CHINOOK)


@pytest.fixture(scope="module")
def shop() -> SchemaInfo:
    return _schema(SHOP)


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as connection:
        return sorted(
            tuple(round(c, 6) if isinstance(c, float) else c for c in row) for row in connection.execute(sql)
        )


def _compiled(schema: SchemaInfo, **args: object) -> str:
    sql = compile_aggregate(parse_aggregate({"source": schema.source, **args}), schema).sql
    assert check_read_only(sql, "sqlite").allowed
    return sql


def test_an_invoice_total_summed_per_genre_counts_each_invoice_once_not_once_per_line(
    chinook: SchemaInfo,
) -> None:
    sql = _compiled(chinook, measures=[{"agg": "sum", "column": "Invoice.Total"}], group_by=["Genre.Name"])
    # Each invoice once per genre it holds a line of: the symmetric aggregate, written by hand.
    reference = (
        "SELECT name, sum(total) FROM (SELECT DISTINCT g.Name AS name, i.InvoiceId, i.Total AS total "
        "FROM Invoice i JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId JOIN Track t ON t.TrackId = "
        "il.TrackId JOIN Genre g ON g.GenreId = t.GenreId) GROUP BY name"
    )
    got = _rows(CHINOOK, sql)
    assert got == _rows(CHINOOK, reference)
    fanned = _rows(
        CHINOOK,
        "SELECT g.Name, sum(i.Total) FROM Invoice i JOIN InvoiceLine il USING (InvoiceId)"
        f"{LINES[19:]} GROUP BY g.Name",
    )
    rock = dict(got)["Rock"]
    assert dict(fanned)["Rock"] == pytest.approx(7720.02) and rock < 7720.02  # the fan trap, avoided


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        pytest.param(
            {
                "measures": [
                    {"agg": "sum", "column": "InvoiceLine.UnitPrice", "times": "InvoiceLine.Quantity"}
                ],
                "group_by": ["Genre.Name"],
            },
            f"SELECT g.Name, sum(il.UnitPrice * il.Quantity) {LINES} GROUP BY g.Name",
            id="revenue-per-genre",
        ),
        pytest.param(
            {
                "measures": [
                    {"agg": "sum", "column": "InvoiceLine.UnitPrice", "times": "InvoiceLine.Quantity"}
                ],
                "group_by": ["Artist.Name"],
            },
            "SELECT ar.Name, sum(il.UnitPrice * il.Quantity) FROM InvoiceLine il JOIN Track t ON t.TrackId = "
            "il.TrackId JOIN Album al ON al.AlbumId = t.AlbumId JOIN Artist ar ON ar.ArtistId = al.ArtistId "
            "GROUP BY ar.ArtistId",
            id="revenue-per-artist",
        ),
        pytest.param(
            {"measures": [{"agg": "sum", "column": "Invoice.Total"}], "group_by": ["Customer.Country"]},
            "SELECT c.Country, sum(i.Total) FROM Invoice i JOIN Customer c ON c.CustomerId = i.CustomerId "
            "GROUP BY c.Country",
            id="revenue-per-customer-country",
        ),
        pytest.param(
            {
                "measures": [{"agg": "sum", "column": "Invoice.Total"}],
                "group_by": ["Customer.Country"],
                "filters": [{"column": "Genre.Name", "op": "=", "value": "Rock"}],
            },
            "SELECT c.Country, sum(i.Total) FROM Invoice i JOIN Customer c ON c.CustomerId = i.CustomerId "
            "WHERE i.InvoiceId IN (SELECT il.InvoiceId FROM InvoiceLine il JOIN Track t ON t.TrackId = "
            "il.TrackId JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = 'Rock') GROUP BY c.Country",
            id="invoice-totals-per-country-with-a-line-filter",
        ),
        pytest.param(
            {
                "table": "Invoice",
                "measures": [{"agg": "count", "column": "*"}],
                "group_by": ["Invoice.BillingCountry"],
                "filters": [{"column": "Genre.Name", "op": "=", "value": "Metal"}],
            },
            "SELECT i.BillingCountry, count(*) FROM Invoice i WHERE i.InvoiceId IN (SELECT il.InvoiceId FROM "
            "InvoiceLine il JOIN Track t ON t.TrackId = il.TrackId JOIN Genre g ON g.GenreId = t.GenreId "
            "WHERE g.Name = 'Metal') GROUP BY i.BillingCountry",
            id="invoices-per-country-with-line-level-filters",
        ),
        pytest.param(
            {
                "measures": [
                    {"agg": "count", "column": "Invoice.InvoiceId", "as": "invoices"},
                    {
                        "agg": "sum",
                        "column": "InvoiceLine.UnitPrice",
                        "times": "InvoiceLine.Quantity",
                        "as": "rock",
                    },
                ],
                "group_by": ["Invoice.BillingCountry"],
                "filters": [{"column": "Genre.Name", "op": "=", "value": "Rock"}],
            },
            "SELECT i.BillingCountry, count(DISTINCT i.InvoiceId), sum(il.UnitPrice * il.Quantity) "
            "FROM Invoice i JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId JOIN Track t ON t.TrackId = "
            "il.TrackId JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = 'Rock' GROUP BY 1",
            id="two-grains-in-one-query",
        ),
        pytest.param(
            {"measures": [{"agg": "avg", "column": "Invoice.Total"}], "group_by": ["Genre.Name"]},
            "SELECT name, avg(total) FROM (SELECT DISTINCT g.Name AS name, i.InvoiceId, i.Total AS total "
            "FROM Invoice i JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId JOIN Track t ON t.TrackId = "
            "il.TrackId JOIN Genre g ON g.GenreId = t.GenreId) GROUP BY name",
            id="an-average-at-its-own-grain",
        ),
    ],
)
def test_chinook_measures_equal_a_hand_written_reference(
    chinook: SchemaInfo, args: dict[str, object], reference: str
) -> None:
    assert _rows(CHINOOK, _compiled(chinook, **args)) == _rows(CHINOOK, reference)


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        pytest.param(
            {"measures": [{"agg": "count", "column": "orders.order_id"}], "group_by": ["products.category"]},
            "SELECT p.category, count(DISTINCT i.order_id) FROM order_items i JOIN products p "
            "ON p.product_id = i.product_id GROUP BY p.category",
            id="orders-per-category",
        ),
        pytest.param(
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "group_by": ["regions.name"],
                "filters": [{"column": "products.category", "op": "=", "value": "Electronics"}],
            },
            "SELECT r.name, count(DISTINCT o.order_id) FROM orders o JOIN customers c ON c.customer_id = "
            "o.customer_id JOIN regions r ON r.region_id = c.region_id JOIN order_items i ON i.order_id = "
            "o.order_id JOIN products p ON p.product_id = i.product_id WHERE p.category = 'Electronics' "
            "GROUP BY r.region_id",
            id="orders-per-region-with-a-line-filter",
        ),
        pytest.param(
            {
                "measures": [
                    {"agg": "sum", "column": "order_items.unit_price", "times": "order_items.quantity"}
                ],
                "group_by": ["regions.name"],
                "filters": [{"column": "orders.status", "op": "!=", "value": "cancelled"}],
            },
            "SELECT r.name, sum(i.unit_price * i.quantity) FROM order_items i JOIN orders o ON o.order_id = "
            "i.order_id JOIN customers c ON c.customer_id = o.customer_id JOIN regions r ON r.region_id = "
            "c.region_id WHERE o.status != 'cancelled' GROUP BY r.region_id",
            id="line-revenue-per-region",
        ),
        pytest.param(
            {"measures": [{"agg": "sum", "column": "returns.quantity"}], "group_by": ["orders.channel"]},
            "SELECT o.channel, sum(r.quantity) FROM returns r JOIN order_items i ON i.order_item_id = "
            "r.order_item_id JOIN orders o ON o.order_id = i.order_id GROUP BY o.channel",
            id="a-many-to-one-chain-repeats-nothing",
        ),
    ],
)
def test_shop_measures_equal_a_hand_written_reference(
    shop: SchemaInfo, args: dict[str, object], reference: str
) -> None:
    assert _rows(SHOP, _compiled(shop, **args)) == _rows(SHOP, reference)


def test_a_query_no_join_repeats_is_compiled_as_before(shop: SchemaInfo) -> None:
    sql = _compiled(
        shop,
        measures=[{"agg": "sum", "column": "order_items.quantity"}],
        group_by=["products.category"],
        order_by=[{"column": "sum", "desc": True}],
        limit=2,
    )
    assert "DISTINCT" not in sql and sql.startswith('SELECT "products"."category", SUM(')


def test_the_compiled_query_says_which_measures_it_kept_at_their_grain(chinook: SchemaInfo) -> None:
    compiled = compile_aggregate(
        parse_aggregate(
            {
                "source": "chinook",
                "measures": [{"agg": "sum", "column": "Invoice.Total", "as": "total"}],
                "group_by": ["Genre.Name"],
                "order_by": [{"column": "total", "desc": True}],
                "limit": 3,
            }
        ),
        chinook,
    )
    assert compiled.grains == {"total": "once per Invoice row: the join to InvoiceLine repeats its rows"}
    assert compiled.columns == ["Name", "total"]
    assert [row[0] for row in _rows(CHINOOK, compiled.sql)] == sorted(["Rock", "Latin", "Alternative & Punk"])


def test_a_product_across_a_one_to_many_join_has_no_grain_and_is_refused(chinook: SchemaInfo) -> None:
    # A line's quantity times its invoice's total has a grain (the line); a track's length times an
    # invoice's total has none: each is on the "one" side of the lines that join them.
    _compiled(chinook, measures=[{"agg": "sum", "column": "Invoice.Total", "times": "InvoiceLine.Quantity"}])
    with pytest.raises(AggregateError, match=r"measures\[0\]: Track and Invoice are joined one-to-many"):
        _compiled(
            chinook, measures=[{"agg": "sum", "column": "Track.Milliseconds", "times": "Invoice.Total"}]
        )


def test_ordering_by_a_column_that_is_no_group_is_refused_when_measures_keep_their_grain(
    chinook: SchemaInfo,
) -> None:
    with pytest.raises(
        AggregateError, match=r"order_by\[0\]\.column: order by a group_by column or a measure"
    ):
        _compiled(
            chinook,
            measures=[{"agg": "sum", "column": "Invoice.Total"}],
            group_by=["Genre.Name"],
            order_by=[{"column": "Invoice.InvoiceDate"}],
        )


def test_a_repeated_table_without_a_primary_key_cannot_be_counted_once() -> None:
    schema = SchemaInfo(
        "s",
        "sqlite",
        [
            TableInfo("head", "table", [ColumnInfo("id", "INTEGER"), ColumnInfo("amount", "REAL")]),
            TableInfo(
                "line",
                "table",
                [ColumnInfo("line_id", "INTEGER", primary_key=True), ColumnInfo("head_id", "INTEGER")],
                [ForeignKey("head_id", "head", "id")],
            ),
        ],
    )
    with pytest.raises(AggregateError, match="head, which has no primary key"):
        compile_aggregate(
            parse_aggregate(
                {
                    "source": "s",
                    "measures": [{"agg": "sum", "column": "head.amount"}],
                    "group_by": ["line.line_id"],
                }
            ),
            schema,
        )


def test_postgres_joins_the_grains_null_safely(chinook: SchemaInfo) -> None:
    pg = SchemaInfo("chinook", "postgres", chinook.tables)
    sql = compile_aggregate(
        parse_aggregate(
            {
                "source": "chinook",
                "measures": [
                    {"agg": "count", "column": "Invoice.InvoiceId"},
                    {"agg": "sum", "column": "InvoiceLine.UnitPrice"},
                ],
                "group_by": ["Genre.Name"],
            }
        ),
        pg,
    ).sql
    assert 'IS NOT DISTINCT FROM "_p1"."_g0"' in sql
    assert check_read_only(sql, "postgres").allowed
