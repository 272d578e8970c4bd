"""The SQLite data source: read-only connections, query limits and schema introspection.

Second wall behind the SQL guard: the file is opened read-only (``mode=ro``), ``query_only`` is on, ATTACH is
limited to zero databases, and an authorizer allows nothing but reading the data's tables (no system table)
and calling the functions of SQLite's allow-list (``tools/sql_allow.py``), besides the schema bookkeeping
of the ``json_each`` / ``json_tree`` table functions, ignored. Even a query the guard wrongly let through
cannot write. The guard itself lives in ``tools/sql_guard.py``.

Limits that hold: a value may not exceed the byte limit inside the engine (``SQLITE_LIMIT_LENGTH``); the
time limit is checked every ``_PROGRESS_STEPS`` instructions and, since one instruction can be a function
call that runs for seconds (``printf('%.*c', 1000000000, 'x')``), a watchdog interrupts the connection at
the deadline and the caller gets ``QueryTimeout`` then, whether or not that call has returned yet (the
statement stops at its next instruction, in its own thread). A ``printf`` / ``format`` result over the
byte limit, which SQLite turns into NULL without a word, is counted, so the result says it was clipped.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from plangate.errors import ConfigError
from plangate.tools.data.results import (
    Cell,
    ColumnInfo,
    DataSourceError,
    ForeignKey,
    QueryLimits,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SchemaInfo,
    SourceForbidden,
    TableInfo,
)
from plangate.tools.sql_allow import SQLITE_ENGINE_NAMES, system_relation
from plangate.tools.sql_guard import check_read_only

_T = TypeVar("_T")

_ALLOWED_ACTIONS = frozenset({
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
})
_PROGRESS_STEPS = 100
"""Virtual-machine instructions between two checks of the deadline."""
_GRACE_S = 0.2
_BUSY_WAIT_S = 5.0
"""After the watchdog's interrupt, how long the caller waits for the statement to stop before answering."""
_JSON_TABLES = re.compile(r"\bjson_(?:each|tree)\b", re.IGNORECASE)
_PRINTF = re.compile(r"\b(?:printf|format)\s*\(", re.IGNORECASE)


class _Authorizer:
    """Reading the data's own tables, and calling the functions of SQLite's allow-list, only.

    ``json_each`` and ``json_tree`` are table functions: SQLite declares their table when a statement first
    names one, reading the rowid of ``sqlite_master`` and asking to update it. For a statement that names
    one (and only then), the read is allowed and the update answered ``SQLITE_IGNORE``: the bookkeeping goes
    on, no column is written (the connection could not write anyway: read-only file, ``query_only``).
    """

    def __init__(self, sql: str) -> None:
        self._json_tables = _JSON_TABLES.search(sql) is not None

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: str | None
    ) -> int:
        if action == sqlite3.SQLITE_FUNCTION:
            return sqlite3.SQLITE_OK if (arg2 or "").lower() in SQLITE_ENGINE_NAMES else sqlite3.SQLITE_DENY
        if self._json_tables and arg1 == "sqlite_master":
            if action == sqlite3.SQLITE_UPDATE:
                return sqlite3.SQLITE_IGNORE
            if action == sqlite3.SQLITE_READ and arg2 == "ROWID":
                return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and system_relation("", arg1 or "", "sqlite"):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


