"""The PostgreSQL data source (optional: ``pip install "plangate[postgres]"``), queried read-only.

Second wall behind the SQL guard: every query runs in a ``READ ONLY`` transaction with a ``statement_timeout``
and is rolled back. The server enforces the time limit; a watchdog cancels the query from the client too,
shortly after the deadline, should the server not (a stalled connection, rows still arriving). A value over
the value limit (``QueryLimits.max_value_bytes``) is shown as NULL and counted, so the result says so.
Connection URLs carry passwords, so they never appear in messages; :meth:`describe` shows the URL with the
password masked. Only this module imports psycopg, and only when a source is built.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

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
from plangate.tools.sql_guard import check_read_only

URL_SCHEMES = ("postgresql", "postgres")
_T = TypeVar("_T")
_GRACE_S = 1.0
"""How long after the deadline the client cancels a query the server has not stopped."""

_TABLES_SQL = """
SELECT c.table_schema, c.table_name, c.column_name, c.data_type, c.is_nullable = 'YES',
       t.table_type
FROM information_schema.columns c
JOIN information_schema.tables t USING (table_schema, table_name)
WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema')
ORDER BY c.table_schema, c.table_name, c.ordinal_position
"""
_KEYS_SQL = """
SELECT tc.table_schema, tc.table_name, tc.constraint_type, kcu.column_name,
       ccu.table_name, ccu.column_name
FROM information_schema.table_constraints tc
JOIN information_schema.key_column_usage kcu
  ON tc.constraint_name = kcu.constraint_name AND tc.table_schema = kcu.table_schema
LEFT JOIN information_schema.constraint_column_usage ccu
  ON tc.constraint_type = 'FOREIGN KEY' AND tc.constraint_name = ccu.constraint_name
WHERE tc.constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY')
"""


def import_psycopg() -> ModuleType:
    """Import psycopg, or explain which extra installs it.

    Raises:
        ConfigError: psycopg is not installed.
    """
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        raise ConfigError(
            'PostgreSQL data sources need psycopg: pip install "plangate[postgres]"'
        ) from None


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresSource:
    """A PostgreSQL database reached by URL, queried in read-only transactions.

    Args:
        name: the name the tools use for this source.
        url: a ``postgresql://`` URL.

    Raises:
        ConfigError: psycopg is not installed or the URL is not a PostgreSQL URL.
    """

    dialect: Literal["postgres"] = "postgres"

    def __init__(self, name: str, url: str) -> None:
        if urlsplit(url).scheme not in URL_SCHEMES:
            raise ConfigError(
                f"data source {name!r}: expected a postgresql:// URL, got {mask_password(url)!r}"
            )
        self._psycopg = import_psycopg()
        self.name = name
        self._url = url

    def describe(self) -> str:
        """Where the data lives, with the password masked."""
        return mask_password(self._url)

    def query(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Run one read-only query within ``limits``.

        Raises:
            QueryRefused: the SQL guard refused the query.
            QueryTimeout: the query ran past ``limits.timeout_s``.
            DataSourceError: the server rejected the query or could not be reached.
        """
        verdict = check_read_only(sql, self.dialect)
        if not verdict.allowed:
            raise QueryRefused(verdict.reason)

        def fetch(cursor: Any) -> QueryResult:
            cursor.execute(sql)
            columns = [str(column.name) for column in cursor.description or ()]
            cells = _Cells(limits.max_value_bytes)
            rows: list[tuple[Cell, ...]] = [cells.of(row) for row in cursor.fetchmany(limits.max_rows + 1)]
            return QueryResult(
                columns,
                rows[: limits.max_rows],
                more_rows=len(rows) > limits.max_rows,
                clipped_values=cells.clipped,
            )

        return self._read(limits, fetch)

    def schema(self, limits: QueryLimits) -> SchemaInfo:
        """Tables and views outside the system schemas, with columns, keys and exact row counts of tables."""
        return SchemaInfo(self.name, self.dialect, self._read(limits, _read_tables))

    def _read(self, limits: QueryLimits, fetch: Callable[[Any], _T]) -> _T:
        psycopg = self._psycopg
        timeout_ms = max(1, int(limits.timeout_s * 1000))
        try:
            with psycopg.connect(self._url, connect_timeout=10, autocommit=False) as connection:
                connection.read_only = True
                watchdog = threading.Timer(limits.timeout_s + _GRACE_S, connection.cancel_safe)
                watchdog.daemon = True
                watchdog.start()
                try:
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
                        return fetch(cursor)
                finally:
                    watchdog.cancel()
                    connection.rollback()
        except psycopg.errors.QueryCanceled:
            raise QueryTimeout(limits.timeout_s) from None
        except psycopg.Error as exc:
            # psycopg messages can quote the connection string; keep the first line, the URL masked.
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            message = first.replace(self._url, self.describe())
            raise DataSourceError(f"data source {self.name!r}: {message}") from None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _read_tables(cursor: Any) -> list[TableInfo]:
    cursor.execute(_TABLES_SQL)
    tables: dict[tuple[str, str], TableInfo] = {}
    for schema, table, column, kind, nullable, table_type in cursor.fetchall():
        if (schema, table) not in tables:
            label = table if schema == "public" else f"{schema}.{table}"
            tables[(schema, table)] = TableInfo(label, "view" if table_type == "VIEW" else "table", [])
        tables[(schema, table)].columns.append(ColumnInfo(column, kind, bool(nullable)))
    cursor.execute(_KEYS_SQL)
    primary: set[tuple[str, str, str]] = set()
    for schema, table, constraint, column, ref_table, ref_column in cursor.fetchall():
        if (schema, table) not in tables:
            continue
        if constraint == "PRIMARY KEY":
            primary.add((schema, table, column))
        else:
            tables[(schema, table)].foreign_keys.append(ForeignKey(column, ref_table, ref_column))
    result = []
    for (schema, table), info in tables.items():
        columns = [
            ColumnInfo(c.name, c.type, c.nullable, (schema, table, c.name) in primary) for c in info.columns
        ]
        count = None
        if info.kind == "table":
            cursor.execute(f"SELECT count(*) FROM {_quote(schema)}.{_quote(table)}")
            count = int(cursor.fetchone()[0])
        result.append(TableInfo(info.name, info.kind, columns, info.foreign_keys, count))
    return result


class _Cells:
    """Rows as cells; a text or binary value over ``limit`` bytes becomes NULL, counted in ``clipped``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.clipped = 0

    def of(self, row: tuple[Any, ...]) -> tuple[Cell, ...]:
        return tuple(self._cell(value) for value in row)

    def _cell(self, value: Any) -> Cell:
        cell: Cell = value if value is None or isinstance(value, int | float | str | bytes) else str(value)
        # Characters, not bytes, for text: a UTF-8 character is at least one byte, so this never clips early.
        if isinstance(cell, str | bytes) and len(cell) > self.limit:
            self.clipped += 1
            return None
        return cell


__all__ = ["URL_SCHEMES", "PostgresSource", "import_psycopg", "mask_password"]
