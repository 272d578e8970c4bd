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
from types import TracebackType
from typing import ClassVar, Protocol

from plangate.errors import StoreError
from plangate.store._rows import Row
from plangate.store.ddl import Dialect


class Translated:
    """A reusable ``with`` block that re-raises a driver's error as ``StoreError`` naming what failed where.

    A class rather than a generator context manager: it wraps every statement of the hot path. Each backend
    names its driver's error class and how to explain one (``_sqlite_errors.py``, ``_pg_sql.py``).

    Attributes:
        what: what was being done (``the transaction on run 'run_…'``).
        where: the store's location, without a password.
        busy_timeout: how long a statement waits for a lock, named in the message when it waited too long.
    """

    __slots__ = ("busy_timeout", "what", "where")

    #: the driver's base error class: what this block translates (each backend's subclass sets it)
    error: ClassVar[type[Exception]]

    def __init__(self, what: str, where: str, busy_timeout: float) -> None:
        self.what = what
        self.where = where
        self.busy_timeout = busy_timeout

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, self.error):
            raise StoreError(self.explain(exc)) from None

    def explain(self, exc: Exception) -> str:
        """A one-line message for the driver's error ``exc``: what was tried, where, and what to look at."""
        return f"{self.what} failed on the store at {self.where}: {exc}"


class Db(Protocol):
    """A connection inside the caller's transaction (or in autocommit, for a single read).

    Attributes:
        dialect: the SQL it speaks, for the rare statement that only one backend accepts.
    """

    dialect: ClassVar[Dialect]

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

    def defer(self, query: str, params: Sequence[object] = ()) -> None:
        """Run a statement that changes rows, whose count nobody reads, before the transaction commits
        (PostgreSQL sends it with the ``COMMIT``, in the same round trip; SQLite runs it now)."""
        ...

    def defer_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """``defer`` the statement once for each parameter tuple of ``rows``."""
        ...


class SQLiteDb:
    """``Db`` on a ``sqlite3`` connection; errors are explained by ``sql``.

    Each statement catches the driver's error itself rather than entering ``sql``'s block: a ``try`` costs
    nothing until something fails, and these run several times in every commit.
    """

    __slots__ = ("_conn", "_sql")

    dialect: ClassVar[Dialect] = "sqlite"

    def __init__(self, conn: sqlite3.Connection, sql: Translated) -> None:
        self._conn = conn
        self._sql = sql

    def one(self, query: str, params: Sequence[object] = ()) -> Row | None:
        """The first row the statement returns, or None."""
        try:
            row: Row | None = self._conn.execute(query, params).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(self._sql.explain(exc)) from None
        return row

    def all(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row the statement returns."""
        try:
            return self._conn.execute(query, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(self._sql.explain(exc)) from None

    def run(self, query: str, params: Sequence[object] = ()) -> int:
        """Run a statement that changes rows; how many it changed."""
        try:
            return self._conn.execute(query, params).rowcount
        except sqlite3.Error as exc:
            raise StoreError(self._sql.explain(exc)) from None

    def run_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement that changes rows once for each parameter tuple of ``rows``."""
        try:
            self._conn.executemany(query, rows)
        except sqlite3.Error as exc:
            raise StoreError(self._sql.explain(exc)) from None

    def defer(self, query: str, params: Sequence[object] = ()) -> None:
        """Run a statement whose count nobody reads: in process, there is no round trip to save."""
        self.run(query, params)

    def defer_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """``run_many``: in process, there is no round trip to save."""
        self.run_many(query, rows)
