"""A source's semantic layer: named metrics, dimensions, relationships and synonyms, checked against the real
schema with every issue at its path, and compiled by ``db_aggregate`` from ``metric = "revenue"``.

The bundled shop data's revenue is the repository's own definition: what the plan-week formula computes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tomllib
from contextlib import closing
from pathlib import Path

import pytest

from plangate.tools import ToolRegistry
from plangate.tools.data import (
    DataSources,
    QueryLimits,
    SchemaInfo,
    compile_aggregate,
    data_tools,
    parse_aggregate,
)
from plangate.tools.data.aggregate import AggregateError
from plangate.tools.data.semantic import (
    SemanticError,
    check_semantic,
    load_semantic,
    read_semantic_file,
    semantic_path_for,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"
SHOP = DATA / "shop.db"
CHINOOK = DATA / "chinook.sqlite"


def _schema(path: Path) -> SchemaInfo:
    return DataSources().register(path.stem, path).schema(QueryLimits())


@pytest.fixture(scope="module")
def shop() -> SchemaInfo:
    return _schema(SHOP)


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as connection:
        return sorted(
            tuple(round(c, 6) if isinstance(c, float) else c for c in row) for row in connection.execute(sql)
        )


def test_the_bundled_semantic_files_are_beside_their_databases_and_check_clean() -> None:
    for database in (SHOP, CHINOOK):
        path = semantic_path_for(database)
        assert path.is_file()
        layer, issues = check_semantic(read_semantic_file(path), _schema(database), str(path))
        assert issues == [] and layer is not None
    chinook = load_semantic(read_semantic_file(semantic_path_for(CHINOOK)), _schema(CHINOOK), "c")
    assert set(chinook.metrics) == {"revenue", "tracks", "customers"}


def test_the_shop_revenue_metric_agrees_with_the_plan_week_formula(shop: SchemaInfo) -> None:
    layer = load_semantic(read_semantic_file(semantic_path_for(SHOP)), shop, "shop")
    formula = tomllib.loads((ROOT / "examples" / "formulas" / "plan-week.formula.toml").read_text())
    template = formula["steps"][0]["tool"]["args"]["sql"]
    for month in ("2025-03", "2026-06"):
        plan_week = template.replace("{{month}}", month)
        ours = compile_aggregate(
            parse_aggregate(
                {
                    "source": "shop",
                    "metric": "revenue",
                    "group_by": ["region"],
                    "period": {"column": "orders.order_date", "from": month, "to": month},
                }
            ),
            shop,
            layer,
        ).sql
        # plan-week rounds to cents and counts orders beside: compare its region and revenue columns.
        expected = [(name, revenue) for name, revenue, _ in _rows(SHOP, plan_week)]
        got = _rows(SHOP, ours)
        assert [name for name, _ in got] == [name for name, _ in expected], month
        for (_, ours_value), (_, theirs) in zip(got, expected, strict=True):
            assert ours_value == pytest.approx(theirs, abs=0.006), month


def test_a_metric_is_compiled_with_its_condition_alone_or_beside_other_measures(shop: SchemaInfo) -> None:
    layer = load_semantic(read_semantic_file(semantic_path_for(SHOP)), shop, "shop")
    alone = compile_aggregate(parse_aggregate({"source": "shop", "metric": "revenue"}), shop, layer)
    assert alone.definitions == {
        "revenue": "sum(order_items.quantity * order_items.unit_price * (1 - order_items.discount)) "
        "where orders.status != 'cancelled'"
    }
    net = (
        "SELECT sum(i.quantity * i.unit_price * (1 - i.discount)) FROM order_items i JOIN orders o "
        "ON o.order_id = i.order_id WHERE o.status != 'cancelled'"
    )
    assert _rows(SHOP, alone.sql) == _rows(SHOP, net)
    beside = compile_aggregate(
        parse_aggregate(
            {
                "source": "shop",
                "measures": [
                    {"metric": "revenue"},
                    {"agg": "count", "column": "orders.order_id", "as": "orders"},
                ],
                "group_by": ["channel"],
            }
        ),
        shop,
        layer,
    )
    assert beside.columns == ["channel", "revenue", "orders"]
    every_order = (
        "SELECT o.channel, sum(CASE WHEN o.status != 'cancelled' THEN i.quantity * i.unit_price * "
        "(1 - i.discount) END), count(DISTINCT o.order_id) FROM order_items i JOIN orders o ON o.order_id = "
        "i.order_id GROUP BY o.channel"
    )
    assert _rows(SHOP, beside.sql) == _rows(SHOP, every_order)  # the other measure keeps cancelled orders


def test_an_unknown_metric_names_the_closest_one_and_a_source_without_a_layer_says_so(
    shop: SchemaInfo,
) -> None:
    layer = load_semantic({"metrics": {"revenue": "sum(order_items.quantity)"}}, shop, "x")
    with pytest.raises(
        AggregateError, match=r"measures\.0\.metric|measures\[0\]\.metric: unknown metric 'revenu'"
    ):
        compile_aggregate(parse_aggregate({"source": "shop", "metric": "revenu"}), shop, layer)
    with pytest.raises(AggregateError, match="this source has no semantic layer"):
        compile_aggregate(parse_aggregate({"source": "shop", "metric": "revenue"}), shop)
    with pytest.raises(AggregateError, match=r"a metric measure is \{metric\} alone"):
        parse_aggregate({"source": "shop", "measures": [{"metric": "revenue", "agg": "sum"}]})


def test_every_problem_of_a_semantic_file_is_named_at_its_path(shop: SchemaInfo) -> None:
    data = {
        "metrix": {},
        "metrics": {
            "revenue": {"sql": "sum(order_items.qty)", "where": "orders.stauts != 'x'", "synonym": ["sales"]},
            "units": "sum(upper(order_items.quantity)) where orders.status = 'shipped'",
            "rows": "count(*)",
            "two": "sum(order_items.quantity) + sum(order_items.discount)",
            "bare": "sum(quantity)",
            "sum": "sum(order_items.quantity)",
            "orders": "count(orders.order_id)",
        },
        "dimensions": {"region": "region.name", "orders": "orders.channel"},
        "relationships": [{"from": "orders.customer_id", "too": "customers.customer_id"}],
    }
    _, issues = check_semantic(data, shop, "shop.semantic.toml")
    found = {(issue.path, issue.code) for issue in issues}
    assert found == {
        ("metrix", "unknown-key"),
        ("metrics.revenue.synonym", "unknown-key"),
        ("metrics.revenue.sql", "unknown-column"),
        ("metrics.revenue.where", "unknown-column"),
        ("metrics.units", "expression"),
        ("metrics.rows", "expression"),
        ("metrics.two", "expression"),
        ("metrics.bare", "unknown-column"),
        ("metrics.sum", "name"),
        ("dimensions.region", "unknown-table"),
        ("dimensions.orders", "duplicate"),
        ("relationships[0].too", "unknown-key"),
        ("relationships[0].to", "type"),
    }
    messages = {issue.path: issue.message for issue in issues}
    assert "did you mean 'order_items.quantity'?" in messages["metrics.revenue.sql"]
    assert "did you mean 'orders.status'?" in messages["metrics.revenue.where"]
    assert "not 'UPPER(order_items.quantity)'" in messages["metrics.units"]
    assert "did you mean 'regions'?" in messages["dimensions.region"]
    with pytest.raises(SemanticError, match=r"shop\.semantic\.toml: metrix: unknown key"):
        load_semantic(data, shop, "shop.semantic.toml")


def test_a_relationship_the_foreign_keys_do_not_declare_is_joined_along(tmp_path: Path) -> None:
    database = tmp_path / "loose.db"
    with closing(sqlite3.connect(database)) as connection:
        connection.executescript(
            "CREATE TABLE teams (team_id INTEGER PRIMARY KEY, name TEXT);"
            "CREATE TABLE people (person_id INTEGER PRIMARY KEY, team INTEGER, salary REAL);"
            "INSERT INTO teams VALUES (1, 'red'), (2, 'blue');"
            "INSERT INTO people VALUES (1, 1, 10), (2, 1, 20), (3, 2, 5);"
        )
        connection.commit()
    schema = _schema(database)
    query = parse_aggregate(
        {
            "source": "loose",
            "measures": [{"agg": "sum", "column": "people.salary"}],
            "group_by": ["teams.name"],
        }
    )
    with pytest.raises(AggregateError, match="no foreign key joins 'people' to 'teams'"):
        compile_aggregate(query, schema)
    layer = load_semantic(
        {
            "relationships": [{"from": "people.team", "to": "teams.team_id"}],
            "dimensions": {"team": "teams.name"},
        },
        schema,
        "loose",
    )
    assert _rows(database, compile_aggregate(query, schema, layer).sql) == [("blue", 5.0), ("red", 30.0)]


def test_db_aggregate_takes_a_metric_by_name_and_says_which_definition_it_used() -> None:
    sources = DataSources()
    sources.register("chinook", CHINOOK, semantic=semantic_path_for(CHINOOK))
    schema = sources.get("chinook").schema(QueryLimits())
    declared = sources.semantic_of("chinook")
    assert declared is not None
    layer = load_semantic(declared[0], schema, declared[1])
    registry = ToolRegistry(data_tools(sources, semantics={"chinook": layer}))
    assert (
        "revenue = sum(InvoiceLine.UnitPrice * InvoiceLine.Quantity)"
        in registry.get("db_aggregate").description
    )
    result = asyncio.run(
        registry.call(
            "db_aggregate",
            {
                "source": "chinook",
                "metric": "revenue",
                "group_by": ["genre"],
                "order_by": [{"column": "revenue", "desc": True}],
                "limit": 1,
            },
        )
    )
    assert result.success, result.error_message
    assert result.data["rows"] == [["Rock", pytest.approx(826.65)]]  # type: ignore[index]
    assert result.data["definitions"] == {"revenue": "sum(InvoiceLine.UnitPrice * InvoiceLine.Quantity)"}  # type: ignore[index]


def test_without_a_semantic_file_a_source_has_no_layer(tmp_path: Path) -> None:
    copy = tmp_path / "shop.db"
    copy.write_bytes(SHOP.read_bytes())
    sources = DataSources()
    sources.register("shop", copy)
    assert sources.semantic_of("shop") is None
    sources.register("beside", SHOP)
    assert sources.semantic_of("beside") is not None
