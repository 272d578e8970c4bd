"""The read-only SQL guard: exact verdicts for representative queries, dialect rules, and failing closed."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.tools import sql_guard
from plangate.tools.sql_guard import MAX_SQL_CHARS, GuardVerdict, check_read_only

ONE_OF = "expected a SELECT, WITH … SELECT, VALUES or EXPLAIN statement"

SYSTEM = "is a system catalog, not data: ask about the source's own tables"


def denied(name: str) -> str:
    return (
        f"the function {name}() is not allowed in a read-only query (it is not on sqlite's allow-list of "
        "aggregate, window, math, string, date/time, conditional and JSON functions)"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "select count(*) from orders",
        "SELECT 1;",
        "SELECT 1;;",
        "SELECT 1; -- a trailing comment",
        "SELECT 'a;b; DELETE FROM orders' AS text",
        "SELECT 1 /* ; DROP TABLE orders */",
        "WITH t AS (SELECT 1 AS x) SELECT x FROM t",
        "SELECT 1 UNION ALL SELECT 2",
        "VALUES (1, 'a'), (2, 'b')",
        "EXPLAIN SELECT 1",
        "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE order_id = 1",
        "/* plan */ explain query plan select 1",
        "SELECT json_object('a', 1), date('now', '-1 day'), replace('abc', 'b', 'x')",
    ],
)
def test_read_only_queries_are_allowed(sql: str) -> None:
    verdict = check_read_only(sql)
    assert verdict.allowed, verdict.reason
    assert verdict.reason


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM orders", f"{ONE_OF}, found DELETE"),
        ("SELECT 1; DELETE FROM orders", "expected exactly one statement, found 2 (SELECT, DELETE)"),
        ("SELECT 1; SELECT 2", "expected exactly one statement, found 2 (SELECT, SELECT)"),
        (
            "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
            "expected a read-only query, found DELETE inside it",
        ),
        ("SELECT * INTO copy FROM orders", "expected a read-only query, found INTO inside it"),
        ("VACUUM INTO '/tmp/x.db'", f"{ONE_OF}, found VACUUM"),
        ("SAVEPOINT s1", f"{ONE_OF}, found SAVEPOINT"),
        ("PRAGMA writable_schema = 1", f"{ONE_OF}, found PRAGMA"),
        ("SELECT load_extension('x')", denied("load_extension")),
        ("SELECT \"READFILE\"('/etc/passwd')", denied("readfile")),
        (
            "SELECT * FROM pragma_database_list",
            f"the table 'pragma_database_list' {SYSTEM}",
        ),
        ("EXPLAIN DELETE FROM orders", f"after EXPLAIN: {ONE_OF}, found DELETE"),
        (
            "EXPLAIN QUERY PLAN SELECT 1; DELETE FROM t",
            "after EXPLAIN: expected exactly one statement, found 2 (SELECT, DELETE)",
        ),
        (
            "EXPLAIN EXPLAIN SELECT 1",
            "after EXPLAIN: expected a statement after EXPLAIN, found another EXPLAIN",
        ),
        ("", "expected one SELECT statement, got an empty query"),
        ("  \n ", "expected one SELECT statement, got an empty query"),
        ("-- just a comment", "expected one SELECT statement, got only comments"),
        ("SELECT 1\u200b", "unexpected invisible or control character U+200B at line 1, column 9"),
        ("SELECT 1\n;\x00", "unexpected invisible or control character U+0000 at line 2, column 2"),
        ("SELECT 1 ；DELETE FROM t", "unexpected character '；' (U+FF1B) in '；DELETE' at line 1"),
        (
            "SELECT * FROM (DELETE FROM t RETURNING *) x",
            "the query does not parse: Expecting ) at line 1, column 26 near 'FROM'",
        ),
    ],
)
def test_refusals_say_what_was_expected_and_found(sql: str, reason: str) -> None:
    assert check_read_only(sql) == GuardVerdict(False, reason)


def test_unterminated_comment_is_refused_with_the_tokenizer_message() -> None:
    verdict = check_read_only("SELECT 1 /* ; DELETE FROM t")
    assert not verdict.allowed
    assert verdict.reason.startswith("the query does not parse: Error tokenizing")


def test_oversized_and_non_text_queries_are_refused() -> None:
    verdict = check_read_only("SELECT " + "1 + " * MAX_SQL_CHARS + "1")
    assert not verdict.allowed
    assert verdict.reason.startswith("expected at most 100,000 characters, got ")
    assert check_read_only(b"SELECT 1") == GuardVerdict(False, "expected the query as a string, got bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "allowed", "reason"),
    [
        ("SELECT * FROM orders FOR UPDATE", False, "expected a read-only query, found LOCK inside it"),
        ("EXPLAIN ANALYZE SELECT 1", True, "EXPLAIN of a single read-only query"),
        ("EXPLAIN ANALYZE VERBOSE SELECT 1", True, "EXPLAIN of a single read-only query"),
        ("EXPLAIN ANALYZE DELETE FROM orders", False, f"after EXPLAIN: {ONE_OF}, found DELETE"),
        ("SELECT pg_sleep(60)", False, denied("pg_sleep")),
        (
            "SELECT nextval('orders_id_seq')",
            False,
            denied("nextval"),
        ),
        (
            "SELECT pg_read_file('/etc/passwd')",
            False,
            denied("pg_read_file"),
        ),
        (
            "SELECT query_to_xml('DELETE FROM t', true, true, '')",
            False,
            denied("query_to_xml"),
        ),
        ("SET statement_timeout = 0", False, f"{ONE_OF}, found SET"),
    ],
)
def test_postgres_dialect(sql: str, allowed: bool, reason: str) -> None:
    assert check_read_only(sql, "postgres") == GuardVerdict(allowed, reason.replace("sqlite's", "postgres's"))


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT rolname, rolpassword FROM pg_authid", "the table 'pg_authid' is a system catalog"),
        ("SELECT * FROM pg_catalog.pg_settings", "the table 'pg_catalog.pg_settings' is a system catalog"),
        ("SELECT * FROM pg_stat_activity", "the table 'pg_stat_activity' is a system catalog"),
        ("SELECT * FROM pg_hba_file_rules", "the table 'pg_hba_file_rules' is a system catalog"),
        ("SELECT * FROM information_schema.tables", "the table 'information_schema.tables' is a system"),
        ("SELECT * FROM pg_toast.pg_toast_1", "the table 'pg_toast.pg_toast_1' is a system catalog"),
        ("SELECT * FROM other.orders", "the table 'other.orders' is outside the source's schemas (public)"),
        ("SELECT * FROM db.public.orders", "the table 'db.public.orders' names another database"),
        (
            "SELECT o.id FROM orders o JOIN (SELECT usename FROM pg_user) u ON true",
            "the table 'pg_user' is a system catalog",
        ),
        (
            "SELECT table_to_xml('pg_authid', true, true, '')",
            "the function table_to_xml() is not allowed in a read-only query",
        ),
    ],
)
def test_postgres_catalogs_and_other_schemas_are_refused(sql: str, reason: str) -> None:
    verdict = check_read_only(sql, "postgres", schemas=["public"])
    assert not verdict.allowed
    assert verdict.reason.startswith(reason), verdict.reason


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM sqlite_master",
        "SELECT * FROM main.sqlite_schema",
        "SELECT * FROM sqlite_stat1",
        "SELECT name FROM pragma_table_info('orders')",
        "SELECT * FROM temp.scratch",
    ],
)
def test_sqlite_system_tables_are_refused(sql: str) -> None:
    verdict = check_read_only(sql, "sqlite")
    assert not verdict.allowed
    assert "is a system catalog, not data" in verdict.reason or "pragma_table_info() is not allowed" in (
        verdict.reason
    ), verdict.reason


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT date_trunc('month', o.created_at) AS m, sum(o.total) FROM sales.orders o GROUP BY 1",
        "SELECT to_char(now(), 'YYYY-MM'), extract(year FROM current_date), age(current_date)",
        "SELECT coalesce(nullif(a, ''), 'none'), greatest(b, 0), round(c::numeric, 2) FROM sales.t",
        "SELECT string_agg(name, ', ' ORDER BY name), array_agg(DISTINCT id) FROM sales.t",
        "SELECT j->>'a', jsonb_array_length(j->'b'), json_extract_path_text(j::json, 'c') FROM sales.t",
        "SELECT row_number() OVER (PARTITION BY a ORDER BY b), lag(b) OVER w FROM sales.t "
        "WINDOW w AS (ORDER BY b)",
        "SELECT d::date FROM generate_series('2025-01-01'::date, '2025-12-01', interval '1 month') AS d",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), stddev(x), count(*) FILTER (WHERE x > 0) "
        "FROM t",
        "SELECT split_part(email, '@', 2), lower(trim(name)), length(name), strpos(name, 'a') FROM t",
        "SELECT CASE WHEN x > 1 THEN 'big' ELSE 'small' END, x ~ '^a', x ILIKE 'a%' FROM t",
    ],
)
def test_postgres_analytics_pass_the_allow_list(sql: str) -> None:
    verdict = check_read_only(sql, "postgres", schemas=["public", "sales"])
    assert verdict.allowed, verdict.reason


def test_a_parser_failure_refuses_instead_of_allowing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("internal parser bug")

    monkeypatch.setattr(sql_guard.sqlglot, "parse", broken)
    assert check_read_only("SELECT 1") == GuardVerdict(
        False, "the query could not be checked (RuntimeError: internal parser bug)"
    )


WRITES = [
    "DELETE FROM orders",
    "UPDATE orders SET status = 'x'",
    "INSERT INTO regions VALUES (9, 'a', 'b')",
    "DROP TABLE orders",
    "ATTACH 'x.db' AS x",
    "PRAGMA query_only = 0",
    "VACUUM",
]
READS = ["SELECT 1", "WITH a AS (SELECT 2) SELECT * FROM a", "VALUES (1)", "EXPLAIN QUERY PLAN SELECT 1"]


@given(
    st.sampled_from(READS), st.sampled_from(["; ", ";\n", "; -- x\n", "/* c */; "]), st.sampled_from(WRITES)
)
def test_anything_stacked_after_a_read_is_refused(read: str, glue: str, write: str) -> None:
    verdict = check_read_only(read + glue + write)
    assert not verdict.allowed
    assert "found 2" in verdict.reason


FRAGMENTS = [
    "",
    "SELECT ",
    "1",
    " * ",
    "FROM t",
    " WHERE x = ",
    "'a;b'",
    ";",
    " -- c\n",
    "/* ; */",
    "/*",
    "*/",
    "\n",
    "(",
    ")",
    ", ",
    "DELETE FROM t",
    "INSERT INTO t VALUES (2)",
    "UPDATE t SET x = 3",
    "DROP TABLE t",
    "WITH w AS ",
    "RETURNING *",
    "EXPLAIN ",
    "QUERY PLAN ",
    "VALUES (4)",
    "UNION ",
    "CREATE TABLE u (x)",
    "ATTACH ':memory:' AS m",
    "PRAGMA writable_schema = 1",
    "REPLACE INTO t VALUES (5)",
    "VACUUM",
    "BEGIN",
    "；",
    "\u200b",
    "\u00a0",
    '"t"',
    "x",
    "load_extension('e')",
    "abs(-1)",
]


PIECES = 5


def assemble(number: int) -> str:
    """Read ``number`` as PIECES digits in base len(FRAGMENTS), one fragment per digit.

    One integer per example is the cheapest draw hypothesis makes, which keeps 10,000 examples fast.
    """
    parts = []
    for _ in range(PIECES):
        number, digit = divmod(number, len(FRAGMENTS))
        parts.append(FRAGMENTS[digit])
    return "".join(parts)


@given(st.integers(min_value=0, max_value=len(FRAGMENTS) ** PIECES - 1))
def test_whatever_the_guard_allows_changes_nothing(number: int) -> None:
    sql = assemble(number)
    verdict = check_read_only(sql)
    assert verdict.reason
    if not verdict.allowed:
        return
    # The guard alone, with no second wall: an allowed query must not change an ordinary writable database.
    with closing(sqlite3.connect(":memory:")) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
        db.execute("INSERT INTO t VALUES (1)")
        before = db.total_changes
        try:
            db.execute(sql).fetchall()
        except (sqlite3.Error, sqlite3.Warning):
            pass
        assert db.total_changes == before
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
        assert db.execute("PRAGMA database_list").fetchall()[1:] == []


# Functions no question needs, each refused by the allow-list: the deny list this guard used to keep, and
# PostgreSQL's that change the server or read past the data (none of which any deny list named before).
NOT_ALLOWED = [
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "fsdir", "lsdir", "zipfile",
    "zeroblob", "randomblob", "sqlite_dbpage", "eval", "shell", "system", "pg_sleep", "pg_sleep_for",
    "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_switch_wal",
    "pg_create_restore_point", "pg_promote", "pg_notify", "set_config", "nextval", "setval", "txid_current",
    "dblink", "dblink_exec", "current_setting", "load_file", "sleep", "benchmark", "xp_cmdshell",
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_advisory_lock",
    "pg_try_advisory_xact_lock", "lo_import", "lo_export", "query_to_xml", "cursor_to_xml",
    "pg_create_physical_replication_slot", "pg_create_logical_replication_slot",
    "pg_replication_origin_create", "pg_stat_reset", "pg_stat_reset_shared", "table_to_xml",
    "schema_to_xml", "database_to_xml", "table_to_xmlschema", "pg_logical_emit_message",
    "pg_export_snapshot", "pg_current_wal_lsn", "pg_backend_pid", "inet_server_addr", "version",
    "current_user", "session_user", "current_database", "pg_postmaster_start_time", "repeat", "lpad",
    "hex", "quote_literal", "format_type", "pg_get_userbyid", "has_table_privilege", "pg_typeof",
    "a_function_nobody_wrote",
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize("name", NOT_ALLOWED)
def test_a_function_off_the_allow_list_is_refused_wherever_it_appears(
    name: str, dialect: sql_guard.Dialect
) -> None:
    for sql in (
        f"SELECT {name}(1)",
        f"SELECT * FROM {name}(1)",
        f"SELECT * FROM t WHERE a IN (SELECT {name}('a', 2))",
    ):
        verdict = check_read_only(sql, dialect)
        assert not verdict.allowed, sql
        # A call with the wrong number of arguments for a function sqlglot knows does not even parse.
        assert f"{name}() is not allowed in a read-only query" in verdict.reason or verdict.reason.startswith(
            "the query does not parse"
        ), verdict.reason
