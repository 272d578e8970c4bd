"""Structured queries: names resolved against the real schema, joins found along foreign keys, SQL built by
sqlglot in the source's dialect, and a JSON schema whose enums are the source's tables and columns."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import jsonschema
import pytest

from plangate.tools import ToolRegistry
from plangate.tools.data import (
    AggregateError,
    DataSources,
    QueryLimits,
    SchemaInfo,
    compile_aggregate,
    data_tools,
    parse_aggregate,
    source_parameters,
)
from plangate.tools.data.aggregate_schema import source_properties
from plangate.tools.data.results import ColumnInfo, ForeignKey, TableInfo
from plangate.tools.sql_guard import check_read_only

CHINOOK = Path(__file__).resolve().parents[2] / "examples" / "data" / "chinook.sqlite"


@pytest.fixture(scope="module")
def shop(shop_db: Path) -> tuple[DataSources, SchemaInfo]:
    sources = DataSources()
    sources.register("shop", shop_db)
    return sources, sources.get("shop").schema(QueryLimits())


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


def _compile(schema: SchemaInfo, **args: object) -> str:
    return compile_aggregate(parse_aggregate({"source": "shop", **args}), schema).sql


def test_joins_follow_foreign_keys_and_the_rows_match_hand_written_sql(
    shop: tuple[DataSources, SchemaInfo], shop_db: Path
) -> None:
    _, schema = shop
    compiled = compile_aggregate(
        parse_aggregate(
            {
                "source": "shop",
                "table": "order_items",
                "measures": [
                    {
                        "agg": "sum",
                        "column": "order_items.unit_price",
                        "times": "order_items.quantity",
                        "as": "revenue",
                    }
                ],
                "group_by": ["regions.name"],
                "period": {"column": "orders.order_date", "from": "2025", "to": "2025-06"},
                "order_by": [{"column": "revenue", "desc": True}],
                "limit": 3,
            }
        ),
        schema,
    )
    assert compiled.tables == ["order_items", "orders", "customers", "regions"]
    assert compiled.columns == ["name", "revenue"] and compiled.period_column == "orders.order_date"
    assert check_read_only(compiled.sql, "sqlite").allowed
    hand = (
        "SELECT r.name, sum(i.unit_price * i.quantity) AS revenue FROM order_items i JOIN orders o "
        "USING (order_id) "
        "JOIN customers c USING (customer_id) JOIN regions r USING (region_id) WHERE o.order_date >= "
        "'2025-01-01' "
        "AND o.order_date < '2025-07-01' GROUP BY r.name ORDER BY revenue DESC LIMIT 3"
    )
    assert _rows(shop_db, compiled.sql) == _rows(shop_db, hand)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            {"table": "orders", "measures": [{"agg": "count", "column": "*"}]},
            'SELECT COUNT(*) AS "count" FROM "orders"',
        ),
        (
            {"table": "orders", "measures": [{"agg": "count_distinct", "column": "customer_id"}]},
            'COUNT(DISTINCT "orders"."customer_id") AS "count_distinct_customer_id"',
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "filters": [{"column": "status", "op": "in", "value": ["cancelled", "shipped"]}],
            },
            "\"orders\".\"status\" IN ('cancelled', 'shipped')",
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "filters": [{"column": "status", "op": "not in", "value": ["cancelled"]}],
            },
            'NOT "orders"."status" IN (\'cancelled\')',
        ),
        (
            {
                "table": "order_items",
                "measures": [{"agg": "max", "column": "discount"}],
                "filters": [
                    {"column": "discount", "op": ">=", "value": 0.1},
                    {"column": "order_id", "op": "is not null"},
                ],
            },
            '"order_items"."discount" >= 0.1 AND NOT "order_items"."order_id" IS NULL',
        ),
        ({"table": "orders", "group_by": ["channel"]}, 'SELECT DISTINCT "orders"."channel" FROM "orders"'),
        ({"measures": [{"agg": "avg", "column": "products.unit_price"}]}, 'FROM "products"'),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "period": {"column": "order_date", "from": "2025-03-14"},
            },
            '"orders"."order_date" >= \'2025-03-14\'',
        ),
    ],
)
def test_each_part_of_a_query_compiles_to_sql(
    shop: tuple[DataSources, SchemaInfo], args: dict[str, object], fragment: str
) -> None:
    sources, schema = shop
    sql = _compile(schema, **args)
    assert fragment in sql
    sources.get("shop").query(sql, QueryLimits())  # and it runs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"table": "order", "measures": [{"agg": "count", "column": "*"}]},
            "table: unknown table 'order' (did you mean 'orders'?)",
        ),
        (
            {"table": "orders", "measures": [{"agg": "count", "column": "*"}], "group_by": ["chanel"]},
            "group_by[0]: unknown column 'chanel' (did you mean 'channel'?)",
        ),
        (
            {"table": "orders", "measures": [{"agg": "sum", "column": "orders.totl"}]},
            "measures[0].column: unknown column 'orders.totl'",
        ),
        (
            {"table": "orders", "measures": [{"agg": "sum", "column": "status"}]},
            "measures[0].column: sum needs a number column; orders.status is TEXT",
        ),
        (
            {"table": "orders", "measures": [{"agg": "avg", "column": "*"}]},
            "measures[0].column: '*' counts rows: it needs agg 'count', not 'avg'",
        ),
        ({"table": "customers", "measures": [{"agg": "count", "column": "*"}], "group_by": ["name"]}, None),
        (
            {"table": "orders", "measures": [{"agg": "count", "column": "*"}], "group_by": ["name"]},
            "group_by[0]: column 'name' is in several tables: write customers.name or products.name "
            "or regions.name",
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "period": {"column": "order_date", "from": "2025-13", "to": "2025"},
            },
            "period: period.from: '2025-13' is not a date (month must be in 1..12)",
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "period": {"column": "order_date", "from": "2026", "to": "2025"},
            },
            "period: period: 'to' (2025) is before 'from' (2026)",
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "order_by": [{"column": "sum"}],
            },
            "order_by[0].column: no measure uses 'sum'; order by a measure (count) or a column",
        ),
        (
            {"table": "orders", "measures": []},
            "measures: give at least one measure (or group_by columns to list)",
        ),
        (
            {"table": "orders", "measures": [{"agg": "median", "column": "*"}]},
            "measures.0.agg: Input should be",
        ),
        (
            {
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "filters": [{"column": "status", "op": "=", "value": None}],
            },
            "filters[0].value: '=' needs a number or a text, got None",
        ),
    ],
)
def test_a_query_that_does_not_fit_the_schema_names_the_closest_real_name(
    shop: tuple[DataSources, SchemaInfo], args: dict[str, object], message: str | None
) -> None:
    _, schema = shop
    if message is None:
        _compile(schema, **args)  # the base table's own column wins over other tables'
        return
    with pytest.raises(AggregateError) as raised:
        _compile(schema, **args)
    assert str(raised.value).startswith(message)


def _island_schema(dialect: str = "sqlite") -> SchemaInfo:
    return SchemaInfo(
        "x",
        dialect,
        [
            TableInfo(
                "sales",
                "table",
                [
                    ColumnInfo("id", "INTEGER", primary_key=True),
                    ColumnInfo("store_id", "INTEGER"),
                    ColumnInfo("Amount", "numeric"),
                    ColumnInfo("sold_on", "date"),
                ],
                [ForeignKey("store_id", "stores", "id")],
            ),
            TableInfo(
                "stores", "table", [ColumnInfo("id", "INTEGER", primary_key=True), ColumnInfo("City", "text")]
            ),
            TableInfo(
                "island", "table", [ColumnInfo("id", "INTEGER", primary_key=True), ColumnInfo("v", "text")]
            ),
        ],
    )


@pytest.mark.parametrize(
    ("args", "gold"),
    [
        (
            {
                "measures": [{"agg": "count", "column": "*"}],
                "period": {"column": "orders.order_date", "from": "2025", "to": "2025"},
            },
            "SELECT COUNT(*) FROM orders WHERE order_date >= '2025-01-01' AND order_date < '2026-01-01'",
        ),
        (
            {
                "measures": [{"agg": "count", "column": "*"}],
                "filters": [{"column": "orders.status", "op": "=", "value": "cancelled"}],
            },
            "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'",
        ),
    ],
)
def test_rows_counted_with_no_table_are_those_of_the_table_a_filter_or_the_period_names(
    shop: tuple[DataSources, SchemaInfo], shop_db: Path, args: dict[str, object], gold: str
) -> None:
    sources, schema = shop
    compiled = compile_aggregate(parse_aggregate({"source": "shop", **args}), schema)
    assert compiled.tables == ["orders"]
    found = sources.get("shop").query(compiled.sql, QueryLimits())
    assert [tuple(row) for row in found.rows] == _rows(shop_db, gold)


def test_tables_no_foreign_key_joins_are_an_error() -> None:
    with pytest.raises(AggregateError, match="no foreign key joins 'sales' to 'island'"):
        compile_aggregate(
            parse_aggregate(
                {
                    "source": "x",
                    "table": "sales",
                    "measures": [{"agg": "count", "column": "*"}],
                    "group_by": ["island.v"],
                }
            ),
            _island_schema(),
        )


def test_postgres_gets_its_own_dialect_with_quoted_case_kept() -> None:
    compiled = compile_aggregate(
        parse_aggregate(
            {
                "source": "x",
                "table": "sales",
                "measures": [{"agg": "sum", "column": "Amount", "as": "total"}],
                "group_by": ["stores.City"],
                "period": {"column": "sold_on", "from": "2024", "to": "2024"},
                "order_by": [{"column": "total", "desc": True}],
                "limit": 5,
            }
        ),
        _island_schema("postgres"),
    )
    assert compiled.sql == (
        'SELECT "stores"."City", SUM("sales"."Amount") AS "total" FROM "sales" JOIN "stores" ON '
        '"sales"."store_id" = "stores"."id" WHERE "sales"."sold_on" >= \'2024-01-01\' AND '
        '"sales"."sold_on" < '
        '\'2025-01-01\' GROUP BY "stores"."City" ORDER BY "total" DESC NULLS LAST LIMIT 5'
    )
    assert check_read_only(compiled.sql, "postgres").allowed


def test_the_json_schema_lists_the_real_tables_and_columns(shop: tuple[DataSources, SchemaInfo]) -> None:
    _, schema = shop
    parameters = source_parameters(schema)
    properties = parameters["properties"]
    assert isinstance(properties, dict)
    assert properties["table"] == {
        "enum": ["customers", "order_items", "orders", "products", "regions", "returns"]
    }
    columns = properties["group_by"]["items"]["enum"]  # type: ignore[index]
    assert (
        "orders.order_date" in columns and "channel" in columns and "name" not in columns
    )  # name is ambiguous
    valid = {
        "source": "shop",
        "table": "orders",
        "measures": [{"agg": "count", "column": "*"}],
        "group_by": ["orders.channel"],
    }
    jsonschema.validate(valid, parameters)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**valid, "group_by": ["orders.chanel"]}, parameters)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**valid, "table": "order"}, parameters)


def test_the_grammar_form_offers_only_qualified_names_and_number_columns_to_sum(
    shop: tuple[DataSources, SchemaInfo],
) -> None:
    _, schema = shop
    properties = source_properties(schema, grammar=True)
    assert "table" not in properties
    counting, *summing = properties["measures"]["items"]["anyOf"]  # type: ignore[index]
    per_table = {option["properties"]["column"]["enum"][0].split(".")[0]: option for option in summing}
    items = per_table["order_items"]["properties"]
    assert "order_items.unit_price" in items["column"]["enum"]
    assert "order_items.order_id" not in items["column"]["enum"]  # a key is no number to sum
    # A product of two columns stays at one grain: an order line's price times its own quantity.
    assert items["times"]["enum"] == items["column"]["enum"]
    assert all(name.startswith("order_items.") for name in items["times"]["enum"])
    # count of '*' names no table: the grammar counts a real column instead.
    assert "*" not in counting["properties"]["column"]["enum"]
    assert all("." in name for name in properties["group_by"]["items"]["enum"])  # type: ignore[index]


def test_the_grammar_form_ties_the_ordering_to_the_measure_written(
    shop: tuple[DataSources, SchemaInfo],
) -> None:
    _, schema = shop
    variants = source_parameters(schema, grammar=True)["anyOf"]
    assert isinstance(variants, list)
    for variant in variants:
        fields = variant["properties"]  # type: ignore[index]
        measure = fields["measures"]["items"]["properties"]
        [named] = (measure.get("metric") or measure["agg"])["enum"]
        assert fields["order_by"]["items"]["properties"]["column"]["enum"] == [named]
        assert fields["measures"]["maxItems"] == 1
    kinds = {v["properties"]["measures"]["items"]["properties"]["agg"]["enum"][0] for v in variants}  # type: ignore[index]
    assert kinds == {"count", "count_distinct", "min", "max", "sum", "avg"}


def _registry(shop_db: Path) -> ToolRegistry:
    sources = DataSources()
    sources.register("shop", shop_db)
    return ToolRegistry(data_tools(sources))


def test_the_tool_runs_the_compiled_query_and_returns_rows_and_sql(shop_db: Path) -> None:
    result = asyncio.run(
        _registry(shop_db).call(
            "db_aggregate",
            {
                "source": "shop",
                "table": "orders",
                "measures": [{"agg": "count", "column": "*", "as": "n"}],
                "group_by": ["orders.channel"],
                "order_by": [{"column": "orders.channel"}],
            },
        )
    )
    assert result.status == "done" and result.summary == "4 rows"
    assert isinstance(result.data, dict)
    assert result.data["columns"] == ["channel", "n"]
    assert result.data["rows"] == [
        list(r) for r in _rows(shop_db, "SELECT channel, count(*) FROM orders GROUP BY 1 ORDER BY 1")
    ]
    assert str(result.data["sql"]).startswith('SELECT "orders"."channel", COUNT(*) AS "n"')
    shown = str(result.data["shown"]).splitlines()
    assert shown[0] == "channel | n" and len(shown) == 5
    assert shown[1] == f"{result.data['rows'][0][0]} | {result.data['rows'][0][1]}"  # type: ignore[index]


def test_the_tools_shown_rows_round_fractions_as_read(shop_db: Path) -> None:
    result = asyncio.run(
        _registry(shop_db).call(
            "db_aggregate",
            {
                "source": "shop",
                "table": "products",
                "measures": [{"agg": "avg", "column": "products.unit_price", "as": "price"}],
            },
        )
    )
    assert isinstance(result.data, dict)
    [[price]] = result.data["rows"]  # type: ignore[misc]
    assert isinstance(price, float) and str(result.data["shown"]) == f"price\n{price:,.2f}"


def test_the_tool_refuses_a_column_that_does_not_exist_before_any_sql_runs(shop_db: Path) -> None:
    result = asyncio.run(
        _registry(shop_db).call(
            "db_aggregate",
            {
                "source": "shop",
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "group_by": ["chanel"],
            },
        )
    )
    assert result.status == "blocked" and result.error_code == "invalid_arguments"
    assert "chanel" in (result.error_message or "")


def test_the_tool_reports_a_source_it_does_not_know(shop_db: Path) -> None:
    tool = _registry(shop_db).get("db_aggregate")
    outcome = tool.function(source="shp", table="orders", measures=[])
    assert (
        outcome.status == "blocked"
        and outcome.error_message == "unknown data source 'shp' (did you mean 'shop'?)"
    )


def test_the_tool_works_on_chinook_too() -> None:
    sources = DataSources()
    sources.register("chinook", CHINOOK)
    result = asyncio.run(
        ToolRegistry(data_tools(sources)).call(
            "db_aggregate",
            {
                "source": "chinook",
                "table": "InvoiceLine",
                "measures": [
                    {"agg": "sum", "column": "InvoiceLine.UnitPrice", "times": "InvoiceLine.Quantity"}
                ],
                "group_by": ["Genre.Name"],
                "order_by": [{"column": "sum", "desc": True}],
                "limit": 1,
            },
        )
    )
    assert result.status == "done" and isinstance(result.data, dict)
    assert result.data["rows"] == [["Rock", 826.6500000000061]]
