"""Running statements on a psycopg connection: the shared ``?`` statements, and psycopg errors turned into
``StoreError`` messages a person can act on; store URLs made safe to print.

For: every statement the PostgreSQL store runs, so that callers never see a raw psycopg exception, and the
one place that strips a password before a URL is printed. Not for: argument checks (``store/_checks.py``),
which raise ``ConfigError`` before any SQL runs.
"""

from __future__ import annotations

import functools
import select
from collections.abc import Sequence
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors
from psycopg.rows import DictRow

from plangate.errors import Signal
from plangate.store._rows import Row
from plangate.store._sql import Translated as _Translated
from plangate.store.ddl import Dialect

# SQLSTATE classes and codes that mean the session is gone: the server shut down or restarted (57P01-03),
# an administrator ended the backend (57P01 again), or the network dropped (08xxx).
_LOST_CODES = frozenset({"57P01", "57P02", "57P03"})


class Translated(_Translated):
    """``Translated`` for ``psycopg.Error``: re-raised as ``StoreError`` naming what failed where."""

    __slots__ = ()

    error = psycopg.Error

    def explain(self, exc: Exception) -> str:
        """A one-line message for a psycopg error (``explain``)."""
        return explain(self.what, self.where, exc, self.busy_timeout)


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to the server is gone (rather than that a statement failed)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    code = exc.sqlstate or ""
    return code in _LOST_CODES or code.startswith("08") or not code


def explain(what: str, where: str, exc: Exception, busy_timeout: float) -> str:
    """A one-line message for a psycopg error (a ``psycopg.Error``): what we tried, on which store, and what
    to look at."""
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, errors.LockNotAvailable):
        hint = (
            f"; another transaction held the run's lock for more than {busy_timeout:g} s (a long "
            "transaction, or a process stuck inside one)"
        )
    elif isinstance(exc, errors.DeadlockDetected):
        hint = "; two transactions waited for each other and this one was rolled back: try it again"
    elif isinstance(exc, errors.IdleInTransactionSessionTimeout):
        hint = "; the transaction stayed open too long without a statement and the server ended it"
    elif connection_lost(exc):
        hint = (
            "; the connection to the database was lost (the server restarted or stopped, or the session "
            "was ended): whatever this transaction had not committed was rolled back"
        )
    elif isinstance(exc, errors.InsufficientPrivilege):
        hint = "; the database user lacks a privilege on the store's tables or schema"
    elif isinstance(exc, errors.DiskFull):
        hint = "; the database server's disk is full"
    elif isinstance(exc, errors.ReadOnlySqlTransaction):
        hint = "; the server is read-only (a standby?): point the store at the primary"
    else:
        hint = ""
    return f"{what} failed on the store at {where}: {detail}{hint}"


