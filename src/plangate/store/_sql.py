"""One way to run a statement on either backend, so that the unit of work, documents and tokens are written
once for SQLite and PostgreSQL.

For: ``Db``, the calls the shared code needs (one row, all rows, a row count, a batch), with errors already
turned into ``StoreError``; and its SQLite form. Not for: opening connections or transactions (each store
does that its own way), or SQL that only one backend speaks.

Shared statements use ``?`` placeholders and the SQL both backends accept (``INSERT … ON CONFLICT``,
``UPDATE … WHERE``); the PostgreSQL form rewrites ``?`` to psycopg's ``%s`` (``store/_pg_sql.py``), so a
shared statement never contains a literal ``?`` or ``%``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Protocol

from plangate.store._rows import Row
from plangate.store._sqlite_errors import Translated


class Db(Protocol):
    """A connection inside the caller's transaction (or in autocommit, for a single read)."""

    def one(self, query: str, params: Sequence[object] = ()) -> Row | None:
        """The first row the statement returns, or None."""
        ...

    def all(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row the statement returns."""
        ...

    def run(self, query: str, params: Sequence[object] = ()) -> int:
        """Run a statement that changes rows; how many it changed."""
        ...

    def run_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement that changes rows once for each parameter tuple of ``rows``."""
        ...


class SQLiteDb:
    """``Db`` on a ``sqlite3`` connection; errors are explained by ``sql``."""

    __slots__ = ("_conn", "_sql")

    def __init__(self, conn: sqlite3.Connection, sql: Translated) -> None:
        self._conn = conn
        self._sql = sql

    def one(self, query: str, params: Sequence[object] = ()) -> Row | None:
        """The first row the statement returns, or None."""
        with self._sql:
            row: Row | None = self._conn.execute(query, params).fetchone()
        return row

    def all(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row the statement returns."""
        with self._sql:
            return self._conn.execute(query, params).fetchall()

    def run(self, query: str, params: Sequence[object] = ()) -> int:
        """Run a statement that changes rows; how many it changed."""
        with self._sql:
            return self._conn.execute(query, params).rowcount

    def run_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement that changes rows once for each parameter tuple of ``rows``."""
        with self._sql:
            self._conn.executemany(query, rows)
