"""A PostgreSQL data source on a real server: least privilege is checked when it opens, every connection is
read-only with a time limit and the source's schemas only, and the allow-list guard refuses every hostile
query of ``fixtures/hostile_postgres.sql`` — as a superuser the operator allowed and as a read-only role —
leaving nothing behind on the server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from test_sql_corpus import load_cases

from plangate.tools.data import (
    DataSourceError,
    DataSources,
    QueryLimits,
    QueryRefused,
    QueryTimeout,
    SourceForbidden,
)
from plangate.tools.data.postgres import PostgresSource, identity_of

HOSTILE = load_cases("hostile_postgres.sql")
LIMITS = QueryLimits(timeout_s=5.0)
SECRETS = ("SCRAM-SHA-256$", "md5")


@dataclass(frozen=True)
class Warehouse:
    database: str
    admin: str  # the session's superuser
    reader: str  # a role that may only read public


@pytest.fixture(scope="module")
def warehouse(postgres_server: object) -> Iterator[Warehouse]:
    server = postgres_server
    name = server.new_database("perimeter")  # type: ignore[attr-defined]
    admin = server.database_url(name)  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (order_id serial PRIMARY KEY, customer text, status text)")
        conn.execute(
            "CREATE TABLE order_items (item_id serial PRIMARY KEY, "
            "order_id integer REFERENCES orders (order_id), quantity integer, price numeric)"
        )
        conn.execute("INSERT INTO orders (customer, status) VALUES ('ann', 'paid'), ('bob', 'cancelled')")
        conn.execute("INSERT INTO order_items (order_id, quantity, price) VALUES (1, 2, 9.5), (2, 1, 3)")
        conn.execute("CREATE SCHEMA other_schema")
        conn.execute("CREATE TABLE other_schema.secrets (x text)")
    yield Warehouse(name, admin, server.reader_url(name))  # type: ignore[attr-defined]


def server_state(admin_url: str) -> dict[str, object]:
    """What a hostile query could leave behind, read as the superuser."""
    with psycopg.connect(admin_url, autocommit=True) as conn:

        def one(sql: str) -> object:
            row = conn.execute(sql).fetchone()
            return row[0] if row else None

        return {
            "slots": one("SELECT count(*) FROM pg_replication_slots"),
            "origins": one("SELECT count(*) FROM pg_replication_origin"),
            "advisory locks": one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
            "large objects": one("SELECT count(*) FROM pg_largeobject_metadata"),
            "stats reset": one(
                "SELECT stats_reset FROM pg_stat_database WHERE datname = current_database()"
            ),
            "bgwriter reset": one("SELECT stats_reset FROM pg_stat_bgwriter"),
            "orders": one("SELECT count(*) FROM orders"),
            "sequence": one("SELECT last_value FROM orders_order_id_seq"),
            "tables": one("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"),
        }


def test_the_corpus_holds_every_query_the_perimeter_issue_names() -> None:
    sqls = " ".join(sql for _, sql in HOSTILE)
    for needed in (
        "pg_create_physical_replication_slot", "pg_create_logical_replication_slot", "pg_stat_reset()",
        "rolpassword FROM pg_authid", "table_to_xml('pg_authid'", "pg_settings", "pg_hba_file_rules",
        "pg_stat_activity", "pg_advisory_lock", "pg_replication_origin_create",
    ):
        assert needed in sqls, needed
    assert len(HOSTILE) >= 60


@pytest.mark.parametrize("role", ["superuser", "reader"])
def test_every_hostile_query_is_refused_before_the_server_and_leaves_nothing(
    warehouse: Warehouse, role: str
) -> None:
    url = warehouse.admin if role == "superuser" else warehouse.reader
    source = PostgresSource("warehouse", url, schemas=["public"], allow_privileged=role == "superuser")
    before = server_state(warehouse.admin)
    ran = []
    for title, sql in HOSTILE:
        try:
            result = source.query(sql, LIMITS)
        except QueryRefused as refused:
            assert refused.reason, title
            continue
        ran.append((title, result.rows))
    assert ran == []
    assert server_state(warehouse.admin) == before


def test_the_read_only_role_holds_on_its_own_without_the_guard(warehouse: Warehouse) -> None:
    # The second wall alone: what a read-only role on a read-only connection lets a query do.
    source = PostgresSource("warehouse", warehouse.reader)
    before = server_state(warehouse.admin)
    leaked = []
    for title, sql in HOSTILE:
        try:
            result = source.run_unguarded(sql, QueryLimits(timeout_s=2.0))
        except (DataSourceError, QueryTimeout):
            continue
        text = repr(result.rows)
        if any(secret in text for secret in SECRETS):
            leaked.append(title)
    assert leaked == []
    assert server_state(warehouse.admin) == before  # nothing persisted: no slot, lock, object, change


def test_a_superuser_source_is_refused_with_the_sql_of_a_read_only_role(warehouse: Warehouse) -> None:
    source = DataSources().register("warehouse", warehouse.admin)
    with pytest.raises(SourceForbidden) as refused:
        source.schema(LIMITS)
    message = str(refused.value)
    assert refused.value.kind == "privileged"
    assert "is a superuser" in message
    assert "CREATE ROLE plangate_reader LOGIN" in message
    assert f'GRANT CONNECT ON DATABASE "{warehouse.database}" TO plangate_reader' in message
    assert 'GRANT SELECT ON ALL TABLES IN SCHEMA "public" TO plangate_reader' in message
    assert "allow_privileged = true" in message
    with pytest.raises(SourceForbidden):
        source.query("SELECT count(*) FROM orders", LIMITS)  # no query runs either


@pytest.mark.parametrize(
    ("grant", "says"),
    [
        ("ALTER ROLE {role} REPLICATION", "has REPLICATION"),
        ("ALTER ROLE {role} BYPASSRLS", "has BYPASSRLS"),
        ("GRANT INSERT ON orders TO {role}", "can write to or create in public.orders"),
        ("GRANT CREATE ON SCHEMA public TO {role}", "can write to or create in schema public"),
        ("GRANT pg_write_all_data TO {role}", "is a member of pg_write_all_data"),
    ],
)
def test_a_role_that_can_do_more_than_read_is_refused(
    postgres_server: object, warehouse: Warehouse, grant: str, says: str
) -> None:
    role = f"wide_{abs(hash(grant)) % 100_000}"
    with psycopg.connect(warehouse.admin, autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.execute(grant.format(role=f'"{role}"'))
    url = warehouse.admin.replace("//plangate@", f"//{role}@")
    with pytest.raises(SourceForbidden, match=says):
        PostgresSource("warehouse", url).schema(LIMITS)


def test_an_allowed_privileged_source_works_and_warns_once(
    warehouse: Warehouse, caplog: pytest.LogCaptureFixture
) -> None:
    source = PostgresSource("wide-open", warehouse.admin, allow_privileged=True)
    with caplog.at_level(logging.WARNING, logger="plangate.data"):
        assert source.query("SELECT count(*) FROM orders", LIMITS).rows == [(2,)]
        PostgresSource("wide-open", warehouse.admin, allow_privileged=True).schema(LIMITS)
    warnings = [r.getMessage() for r in caplog.records if r.name == "plangate.data"]
    assert len(warnings) == 1 and "is a superuser" in warnings[0] and "allow_privileged" in warnings[0]


def test_connections_are_read_only_with_a_time_limit_and_the_sources_schemas(warehouse: Warehouse) -> None:
    source = PostgresSource("warehouse", warehouse.admin, schemas=["public"], allow_privileged=True)
    # The settings as the server sees them, asked without the guard (which refuses current_setting).
    result = source.run_unguarded(
        "SELECT current_setting('default_transaction_read_only'), current_setting('search_path'), "
        "current_setting('statement_timeout'), current_setting('transaction_read_only')",
        QueryLimits(timeout_s=7.0),
    )
    assert result.rows == [("on", '"public"', "7s", "on")]
    with pytest.raises(DataSourceError, match="read-only transaction"):
        source.run_unguarded("CREATE TABLE evil (x int)", LIMITS)
    with pytest.raises(QueryTimeout):
        source.run_unguarded("SELECT pg_sleep(5)", QueryLimits(timeout_s=0.5))


def test_the_source_reads_only_its_schemas(warehouse: Warehouse) -> None:
    source = DataSources().register("warehouse", warehouse.reader)
    names = [table.name for table in source.schema(LIMITS).tables]
    assert names == ["order_items", "orders"]
    tables = source.schema(LIMITS).tables
    keys = {t.name: [(k.column, k.references_table) for k in t.foreign_keys] for t in tables}
    assert keys["order_items"] == [("order_id", "orders")]  # read from the catalog: the role owns nothing
    with pytest.raises(QueryRefused, match="outside the source's schemas"):
        source.query("SELECT * FROM other_schema.secrets", LIMITS)


def test_a_database_holding_a_plangate_store_is_never_a_source(
    postgres_server: object, postgres_url: str
) -> None:
    from plangate.store.postgres import PostgresStore

    with PostgresStore(postgres_url):  # makes the store's tables in a schema of the session's database
        pass
    base = str(postgres_server.url)  # type: ignore[attr-defined]
    with pytest.raises(SourceForbidden, match="holds a plangate store") as refused:
        PostgresSource("sneaky", base, allow_privileged=True).schema(LIMITS)
    assert refused.value.kind == "store"


def test_the_servers_own_database_is_refused_by_identity_not_by_url(warehouse: Warehouse) -> None:
    own = identity_of(warehouse.admin)
    # The same database named another way: localhost for 127.0.0.1, another user, options of its own.
    other_url = warehouse.reader.replace("127.0.0.1", "localhost") + "?application_name=x"
    source = PostgresSource("same", other_url, never=[own])
    with pytest.raises(SourceForbidden, match="the server's own store"):
        source.schema(LIMITS)
    assert identity_of(other_url).same_as(own)
    elsewhere = identity_of(str(warehouse.admin).rsplit("/", 1)[0] + "/postgres")
    assert not elsewhere.same_as(own)
