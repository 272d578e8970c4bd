"""The copilot on a real PostgreSQL database: the shop data loaded into a database of its own, asked through a
``postgresql://`` URL, answered from rows that equal what the same question gives on the SQLite file; and the
turns themselves stored in a PostgreSQL store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from copilot_helpers import DONE, aggregate_step, answer_step, assert_stored_whole, gold, lines

from plangate.copilot import ask
from plangate.copilot._conversations import Conversations
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore, open_store

SHOP = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"
TABLES = {
    "regions": "region_id integer PRIMARY KEY, name text NOT NULL, manager text NOT NULL",
    "customers": (
        "customer_id integer PRIMARY KEY, name text NOT NULL, email text NOT NULL, "
        "region_id integer NOT NULL REFERENCES regions (region_id), segment text NOT NULL, "
        "signup_date date NOT NULL"
    ),
    "orders": (
        "order_id integer PRIMARY KEY, "
        "customer_id integer NOT NULL REFERENCES customers (customer_id), "
        "order_date date NOT NULL, channel text NOT NULL, status text NOT NULL"
    ),
    "products": (
        "product_id integer PRIMARY KEY, sku text NOT NULL, name text NOT NULL, category text NOT NULL, "
        "unit_price double precision NOT NULL, unit_cost double precision NOT NULL"
    ),
    "order_items": (
        "order_item_id integer PRIMARY KEY, order_id integer NOT NULL REFERENCES orders (order_id), "
        "product_id integer NOT NULL REFERENCES products (product_id), quantity integer NOT NULL, "
        "unit_price double precision NOT NULL, discount double precision NOT NULL"
    ),
}
REVENUE = aggregate_step(
    "revenue",
    source="warehouse",
    table="order_items",
    measures=[
        {"agg": "sum", "column": "order_items.unit_price", "times": "order_items.quantity", "as": "revenue"}
    ],
    group_by=["regions.name"],
    period={"column": "orders.order_date", "from": "2025", "to": "2025"},
    order_by=[{"column": "revenue", "desc": True}],
    limit=3,
)
GOLD = (
    "SELECT r.name, sum(i.unit_price * i.quantity) AS revenue FROM order_items i "
    "JOIN orders o USING (order_id) JOIN customers c USING (customer_id) JOIN regions r USING (region_id) "
    "WHERE o.order_date >= '2025-01-01' "
    "AND o.order_date < '2026-01-01' GROUP BY r.name ORDER BY revenue DESC LIMIT 3"
)


@pytest.fixture(scope="module")
def warehouse(postgres_server: object) -> Iterator[str]:
    """A database of its own holding the shop's tables, so no other test's schema shows in its catalog."""
    base = str(postgres_server.url)  # type: ignore[attr-defined]
    name = f"copilot_shop_{abs(hash(base)) % 100_000}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(base)._replace(path=f"/{name}", query=""))
    with closing(sqlite3.connect(SHOP)) as source, psycopg.connect(url) as target:
        for table, columns in TABLES.items():
            target.execute(f"CREATE TABLE {table} ({columns})")
            rows = source.execute(f"SELECT * FROM {table}").fetchall()
            marks = ", ".join(["%s"] * len(rows[0]))
            with target.cursor() as cursor:
                cursor.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        target.commit()
    yield postgres_server.reader_url(name)  # type: ignore[attr-defined]
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_question_on_a_postgres_database_is_answered_from_the_same_rows(
    warehouse: str, tmp_path: Path
) -> None:
    answer = "East led with 1,328,137.93, then West with 899,479.59 and South with 495,110.24."
    model = ScriptedModel([lines(REVENUE, answer_step("revenue"), DONE), answer])
    with SQLiteStore(tmp_path / "store.db") as store:
        turn = ask(
            "Which 3 regions had the highest revenue in 2025?",
            warehouse,
            model=model,
            store=store,
            name="warehouse",
        )
        assert (turn.status, turn.answer) == ("done", answer), turn.reason
        expected = gold(SHOP, GOLD)
        assert [row[0] for row in turn.result.rows] == [row[0] for row in expected]
        assert [round(float(row[1]), 2) for row in turn.result.rows] == [
            round(float(row[1]), 2) for row in expected
        ]
        assert "dialect" not in turn.reason
        assert_stored_whole(store, turn)


def test_the_no_rows_rule_reads_postgres_dates(warehouse: str, tmp_path: Path) -> None:
    ops = lines(
        aggregate_step(
            "n",
            source="warehouse",
            table="orders",
            measures=[{"agg": "count", "column": "*"}],
            period={"column": "orders.order_date", "from": "2031", "to": "2031"},
        ),
        answer_step("n"),
        DONE,
    )
    with SQLiteStore(tmp_path / "store.db") as store:
        turn = ask(
            "How many orders in 2031?",
            warehouse,
            model=ScriptedModel([ops, "None.", ops, "None."]),
            store=store,
            name="warehouse",
        )
    assert "orders.order_date has rows from 2025-01-01 to 2026-06-30" in turn.attempts[0].review.summary()


def test_a_whole_turn_on_either_store(store_url: str) -> None:
    ops = lines(
        aggregate_step(
            "n", source="shop", table="orders", measures=[{"agg": "count", "column": "*", "as": "n"}]
        ),
        answer_step("n"),
        DONE,
    )
    store = open_store(store_url)
    try:
        turn = ask(
            "How many orders are there?",
            SHOP,
            model=ScriptedModel([ops, "There are 4,000 orders."]),
            store=store,
        )
        assert (turn.status, turn.answer) == ("done", "There are 4,000 orders.")
        assert_stored_whole(store, turn)
        assert Conversations(store).list_turns(turn.conversation_id)[0].id == turn.id
    finally:
        store.close()