class _Printf:
    """SQLite's own ``printf`` / ``format``, computed on a helper connection under the same length limit, so
    that a result over the limit (NULL, silently, from SQLite) is counted: the result then says so."""

    def __init__(self, max_length: int) -> None:
        self.over_limit = 0
        self._helper = sqlite3.connect(":memory:", check_same_thread=False)
        self._helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)

    def __call__(self, *args: Cell) -> str | None:
        if not args or args[0] is None:
            return None  # a NULL format gives NULL, as SQLite's printf does
        placeholders = ", ".join("?" * len(args))
        value: str | None = self._helper.execute(f"SELECT printf({placeholders})", args).fetchone()[0]
        if value is None:
            self.over_limit += 1
        return value

    def interrupt(self) -> None:
        self._helper.interrupt()

    def close(self) -> None:
        self._helper.close()


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQLite identifier."""
    return '"' + name.replace('"', '""') + '"'


class SqliteSource:
    """A SQLite database file, queried read-only.

    Args:
        name: the name the tools use for this source.
        path: the database file; it must exist.

    Raises:
        ConfigError: the file does not exist or is not a file.
    """

    dialect: Literal["sqlite"] = "sqlite"

    def __init__(self, name: str, path: str | Path) -> None:
        self.name = name
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise ConfigError(
                f"data source {name!r}: expected an existing SQLite file, got {str(self.path)!r}"
            )

    def describe(self) -> str:
        """Where the data lives, safe to show (a file path)."""
        return str(self.path)

    def query(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Run one read-only query within ``limits``.

        Raises:
            QueryRefused: the SQL guard refused the query; the database was not touched.
            QueryTimeout: the query ran past ``limits.timeout_s``.
            DataSourceError: the database rejected the query (syntax, unknown table, not authorized).
        """
        verdict = check_read_only(sql, self.dialect)
        if not verdict.allowed:
            raise QueryRefused(verdict.reason)
        return self.run_unguarded(sql, limits)

    def run_unguarded(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Run ``sql`` on the read-only connection without the SQL guard.

        Only for tests that prove the second wall holds on its own; tools always go through :meth:`query`.
        """
        connection = self._connect(limits)
        connection.set_authorizer(_Authorizer(sql))
        printf: _Printf | None = None
        if _PRINTF.search(sql):
            printf = _Printf(limits.max_value_bytes)
            for name in ("printf", "format"):
                connection.create_function(name, -1, printf)

        def fetch() -> QueryResult:
            cursor = connection.execute(sql)
            columns = [str(column[0]) for column in cursor.description or ()]
            rows: list[tuple[Cell, ...]] = [tuple(row) for row in cursor.fetchmany(limits.max_rows + 1)]
            over = printf.over_limit if printf is not None else 0
            return QueryResult(
                columns, rows[: limits.max_rows], more_rows=len(rows) > limits.max_rows, clipped_values=over
            )

        return _Watched(self.name, connection, limits, printf).run(fetch)

    def schema(self, limits: QueryLimits) -> SchemaInfo:
        """Tables and views with their columns, foreign keys and (for tables) row counts.

        Raises:
            QueryTimeout: counting rows ran past ``limits.timeout_s``.
            DataSourceError: the file is not a readable SQLite database.
        """
        connection = self._connect(limits)
        return _Watched(self.name, connection, limits).run(
            lambda: SchemaInfo(self.name, self.dialect, self._tables(connection))
        )

    def _tables(self, connection: sqlite3.Connection) -> list[TableInfo]:
        listed = connection.execute(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        tables = []
        for name, kind in listed:
            quoted = quote_identifier(name)
            columns = [
                ColumnInfo(name=row[1], type=row[2] or "", nullable=not row[3], primary_key=bool(row[5]))
                for row in connection.execute(f"PRAGMA table_info({quoted})")
            ]
            keys = [
                ForeignKey(column=row[3], references_table=row[2], references_column=row[4] or "")
                for row in connection.execute(f"PRAGMA foreign_key_list({quoted})")
            ]
            count = None
            if kind == "table":
                count = int(connection.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])
            tables.append(TableInfo(name, kind, columns, keys, count))
        return tables

    def _connect(self, limits: QueryLimits) -> sqlite3.Connection:
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        connection: sqlite3.Connection | None = None
        try:
            # Used by the statement's own thread, and interrupted from the caller's (``_Watched``). A writer
            # holding the file locked makes a reader wait: for half the time limit at most, so that the answer
            # is "database is locked" rather than a timeout.
            busy = min(_BUSY_WAIT_S, limits.timeout_s / 2)
            connection = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy
            )
            connection.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            if connection is not None:
                connection.close()
            message = f"data source {self.name!r}: cannot open {str(self.path)!r}: {exc}"
            raise DataSourceError(message) from None
        if _holds_a_store(connection):
            connection.close()
            raise SourceForbidden(
                "store", f"data source {self.name!r}: the file holds a plangate store (its runs), not data"
            )
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        # One huge value (hex() of hex() of a long string) would exhaust memory long before the byte limit on
        # the rendered text applies, so values are capped inside the engine.
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
        return connection


_STORE_TABLES = ("schema_version", "runs", "events")
"""What every plangate store has held since its first version, migrated or not."""


def _holds_a_store(connection: sqlite3.Connection) -> bool:
    """Whether the database holds a plangate store's tables (of any version): its tokens, answers and
    outputs are nobody's data to query."""
    marks = ", ".join("?" for _ in _STORE_TABLES)
    query = f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
    try:
        found = connection.execute(query, _STORE_TABLES).fetchone()[0]
    except sqlite3.Error:
        return False  # not a database: the query that follows says so
    return int(found) == len(_STORE_TABLES)


class _Watched:
    """One piece of work on a connection, in a thread of its own, stopped at the deadline.

    The progress handler stops the statement at the first instruction boundary past the deadline; the
    watchdog (the caller, waiting) interrupts the connection then too, and answers ``QueryTimeout`` within
    ``_GRACE_S`` even if a single long function call has not returned yet: the statement stops at its next
    instruction, and its thread closes the connection.
    """

    def __init__(
        self, source: str, connection: sqlite3.Connection, limits: QueryLimits, printf: _Printf | None = None
    ) -> None:
        self._source = source
        self._connection = connection
        self._limits = limits
        self._printf = printf
        self._at = time.monotonic() + limits.timeout_s
        self._expired = False
        self._lock = threading.Lock()
        self._closed = False
        connection.set_progress_handler(self._check, _PROGRESS_STEPS)

    def _check(self) -> int:
        if time.monotonic() >= self._at:
            self._expired = True
        return int(self._expired)

    def run(self, work: Callable[[], _T]) -> _T:
        """``work()``'s value, or the error it raised as a ``DataSourceError``.

        Raises:
            QueryTimeout: the deadline passed first.
            DataSourceError: the database rejected the work.
        """
        found: list[_T] = []
        failed: list[BaseException] = []
        done = threading.Event()

        def body() -> None:
            try:
                found.append(work())
            except BaseException as exc:
                failed.append(exc)
            finally:
                self._close()
                done.set()

        threading.Thread(target=body, name=f"plangate-sql-{self._source}", daemon=True).start()
        if not done.wait(self._limits.timeout_s):
            self._interrupt()
            done.wait(_GRACE_S)
        if found:
            return found[0]
        if not failed or self._expired:
            raise QueryTimeout(self._limits.timeout_s)
        error = failed[0]
        if isinstance(error, sqlite3.Error | sqlite3.Warning):
            raise DataSourceError(f"data source {self._source!r}: {_explain(error, self._limits)}") from None
        raise error

    def _interrupt(self) -> None:
        with self._lock:
            self._expired = True
            if not self._closed:
                self._connection.interrupt()
                if self._printf is not None:
                    self._printf.interrupt()

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._connection.close()
            if self._printf is not None:
                self._printf.close()


def _explain(error: sqlite3.Error | sqlite3.Warning, limits: QueryLimits) -> str:
    message = str(error)
    if "too big" in message:
        return f"{message} (a value over the {limits.max_value_bytes:,}-byte limit)"
    return message


__all__ = ["SqliteSource", "quote_identifier"]
