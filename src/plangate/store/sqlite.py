"""The SQLite store: one file (or memory), WAL, safe for several threads and several processes.

For: the default ``Store`` backend, built on the standard library's ``sqlite3``: its connections, and what
it does its own way (inserting a run, subscriptions, migrations under the file's write lock, the statements
that take and extend a lease). Not for: the reads, small writes and the transaction's skeleton both backends
share (``store/_backend.py``), parsing store URLs (``store/url.py``), the schema (``store/_schema.py``) or
the unit of work (``store/_tx.py``).

Concurrency: writes go through one connection per store object, guarded by a lock, so threads of a process
take turns. Reads of a file store go through a connection of the reading thread's own, outside that lock:
in WAL mode a reader never waits for a writer, so a write stuck on another process's lock (up to
``busy_timeout``) never holds up the threads that only read, and a reader never sees another thread's
uncommitted writes. A store in memory is one connection, reads included. Between processes, every write
transaction starts with ``BEGIN IMMEDIATE``, so it holds the file's write lock from its first statement and
the ``seq`` it reads cannot be taken by another process; others wait up to ``busy_timeout``. WAL with
``synchronous=NORMAL`` survives a killed process (only its open transaction is lost); a power cut may lose
the last commits, never the file. The log is folded back into the file by a thread of the store
(``_sqlite_checkpoint``), so that no commit waits for a checkpoint's syncs. A store opened before a
``fork()`` refuses to work in the child.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from plangate.errors import ConfigError, StoreError
from plangate.store import _checks as check
from plangate.store import _leases as leases
from plangate.store import _rows as rows
from plangate.store._backend import (
    INSERT_RUN,
    Backend,
    NewRun,
    Unit,
    check_related,
    run_exists,
)
from plangate.store._migrate import Component
from plangate.store._sql import Db, SQLiteDb
from plangate.store._sqlite_checkpoint import Checkpointer
from plangate.store._sqlite_errors import Translated, explain
from plangate.store._sqlite_schema import migrate, open_schema
from plangate.store.base import (
    Lease,
    RunRecord,
    Subscriber,
)

T = TypeVar("T")
Y = TypeVar("Y")

logger = logging.getLogger("plangate.store")

MEMORY = ":memory:"
"""The target of a store that lives in memory and dies with its object."""


class SQLiteStore(Backend):
    """A ``Store`` in one SQLite file, or in memory with ``SQLiteStore(":memory:")``.

    Args:
        path: the database file (its folder is created) or ``":memory:"``.
        busy_timeout: how long a write waits for another process's transaction, in seconds.
        clock: where timestamps come from (seconds since the epoch); tests pass a fake one.

    Raises:
        StoreError: the file cannot be opened or is not a SQLite database.
        SchemaVersionError: the file was written by a newer plangate.
    """

    dialect = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path: Path | None = None if str(path) == MEMORY else Path(path).expanduser()
        self._where = MEMORY if self.path is None else str(self.path)
        self._busy_timeout = check.seconds(busy_timeout, "busy_timeout")
        self._clock = clock
        self._lock = threading.RLock()
        self._opened_here()
        self._subscribers: tuple[Subscriber, ...] = ()
        self._subscribers_lock = threading.Lock()
        self._closed = False
        self._readers = threading.local()
        self._readers_lock = threading.Lock()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conn = self._connect()
        try:
            with self._sql("opening"):
                self.database.migrated(open_schema(self._conn, self._where))
        except BaseException:
            self._conn.close()
            raise
        # a file's log is checkpointed by a thread of its own, not by a commit (``_sqlite_checkpoint``)
        self._checkpoints: Checkpointer | None = None
        if self.path is not None:
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._checkpoints = Checkpointer(self.path, self._busy_timeout)
        # the write connection never waits inside SQLite: a BEGIN that finds the file locked says so at
        # once, and only ``_begin`` (not ``_begin_at_once``) then waits, up to ``busy_timeout``
        self._conn.execute("PRAGMA busy_timeout = 0")

    # -- lifecycle ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; later calls fail with ``StoreError``. Closing twice is harmless."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._checkpoints is not None:
                    self._checkpoints.close()
                self._conn.close()
                with self._readers_lock:
                    readers, self._reader_conns = self._reader_conns, []
                for conn in readers:
                    conn.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._where!r})"

    # -- runs ---------------------------------------------------------------------------------------------

    def _insert_run(self, new: NewRun) -> RunRecord:
        """Insert the run (``create_run`` checked its values): under the file's write lock, so of two
        processes creating the same id exactly one succeeds."""
        with self._writing("create_run") as db:
            check_related(db, new.related, self._where)
            if run_exists(db, new.id):
                raise ConfigError(f"create_run: run_id: a run {new.id!r} exists already in {self._where}")
            db.run(INSERT_RUN, new.values(self._clock()))
            row = db.one(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (new.id,))
        if row is None:  # inserted under the write lock the block held: only a broken file loses it
            raise StoreError(f"create_run: run {new.id!r} could not be read back from {self._where}")
        return rows.run_record(row)

    # -- writing ------------------------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber, *, remote: bool = False) -> Callable[[], None]:
        """Call ``callback(commit)`` after each commit through this object that added events or set a status.

        Only commits made through this store object are seen, ``remote`` or not: processes sharing a SQLite
        file have no channel to tell each other (readers catch up from the file). The callback runs in the
        committing thread: keep it short (hand the events to a queue or an event loop). An exception it
        raises is logged and does not affect the commit or the other subscribers.
        """
        with self._subscribers_lock:
            self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            with self._subscribers_lock:
                kept = list(self._subscribers)
                with contextlib.suppress(ValueError):
                    kept.remove(callback)
                self._subscribers = tuple(kept)

        return unsubscribe

    # -- leases -------------------------------------------------------------------------------------------

    def _take_lease(self, run_id: str, holder: str, ttl: float) -> Lease | None:
        with self._writing("take_lease") as db:
            now = self._clock()
            # One statement decides and writes (SET reads the old row), under the file's write lock.
            db.run(
                "UPDATE runs SET lease_generation = CASE WHEN lease_owner = ? AND lease_expires_at > ? "
                "THEN lease_generation ELSE lease_generation + 1 END, lease_owner = ?, lease_expires_at = ? "
                "WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at <= ?)",
                (holder, now, holder, now + ttl, run_id, holder, now),
            )
            current = self._lease_row(db, run_id)
        return current if current is not None and current.holder == holder else None

    def _extend_lease(self, fence: Lease, ttl: float) -> float:
        with self._writing("extend_lease") as db:
            now = self._clock()
            leases.require_current(fence, self._lease_row(db, fence.run_id), now, "extend_lease")
            db.run("UPDATE runs SET lease_expires_at = ? WHERE id = ?", (now + ttl, fence.run_id))
        return now + ttl

    # -- internals ----------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target = MEMORY
        if self.path is not None:
            target = str(self.path)
            if self.path.is_dir():
                raise StoreError(
                    f"cannot open the store at {target}: expected a database file, found a directory"
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder of the store at {target}: {exc.strerror or exc}"
                ) from None
        sql = self._sql("opening")
        conn: sqlite3.Connection | None = None
        try:
            with sql:
                conn = sqlite3.connect(
                    target, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
                )
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
                _refuse_foreign(conn, self._where)  # before anything writes to the file (WAL: its header)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    def _reader(self, sql: Translated) -> sqlite3.Connection:
        """This thread's read connection to the file, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is not None:
            return conn
        with sql:
            conn = sqlite3.connect(
                str(self.path), timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
                conn.execute("PRAGMA query_only = ON")
            except BaseException:
                conn.close()
                raise
        with self._readers_lock:
            self._reader_conns.append(conn)
        self._readers.conn = conn
        return conn

    def _sql(self, what: str) -> Translated:
        return Translated(what, self._where, self._busy_timeout)

    def _begin(self, sql: Translated) -> None:
        # IMMEDIATE takes the write lock now, so the run row (and its last_seq) read next is ours alone;
        # when another process holds it, this waits for it up to ``busy_timeout``.
        if not self._begin_at_once(sql):
            with self._waiting(), sql:
                self._conn.execute("BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """The write connection waits for another process's lock, up to ``busy_timeout``, in this block."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        try:
            yield
        finally:
            self._conn.execute("PRAGMA busy_timeout = 0")

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                # The original exception matters more; SQLite drops the transaction with the connection.
                logger.warning(
                    "rollback failed: %s", explain("rollback", self._where, exc, self._busy_timeout)
                )

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[SQLiteDb]:
        """This thread's read connection (a store in memory: its one connection, under the lock)."""
        self._check_usable(what)
        sql = self._sql(what)
        if self.path is None:
            with self._lock, sql:
                yield SQLiteDb(self._conn, sql)
            return
        conn = self._reader(sql)
        with sql:
            yield SQLiteDb(conn, sql)

    @contextlib.contextmanager
    def _consistent(self, what: str) -> Iterator[SQLiteDb]:
        """A read transaction on this thread's read connection: in WAL mode, every statement in it sees the
        file as of its first read, whatever other processes commit meanwhile."""
        with self._reading(what) as db:
            if self.path is None:  # one connection, under the lock: nobody commits meanwhile
                yield db
                return
            db.run("BEGIN")
            try:
                yield db
            finally:
                db.run("COMMIT")  # a read transaction: nothing to keep or lose either way

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[Db]:
        """The write connection in a ``BEGIN IMMEDIATE`` transaction (the file's write lock, to the end)."""
        yield from self._within(what, _lent)

    def _within(self, what: str, unit: Unit[Y, T]) -> Generator[Y, None, T]:
        self._check_usable(what)
        sql = self._sql(what)
        with self._lock:
            self._begin(sql)
            return (yield from self._committed(sql, unit))

    def _at_once(self, what: str, unit: Unit[Y, T]) -> Generator[Y | None, None, T | None]:
        """``_within`` if neither another thread of this process (the store's lock) nor another process
        (the file's write lock) holds the write lock now: None instead of waiting for them."""
        self._check_usable(what)
        if not self._lock.acquire(blocking=False):
            yield None
            return None
        try:
            sql = self._sql(what)
            if not self._begin_at_once(sql):
                yield None
                return None
            return (yield from self._committed(sql, unit))
        finally:
            self._lock.release()

    def _committed(self, sql: Translated, unit: Unit[Y, T]) -> Generator[Y, None, T]:
        """The rest of a write transaction begun on the write connection: ``unit`` on it (which hands out
        what the block gets, its one ``yield``), then the commit, or a rollback when the block raised; the
        commit counts toward the next checkpoint. Generators the callers delegate to, not blocks of their
        own: they are on every commit's path."""
        try:
            with sql:
                done = yield from unit(SQLiteDb(self._conn, sql))
                self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        if self._checkpoints is not None:
            self._checkpoints.committed(self._conn)
        return done

    def _begin_at_once(self, sql: Translated) -> bool:
        """``BEGIN IMMEDIATE`` without waiting: False when another process holds the file's write lock."""
        try:  # not ``sql``'s block, on every commit's path: a ``try`` costs nothing until it fails
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            # an extended code keeps its base (an error the module raises itself has no code)
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:
                return False
            raise StoreError(sql.explain(exc)) from None
        return True

    def _statement(self, what: str) -> contextlib.AbstractContextManager[Db]:
        # the read connections only read (``query_only``): a write goes through the write connection
        return self._writing(what)

    def _migrate(self, component: Component) -> None:
        what = f"opening the {component.name} tables"
        self._check_usable(what)
        with self._lock, self._waiting(), self._sql(what):
            migrate(self._conn, self._where, component)

    def _compact(self, what: str, tables: Sequence[str]) -> None:
        """``VACUUM`` the whole file (SQLite has no per-table one), then fold the write-ahead log back into
        it and truncate the log, so that the file on disk shrinks."""
        self._check_usable(what)
        paused = self._checkpoints.paused() if self._checkpoints is not None else contextlib.nullcontext()
        with self._lock, paused, self._waiting(), self._sql(what):
            self._conn.execute("VACUUM")
            if self.path is not None:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _lent(db: Db) -> Generator[Db, None, None]:
    """The connection itself, lent to a ``with`` block (``_writing``)."""
    yield db


def _refuse_foreign(conn: sqlite3.Connection, where: str) -> None:
    """Refuse a database that holds tables of its own and no plangate schema (someone's data, named as the
    store by mistake): a store is made only in a new or empty file, never among other tables.

    Raises:
        StoreError: the file holds other tables; nothing was written to it.
    """
    found = [
        name
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        if not name.startswith("sqlite_")
    ]
    if found and "schema_version" not in found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise StoreError(
            f"the database at {where} is not a plangate store: it holds other tables ({shown}), and a store "
            "is made only in a new or empty file; name another file as the store"
        )
