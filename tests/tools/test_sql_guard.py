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
        ("SELECT load_extension('x')", "the function load_extension() is not allowed in a read-only query"),
        ("SELECT \"READFILE\"('/etc/passwd')", "the function readfile() is not allowed in a read-only query"),
        (
            "SELECT * FROM pragma_database_list",
            "the table 'pragma_database_list' is not allowed in a read-only query",
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
        ("SELECT pg_sleep(60)", False, "the function pg_sleep() is not allowed in a read-only query"),
        (
            "SELECT nextval('orders_id_seq')",
            False,
            "the function nextval() is not allowed in a read-only query",
        ),
        (
            "SELECT pg_read_file('/etc/passwd')",
            False,
            "the function pg_read_file() is not allowed in a read-only query",
        ),
        (
            "SELECT query_to_xml('DELETE FROM t', true, true, '')",
            False,
            "the function query_to_xml() is not allowed in a read-only query",
        ),
        ("SET statement_timeout = 0", False, f"{ONE_OF}, found SET"),
    ],
)
def test_postgres_dialect(sql: str, allowed: bool, reason: str) -> None:
    assert check_read_only(sql, "postgres") == GuardVerdict(allowed, reason)


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


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize(
    "name",
    sorted(sql_guard.DENIED_FUNCTIONS) + [f"{prefix}x" for prefix in sql_guard.DENIED_FUNCTION_PREFIXES],
)
def test_every_denied_function_is_refused_wherever_it_appears(name: str, dialect: sql_guard.Dialect) -> None:
    for sql in (
        f"SELECT {name}(1)",
        f"SELECT * FROM {name}(1)",
        f"SELECT * FROM t WHERE a IN (SELECT {name}('a', 2))",
    ):
        assert not check_read_only(sql, dialect).allowed, sql
