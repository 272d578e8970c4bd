"""The data tools on the example database: schema, results, limits and the outcomes the model sees."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from plangate.tools import ToolRegistry, ToolResult
from plangate.tools.data import DataSources, QueryLimits, data_tools
from plangate.tools.data._format import cell_text, human_bytes

INFINITE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def registry_for(path: Path, limits: QueryLimits | None = None) -> ToolRegistry:
    sources = DataSources()
    sources.register("shop", path)
    return ToolRegistry(data_tools(sources, limits))


def query(registry: ToolRegistry, sql: str, source: str = "shop") -> ToolResult:
    return asyncio.run(registry.call("db_query", {"source": source, "sql": sql}))


def test_the_tools_are_read_tools_of_the_data_domain(shop_db: Path) -> None:
    registry = registry_for(shop_db)
    assert registry.names() == ["db_schema", "db_query", "db_aggregate"]
    for item in registry:
        assert (item.effect, item.domain, item.pack, item.idempotent) == ("read", "data", "sql", True)
    description = registry.get("db_query").description
    assert description.endswith("Limits: 1,000 rows, 1 MB of text, 30 s. Sources: shop.")


def test_db_schema_lists_tables_columns_keys_and_counts(shop_db: Path) -> None:
    result = asyncio.run(registry_for(shop_db).call("db_schema", {"source": "shop"}))
    assert result.status == "done"
    assert result.summary == "shop: 6 tables"
    lines = result.observation.splitlines()
    assert lines[0] == "source shop (sqlite): 6 tables, 0 views"
    assert "table orders (4,000 rows)" in lines
    assert "table regions (5 rows)" in lines
    assert "  order_id INTEGER primary key" in lines
    assert "  customer_id INTEGER not null -> customers.customer_id" in lines
    assert isinstance(result.data, dict)
    tables = result.data["tables"]
    assert isinstance(tables, list)
    names = [table["name"] for table in tables if isinstance(table, dict)]
    assert names == ["customers", "order_items", "orders", "products", "regions", "returns"]
    orders = next(t for t in tables if isinstance(t, dict) and t["name"] == "orders")
    assert orders["row_count"] == 4000
    assert orders["foreign_keys"] == [
        {"column": "customer_id", "references_table": "customers", "references_column": "customer_id"}
    ]


def test_db_schema_includes_views(shop_copy: Path) -> None:
    with closing(sqlite3.connect(shop_copy)) as db:
        db.execute(
            "CREATE VIEW monthly AS SELECT substr(order_date, 1, 7) AS month, count(*) AS n "
            "FROM orders GROUP BY month"
        )
        db.commit()
    result = asyncio.run(registry_for(shop_copy).call("db_schema", {"source": "shop"}))
    assert "view monthly" in result.observation.splitlines()
    assert result.observation.splitlines()[0] == "source shop (sqlite): 6 tables, 1 views"


def test_query_rows_are_a_compact_table_and_data(shop_db: Path) -> None:
    result = query(registry_for(shop_db), "SELECT region_id, name FROM regions ORDER BY region_id LIMIT 2")
    assert result.status == "done"
    assert result.observation == "region_id | name\n1 | North\n2 | South\n(2 rows)"
    assert result.summary == "2 rows"
    assert result.data == {
        "columns": ["region_id", "name"],
        "rows": [[1, "North"], [2, "South"]],
        "truncated": False,
        "clipped": False,
    }


def test_nulls_blobs_floats_and_newlines_render_readably(shop_db: Path) -> None:
    result = query(registry_for(shop_db), "SELECT NULL AS a, x'0102' AS b, 2.5 AS c, 'two\nlines' AS d")
    assert result.observation == "a | b | c | d\nNULL | <blob 2 bytes> | 2.5 | two\\nlines\n(1 row)"
    assert result.data == {
        "columns": ["a", "b", "c", "d"],
        "rows": [[None, "<blob 2 bytes>", 2.5, "two\nlines"]],
        "truncated": False,
        "clipped": False,
    }
    assert cell_text(True) == "True"


def test_row_limit_is_reported(shop_db: Path) -> None:
    result = query(
        registry_for(shop_db, QueryLimits(max_rows=5)), "SELECT order_id FROM orders ORDER BY order_id"
    )
    lines = result.observation.splitlines()
    assert lines[1:6] == ["1", "2", "3", "4", "5"]
    assert lines[-1] == "(5 rows; truncated at 5 rows: aggregate or add a LIMIT to see the rest)"
    assert result.summary == "5 rows (truncated)"
    assert isinstance(result.data, dict) and result.data["truncated"] is True


def test_exactly_the_row_limit_is_not_truncated(shop_db: Path) -> None:
    result = query(registry_for(shop_db, QueryLimits(max_rows=5)), "SELECT region_id FROM regions")
    assert result.observation.splitlines()[-1] == "(5 rows)"


def test_size_limit_is_reported(shop_db: Path) -> None:
    result = query(registry_for(shop_db, QueryLimits(max_bytes=200)), "SELECT name, email FROM customers")
    assert result.status == "done"
    assert len(result.observation.encode()) < 300
    assert result.observation.splitlines()[-1].endswith("; result clipped at 200 bytes)")
    assert result.summary.endswith("(clipped)")
    assert isinstance(result.data, dict) and result.data["clipped"] is True


def test_time_limit_is_reported(shop_db: Path) -> None:
    result = query(registry_for(shop_db, QueryLimits(timeout_s=0.05)), INFINITE)
    assert (result.status, result.error_code) == ("failed", "query_timeout")
    assert result.error_message == "query stopped after 0.05 s (limit: time)"
    assert result.observation == (
        "query stopped after 0.05 s (limit: time): simplify it, filter earlier or aggregate"
    )
    assert result.data == {"limit": "time", "timeout_s": 0.05}


# One call of printf builds a billion characters (seconds of work in one virtual-machine instruction, where
# no progress handler runs); fourteen of them ran 45 s under a 30 s limit and reported success.
SLOW_PRINTF = "SELECT " + ", ".join(["length(printf('%.*c', 1000000000, 'x'))"] * 14)


def test_the_time_limit_holds_even_inside_one_long_function_call(shop_db: Path) -> None:
    limit = 1.0
    started = time.monotonic()
    result = query(registry_for(shop_db, QueryLimits(timeout_s=limit)), SLOW_PRINTF)
    took = time.monotonic() - started

    assert (result.status, result.error_code) == ("failed", "query_timeout")
    assert result.data == {"limit": "time", "timeout_s": limit}
    assert "(limit: time)" in result.observation
    # Stopped near the limit: one printf call alone takes longer than the slack allowed here.
    assert took < limit + 1.0, f"the query answered after {took:.2f} s under a {limit:g} s limit"


def test_a_value_over_the_size_limit_is_clipped_with_a_note(shop_db: Path) -> None:
    sql = "SELECT printf('%.*c', 2000000, 'x') AS big, printf('%05d', 42) AS small, printf(NULL) AS none"
    result = query(registry_for(shop_db), sql)

    assert result.status == "done"
    assert result.observation.splitlines()[1] == "NULL | 00042 | NULL"
    last = result.observation.splitlines()[-1]
    assert last == "(1 row; 1 value over the 1 MB value limit clipped (shown as NULL))"
    assert result.summary == "1 row (clipped)"
    assert isinstance(result.data, dict)
    assert (result.data["clipped"], result.data["clipped_values"]) == (True, 1)


def test_a_value_under_the_size_limit_is_not_clipped(shop_db: Path) -> None:
    result = query(registry_for(shop_db), "SELECT length(printf('%.*c', 500000, 'x')) AS n")
    assert result.observation.splitlines()[1:] == ["500000", "(1 row)"]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT value FROM json_each('[3, 1, 2]') ORDER BY value", ["1", "2", "3"]),
        ("SELECT key FROM json_tree('{\"a\": {\"b\": 1}}') WHERE key IS NOT NULL", ["a", "b"]),
        (
            "SELECT o.order_id, j.value FROM orders AS o, json_each(json_array(o.order_id, 0)) AS j "
            "WHERE o.order_id = 1 ORDER BY j.value",
            ["1 | 0", "1 | 1"],
        ),
    ],
)
def test_json_table_functions_work_on_the_read_only_connection(
    shop_db: Path, sql: str, expected: list[str]
) -> None:
    result = query(registry_for(shop_db), sql)
    assert result.status == "done", result.observation
    assert result.observation.splitlines()[1:-1] == expected


def test_database_errors_are_failed_results(shop_db: Path) -> None:
    result = query(registry_for(shop_db), "SELECT nope FROM orders")
    assert (result.status, result.error_code) == ("failed", "sql_error")
    assert result.observation == "the database rejected the query: data source 'shop': no such column: nope"


def test_refusals_are_blocked_results(shop_db: Path) -> None:
    result = query(registry_for(shop_db), "DROP TABLE orders")
    assert (result.status, result.error_code) == ("blocked", "sql_refused")
    assert result.observation == (
        "query refused by the read-only guard: "
        "expected a SELECT, WITH … SELECT, VALUES or EXPLAIN statement, found DROP"
    )


def test_unknown_sources_are_blocked_with_a_suggestion(shop_db: Path) -> None:
    registry = registry_for(shop_db)
    result = query(registry, "SELECT 1", source="shp")
    assert (result.status, result.error_code, result.observation) == (
        "blocked",
        "unknown_source",
        "unknown data source 'shp' (did you mean 'shop'?)",
    )
    schema = asyncio.run(registry.call("db_schema", {"source": "warehouse"}))
    assert schema.observation == "unknown data source 'warehouse' (known: shop)"


def test_a_huge_single_value_is_stopped_by_the_engine(shop_db: Path) -> None:
    # Values are capped at max(max_bytes, 64 KiB) inside SQLite, before any row reaches Python.
    sql = "SELECT length(replace(replace(printf('%.*c', 20000, 'x'), 'x', 'xxxx'), 'x', 'xxxx'))"
    result = query(registry_for(shop_db, QueryLimits(max_bytes=1_000)), sql)
    assert (result.status, result.error_code) == ("failed", "sql_error")
    assert result.observation.endswith("string or blob too big (a value over the 65,536-byte limit)")


def test_schema_text_is_clipped_at_the_size_limit(shop_db: Path) -> None:
    result = asyncio.run(
        registry_for(shop_db, QueryLimits(max_bytes=300)).call("db_schema", {"source": "shop"})
    )
    assert result.observation.splitlines()[-1] == "(schema clipped at 300 bytes)"
    assert result.summary == "shop: 6 tables (clipped)"


@pytest.mark.parametrize(
    ("size", "text"),
    [(300, "300 bytes"), (1_000, "1 kB"), (2_500, "2.5 kB"), (1_000_000, "1 MB"), (1_500_000, "1.5 MB")],
)
def test_human_bytes(size: int, text: str) -> None:
    assert human_bytes(size) == text


@pytest.mark.parametrize("field", ["max_rows", "max_bytes", "timeout_s"])
def test_limits_must_be_positive(field: str) -> None:
    from plangate.errors import ConfigError

    with pytest.raises(ConfigError, match=f"expected a positive {field}, got 0"):
        QueryLimits(**{field: 0})  # type: ignore[arg-type]