def safe_url(url: str) -> str:
    """``url`` without its password (and without query options, which may carry one too)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Stale(Signal):
    """A transaction's guard found the run's row other than the store expected (``PostgresDb``'s ``guard``):
    the transaction was rolled back, nothing of it was written; ``PostgresStore.commit`` catches it and
    commits again, reading the row."""


class PostgresDb:
    """``Db`` (``store/_sql.py``) on a psycopg connection of dict rows; errors explained by ``sql``.

    In a transaction (``begin`` given), round trips are spent only where an answer is awaited: the
    ``BEGIN`` travels with the first statement, and the statements ``defer`` queues travel with the
    ``COMMIT`` (``commit``), each group in one simple query (its values bound by psycopg on this side: one
    message and one answer, where a pipeline's many small steps cost the client more than the round trips
    they save). Outside one, every statement runs at once.

    A ``guard`` (a statement and its values) goes right after the ``BEGIN``: a query that locks the run's
    row and divides by zero unless the row is as the store expects. When it does, the server runs
    nothing after it, and ``Stale`` is raised instead of a ``StoreError``.
    """

    __slots__ = ("_begin", "_conn", "_deferred", "_guard", "_sql", "committing")

    dialect: ClassVar[Dialect] = "postgresql"

    def __init__(
        self,
        conn: psycopg.Connection[DictRow],
        sql: Translated,
        *,
        begin: str | None = None,
        guard: tuple[str, Sequence[object]] | None = None,
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._begin = begin  # the transaction's BEGIN while it is not sent yet
        self._guard = guard if begin is not None else None  # sent with the BEGIN
        self._deferred: list[tuple[str, Sequence[Sequence[object]]]] | None = None if begin is None else []
        #: the ``COMMIT`` is on its way (or was sent): a connection lost now may have committed
        self.committing = False

    def one(self, query: str, params: Sequence[object] = ()) -> Row | None:
        """The first row the statement returns, or None."""
        with self._sql:
            return self._execute(query, params).fetchone()

    def all(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row the statement returns."""
        with self._sql:
            return list(self._execute(query, params).fetchall())

    def run(self, query: str, params: Sequence[object] = ()) -> int:
        """Run a statement that changes rows; how many it changed."""
        with self._sql:
            return self._execute(query, params).rowcount

    def run_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement that changes rows once for each parameter tuple of ``rows`` (psycopg pipelines
        them where libpq can: one round trip, not one per row)."""
        with self._sql:
            if self._begin is not None:
                self._send(psycopg.ClientCursor(self._conn), [])
            with self._conn.cursor() as cursor:
                cursor.executemany(placeholders(query), rows)

    def defer(self, query: str, params: Sequence[object] = ()) -> None:
        """Run a statement that changes rows, whose count nobody reads, before the transaction commits: in a
        transaction it is sent with the ``COMMIT``; outside one, now."""
        self.defer_many(query, [params])

    def defer_many(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        """``defer`` the statement once for each parameter tuple of ``rows``."""
        if self._deferred is None:
            self.run_many(query, rows)
        elif rows:
            self._deferred.append((query, rows))

    def commit(self) -> None:
        """Send what was deferred and ``COMMIT``, in one round trip (nothing at all when the transaction
        wrote and read nothing). An error of a deferred statement is raised here, and nothing was committed:
        the server runs nothing after it in the query."""
        deferred, self._deferred = self._deferred or [], None
        if self._begin is not None and not deferred:
            self._begin = self._guard = None  # never sent: no transaction to end (nor a guard to check)
            return
        conn = self._conn
        if session_ended(conn):
            raise psycopg.OperationalError("the server ended the session before the transaction committed")
        self.committing = True
        cursor = psycopg.ClientCursor(conn)
        parts: list[str] = []
        for query, rows in deferred:
            sql = placeholders(query)
            parts.extend(cursor.mogrify(sql, row) for row in rows)
        parts.append("COMMIT")
        self._send(cursor, parts)

    def _execute(self, query: str, params: Sequence[object]) -> psycopg.Cursor[DictRow]:
        if self._begin is None:
            return self._conn.execute(placeholders(query), params)
        # The BEGIN and the first statement in one simple query: one round trip, ending in the ReadyForQuery
        # that arms the server's idle-in-transaction timeout (a pipeline may end in a Flush, after which the
        # server never arms it).
        cursor = psycopg.ClientCursor(self._conn)
        for _ in range(self._send(cursor, [cursor.mogrify(placeholders(query), params)])):
            cursor.nextset()  # to the statement's own result
        return cursor

    def _send(self, cursor: psycopg.ClientCursor[DictRow], statements: list[str]) -> int:
        """Run ``statements`` in one simple query, after the ``BEGIN`` and the guard while they are not sent
        yet; how many of those went first."""
        guard, self._guard = self._guard, None
        if self._begin is not None:
            head = [self._begin] if guard is None else [self._begin, cursor.mogrify(*guard)]
            self._begin = None
            statements = head + statements
        else:
            head = []
        try:
            cursor.execute("; ".join(statements))
        except errors.DivisionByZero:
            if guard is not None:
                raise Stale("the run's row changed since the store last committed to it") from None
            raise
        return len(head)


def session_ended(conn: psycopg.Connection[DictRow]) -> bool:
    """Whether the server ended the session while the client was silent: it left something to read (its
    goodbye, then the end of the stream), and reading it leaves the connection unusable. One ``select``
    call when nothing came, which is the rule."""
    for _ in range(3):  # a goodbye, the end of the stream, and perhaps a notice before them
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
        if not readable:
            return False
        try:
            conn.pgconn.consume_input()
        except psycopg.OperationalError:
            return True
        if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
            return True
    return False


@functools.lru_cache(maxsize=1024)
def placeholders(query: str) -> str:
    """A shared statement (``?`` placeholders) in psycopg's form (``%s``)."""
    return query.replace("?", "%s")
