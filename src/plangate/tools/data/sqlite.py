"""The SQLite data source: read-only connections, query limits and schema introspection.

Second wall behind the SQL guard: the file is opened read-only (``mode=ro``), ``query_only`` is on, ATTACH is
limited to zero databases, and an authorizer allows nothing but reading and calling allowed functions. Even a
query the guard wrongly let through cannot write. The guard itself lives in ``tools/sql_guard.py``.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Literal

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
    TableInfo,
)
from plangate.tools.sql_guard import DENIED_FUNCTION_PREFIXES, DENIED_FUNCTIONS, check_read_only

_ALLOWED_ACTIONS = frozenset({
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
})
_PROGRESS_STEPS = 1_000
"""Virtual-machine instructions between two checks of the deadline: cheap, yet stops within milliseconds."""
_MIN_VALUE_BYTES = 65_536
_BUSY_WAIT_S = 5.0


def _authorize(
    action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: str | None
) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        if name in DENIED_FUNCTIONS or name.startswith(DENIED_FUNCTION_PREFIXES):
            return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


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
        with closing(self._connect(limits)) as connection:
            deadline = _Deadline(limits.timeout_s)
            connection.set_progress_handler(deadline.check, _PROGRESS_STEPS)
            connection.set_authorizer(_authorize)
            try:
                cursor = connection.execute(sql)
                columns = [str(column[0]) for column in cursor.description or ()]
                rows: list[tuple[Cell, ...]] = [tuple(row) for row in cursor.fetchmany(limits.max_rows + 1)]
            except (sqlite3.Error, sqlite3.Warning) as exc:
                if deadline.expired:
                    raise QueryTimeout(limits.timeout_s) from None
                raise DataSourceError(f"data source {self.name!r}: {exc}") from None
        return QueryResult(columns, rows[: limits.max_rows], more_rows=len(rows) > limits.max_rows)

    def schema(self, limits: QueryLimits) -> SchemaInfo:
        """Tables and views with their columns, foreign keys and (for tables) row counts.

        Raises:
            QueryTimeout: counting rows ran past ``limits.timeout_s``.
            DataSourceError: the file is not a readable SQLite database.
        """
        with closing(self._connect(limits)) as connection:
            deadline = _Deadline(limits.timeout_s)
            connection.set_progress_handler(deadline.check, _PROGRESS_STEPS)
            try:
                return SchemaInfo(self.name, self.dialect, self._tables(connection))
            except sqlite3.Error as exc:
                if deadline.expired:
                    raise QueryTimeout(limits.timeout_s) from None
                raise DataSourceError(f"data source {self.name!r}: {exc}") from None

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
            # A writer holding the file locked makes readers wait: at most the query's time limit.
            busy = min(_BUSY_WAIT_S, limits.timeout_s)
            connection = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=busy)
            connection.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            if connection is not None:
                connection.close()
            message = f"data source {self.name!r}: cannot open {str(self.path)!r}: {exc}"
            raise DataSourceError(message) from None
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        # One huge value (hex() of hex() of a long string) would exhaust memory long before the byte limit on
        # the rendered text applies, so values are capped inside the engine.
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(limits.max_bytes, _MIN_VALUE_BYTES))
        return connection


class _Deadline:
    """A progress handler that stops the statement once its time is up (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds
        self.expired = False

    def check(self) -> int:
        if time.monotonic() >= self._at:
            self.expired = True
        return int(self.expired)


__all__ = ["SqliteSource", "quote_identifier"]
