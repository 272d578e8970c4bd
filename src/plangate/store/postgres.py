"""The PostgreSQL store: many processes on many machines, one database, the same guarantees as SQLite's.

For: the ``Store`` backend for servers and workers, on psycopg 3 and a ``psycopg_pool`` connection pool,
opened from a ``postgresql://`` URL (``open_store``): its connections, and what it does its own way
(inserting a run, the run row's lock and the commit's ``NOTIFY`` in a transaction, subscriptions,
migrations under an advisory lock, the statements that take and extend a lease). Not for: the reads, small
writes and the transaction's skeleton both backends share (``store/_backend.py``), the schema
(``store/_schema.py``), the unit of work (``store/_tx.py``, shared with SQLite) or the listener of other
processes' commits (``store/_pg_listen.py``).

Concurrency: every transaction on a run starts by locking the run's row (``SELECT … FOR NO KEY UPDATE``),
so transactions on one run take turns across every process and machine, and the ``seq`` a transaction reads
cannot be taken by another; transactions on other runs go on in parallel. A statement waits at most
``busy_timeout`` for a lock. A session that stays idle inside a transaction for ``stuck_timeout`` (a paused
or hung process) is ended by the server, which rolls it back and frees the run. Each commit that added events
or set a status sends a ``NOTIFY`` (on a channel of the store's schema), so that subscribers with
``remote=True`` in any other process hear it.

Round trips: a transaction costs two (the ``BEGIN`` with the row's lock, then the writes with the
``COMMIT``). A fenced ``commit`` made after this store's own last commit on the run, under the same lease,
costs one: it begins from what that commit left (the run's status and last ``seq``) and sends, with its
writes, a guard that locks the row and fails unless it is still so; when somebody else wrote to the run
meanwhile, nothing is written and the commit is made again the two-round-trip way (``commit``).

Connections: the pool hands each call a connection and takes it back. A connection the server closed (a
restart, ``pg_terminate_backend``) is noticed before it is handed out, without a round trip, and replaced;
a connection lost in the middle of a call fails that call with a ``StoreError`` saying so (its transaction is
rolled back by the server: nothing half-written), and the next call gets a new connection. While the server
is down, a call waits up to ``connect_timeout`` for it to come back, then fails. A store opened before a
``fork()`` refuses to work in the child.

The tables live in the first schema of the connection's ``search_path`` (``public`` unless the URL says
``?options=-csearch_path%3Dother``), so that one database can hold several stores.
"""

from __future__ import annotations

try:
    import psycopg
    from psycopg.rows import DictRow, dict_row
    from psycopg.types.string import TextLoader
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised by the URL test with psycopg hidden
    raise ImportError(
        'the PostgreSQL store needs psycopg 3 and psycopg_pool: pip install "plangate[postgres]"'
    ) from exc

import contextlib
import json
import logging
import secrets
import select
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from plangate.errors import ConfigError, NotFoundError, StoreError
from plangate.events import Event
from plangate.store import _checks as check
from plangate.store import _leases as leases
from plangate.store import _rows as rows
from plangate.store._backend import (
    INSERT_RUN,
    Backend,
    Block,
    NewRun,
    Told,
    check_related,
    run_exists,
)
from plangate.store._migrate import Component
from plangate.store._pg_listen import Listener
from plangate.store._pg_schema import migrate, open_schema
from plangate.store._pg_sql import PostgresDb, Stale, Translated, connection_lost, explain, safe_url
from plangate.store._sql import Db
from plangate.store._tx import StoreTransaction
from plangate.store.base import (
    Commit,
    Lease,
    RunRecord,
    Subscriber,
)
from plangate.vocab import TERMINAL_STATUSES

logger = logging.getLogger("plangate.store")

Connection = psycopg.Connection[DictRow]
T = TypeVar("T")

#: The guard of a transaction that begins from what the store knows of its run (``PostgresStore.commit``):
#: it locks the run's row as a transaction's first read does, and fails (a division by zero) unless the row
#: is as the store left it and the lease still the transaction's fence.
_GUARD = (
    "SELECT 1 / count(*) FROM (SELECT 1 FROM runs WHERE id = %s AND status = %s AND last_seq = %s "
    "AND updated_at = %s AND lease_owner = %s AND lease_generation = %s AND lease_expires_at > %s"
    " FOR NO KEY UPDATE) AS held"
)
#: how many runs a store remembers its last commit on (the runs its process is advancing, in practice)
_KNOWN_RUNS = 4096


@dataclass(frozen=True, slots=True)
class _Known:
    """A run's row as this store's last commit on it left it, under the lease ``holder``/``generation``."""

    holder: str
    generation: int
    status: str
    last_seq: int
    updated_at: float


class PostgresStore(Backend):
    """A ``Store`` in a PostgreSQL database, shared by every process that opens the same URL.

    Args:
        url: ``postgresql://user:password@host:port/database`` (any libpq URL).
        pool_size: the most connections this store object opens at once.
        busy_timeout: how long a statement waits for a lock held by another transaction, in seconds.
        connect_timeout: how long opening, or waiting for a connection, may take before failing, in seconds.
        stuck_timeout: after how long idle inside a transaction the server ends a session, in seconds.
        clock: where timestamps (and lease expiry) come from; tests pass a fake one. Machines sharing a
            store should keep their clocks in sync (NTP): a lease's expiry is judged by each one's clock,
            while its generation fences commits whatever the clocks say.

    Raises:
        StoreError: the database cannot be reached, or refused the schema.
        SchemaVersionError: the database was written by a newer plangate.
    """

    dialect = "postgresql"
    _ROW_LOCK = " FOR NO KEY UPDATE"
    _TX_READS_RECORD = True

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        busy_timeout: float = 5.0,
        connect_timeout: float = 10.0,
        stuck_timeout: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._where = safe_url(url)
        self._pool_size = check.integer(pool_size, "pool_size", minimum=1)
        self._busy_timeout = check.seconds(busy_timeout, "busy_timeout")
        self._connect_timeout = check.seconds(connect_timeout, "connect_timeout")
        self._stuck_timeout = check.seconds(stuck_timeout, "stuck_timeout")
        self._clock = clock
        self._origin = secrets.token_hex(8)
        self._opened_here()
        self._subscribers: tuple[Subscriber, ...] = ()
        self._remote: tuple[Subscriber, ...] = ()
        self._subscribers_lock = threading.Lock()
        self._listener: Listener | None = None
        self._closed = False
        self._known: dict[str, _Known] = {}
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=1,
            max_size=self._pool_size,
            open=False,
            configure=self._configure,
            check=_check_idle,
            timeout=self._connect_timeout,
            name="plangate-store",
        )
        # The schema is checked on a connection of its own first: a server that cannot be reached is one
        # clear error at once, and the pool (making its first connection in the background) is opened only
        # then, so that it logs no failed attempts of its own beside that error.
        self._channel = self._open_schema()
        self._pool.open(wait=False)

    # -- lifecycle ----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL this store was opened with (it may hold a password: never show it)."""
        return self._url

    def close(self) -> None:
        """Close the connections (and the listener); later calls fail with ``StoreError``. Closing twice is
        harmless."""
        if self._closed:
            return
        self._closed = True
        if self._listener is not None:
            self._listener.stop()
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    # -- runs ---------------------------------------------------------------------------------------------

    def _insert_run(self, new: NewRun) -> RunRecord:
        """Insert the run (``create_run`` checked its values)."""
        with self._reading("create_run") as db:
            check_related(db, new.related, self._where)
            # One statement, so that of two processes creating the same id exactly one succeeds.
            row = db.one(
                f"{INSERT_RUN} ON CONFLICT (id) DO NOTHING RETURNING {rows.RUN_COLUMNS}",
                new.values(self._clock()),
            )
        if row is None:
            raise ConfigError(f"create_run: run_id: a run {new.id!r} exists already in {self._where}")
        record = rows.run_record(row)
        if new.lease is not None:  # generation 1, held from the start
            self._remember(record.id, new.lease[0], 1, (record.status, 0, record.updated_at))
        return record

    # -- writing ------------------------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber, *, remote: bool = False) -> Callable[[], None]:
        """Call ``callback(commit)`` after each commit through this object that added events or set a status.

        The callback runs in the committing thread: keep it short (hand the events to a queue or an event
        loop). With ``remote``, it also hears the commits of every other store object on this database and
        schema (other processes, other machines), in their commit order, from a listener thread; the first
        remote subscriber starts that thread and waits (up to ``connect_timeout``) until it listens. A
        commit made while the listener was cut off (a server restart) is not heard: readers catch up from
        the store. An exception the callback raises is logged and affects neither the commit nor the other
        subscribers.
        """
        if self._closed:
            raise StoreError(f"subscribe: the store at {self._where} is closed")
        with self._subscribers_lock:
            self._subscribers = (*self._subscribers, callback)
            if remote:
                self._remote = (*self._remote, callback)
                if self._listener is None:
                    self._listener = Listener(self._url, self._channel, self._on_remote, self._where)
                    self._listener.start(self._connect_timeout)

        def unsubscribe() -> None:
            with self._subscribers_lock:
                self._subscribers = _without(self._subscribers, callback)
                self._remote = _without(self._remote, callback)

        return unsubscribe

    def commit(self, run_id: str, write: Callable[[StoreTransaction], T], *, fence: Lease) -> T:
        """``Backend.commit`` in one round trip where it can: when this store made the last commit on the
        run, under the same lease, the transaction begins from what that commit left (its status and last
        ``seq``) instead of reading the row, and a guard sent with its writes locks the row and checks it
        is still so. When somebody else wrote to the run since (an answer, a cancel, a new holder of the
        lease), the guard fails, the transaction is rolled back, the events it stamped are handed back as
        they were, and ``write`` runs again in a transaction that reads the row first."""
        checked = leases.checked_fence(fence, run_id)
        known = self._known.pop(run_id, None)
        if known is not None and known.holder == checked.holder and known.generation == checked.generation:
            tx: StoreTransaction | None = None
            try:
                with Block(self, self._guarded(run_id, checked, known)) as tx:
                    result = write(tx)
            except Stale:
                if tx is not None:
                    tx.undo()
            else:
                self._remember(run_id, checked.holder, checked.generation, tx.after(), known.updated_at)
                return result
        with self.transaction(run_id, fence=checked) as tx:
            result = write(tx)
        self._remember(run_id, checked.holder, checked.generation, tx.after())
        return result

    def _guarded(self, run_id: str, fence: Lease, known: _Known) -> Generator[StoreTransaction, None, Told]:
        """The unit of ``commit`` that begins from ``known`` rather than reading the run's row."""
        expected = (known.status, known.last_seq, known.updated_at, fence.holder, fence.generation)
        guard = (_GUARD, (run_id, *expected, self._clock()))
        with self._writing(f"the transaction on run {run_id!r}", guard=guard) as db:
            begun = {"id": run_id, "status": known.status, "last_seq": known.last_seq}
            return (yield from self._unit(db, run_id=run_id, fence=None, begun=begun))

    def _remember(
        self,
        run_id: str,
        holder: str,
        generation: int,
        left: tuple[str, int, float | None],
        before: float | None = None,
    ) -> None:
        """What a commit under the lease ``holder``/``generation`` left on the run's row (``left``: its
        status, last ``seq`` and ``updated_at``, which is ``before`` when the commit did not write it), for
        the next ``commit`` to begin from; forgotten when the run ended or the time is not known."""
        status, last_seq, updated_at = left
        updated_at = before if updated_at is None else updated_at
        if status in TERMINAL_STATUSES or updated_at is None:
            return
        if len(self._known) >= _KNOWN_RUNS:
            self._known.clear()
        self._known[run_id] = _Known(holder, generation, status, last_seq, updated_at)

    # -- leases -------------------------------------------------------------------------------------------

    def _take_lease(self, run_id: str, holder: str, ttl: float) -> Lease | None:
        with self._reading("take_lease") as db:
            now = self._clock()
            # One statement decides and writes (SET reads the old row) under the row's lock, so of two
            # takers exactly one wins, and a transaction on the run finishes before the lease moves.
            row = db.one(
                "UPDATE runs SET lease_generation = CASE WHEN lease_owner = ? AND lease_expires_at > ? "
                "THEN lease_generation ELSE lease_generation + 1 END, lease_owner = ?, lease_expires_at = ? "
                "WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at <= ?) "
                f"RETURNING {leases.LEASE_COLUMNS}",
                (holder, now, holder, now + ttl, run_id, holder, now),
            )
            if row is None and not run_exists(db, run_id):
                raise self._no_run(run_id)
        return None if row is None else leases.lease_of(run_id, row)

    def _extend_lease(self, fence: Lease, ttl: float) -> float:
        with self._reading("extend_lease") as db:
            now = self._clock()
            row = db.one(
                "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? "
                f"AND lease_generation = ? AND lease_expires_at > ? RETURNING {leases.LEASE_COLUMNS}",
                (now + ttl, fence.run_id, fence.holder, fence.generation, now),
            )
            if row is None:
                leases.require_current(fence, self._lease_row(db, fence.run_id), now, "extend_lease")
        return now + ttl

    # -- internals ----------------------------------------------------------------------------------------

    def _open_schema(self) -> str:
        """Migrate on a connection of its own (before the pool exists); the notify channel of the schema."""
        try:
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=_whole(self._connect_timeout))
        except psycopg.Error as exc:
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"cannot connect to the store at {self._where}: {detail}; check that the server runs and "
                "the URL's host, port, user, password and database"
            ) from None
        with self._sql("opening"), conn:
            row = conn.execute("SELECT current_schema()").fetchone()
            if row is None or row[0] is None:
                raise StoreError(
                    f"cannot open the store at {self._where}: the connection has no schema to create tables "
                    "in (check the search_path in the URL's options, and that the schema exists)"
                )
            self.database.migrated(open_schema(conn, self._where))
        # A channel per schema: stores in other schemas of the database hear nothing of this one.
        return f"plangate.{row[0]}"[:63]

    def _configure(self, conn: Connection) -> None:
        # JSON columns come back as the text that was stored: the shared row code parses it once.
        conn.adapters.register_loader("json", TextLoader)
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false), "
            "set_config('idle_in_transaction_session_timeout', %s, false)",
            (f"{int(self._busy_timeout * 1000)}ms", f"{int(self._stuck_timeout * 1000)}ms"),
        )

    def _sql(self, what: str) -> Translated:
        return Translated(what, self._where, self._busy_timeout)

    @contextlib.contextmanager
    def _connection(self, what: str) -> Iterator[Connection]:
        try:
            conn = self._pool.getconn()
        except PoolTimeout:
            raise StoreError(
                f"{what} failed on the store at {self._where}: no connection within "
                f"{self._connect_timeout:g} s (the server is down or unreachable, or all {self._pool_size} "
                "connections of this store are busy)"
            ) from None
        try:
            yield conn
        finally:
            # A broken connection goes back too: the pool sees it is closed and replaces it.
            self._pool.putconn(conn)

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[PostgresDb]:
        """A connection in autocommit: each statement is a transaction of its own."""
        self._check_usable(what)
        with self._connection(what) as conn:
            yield PostgresDb(conn, self._sql(what))

    def _statement(self, what: str) -> contextlib.AbstractContextManager[PostgresDb]:
        return self._reading(what)  # in autocommit, each statement commits on its own

    def _announce(self, db: Db, tx: StoreTransaction) -> Commit | None:
        notice = tx.commit_notice()
        if notice is not None:
            # Sent only if the transaction commits, in commit order (with the COMMIT, in its round trip):
            # remote listeners hear it then.
            db.defer("SELECT pg_notify(?, ?)", (self._channel, self._payload(notice)))
        return notice

    def _migrate(self, component: Component) -> None:
        what = f"opening the {component.name} tables"
        self._check_usable(what)
        with self._connection(what) as conn, self._sql(what):
            migrate(conn, self._where, component=component)

    def _compact(self, what: str, tables: Sequence[str]) -> None:
        """Plain ``VACUUM`` of ``tables`` (outside a transaction, as it must run): their dead rows' space is
        reused by later rows, and nothing else waits for it (``VACUUM FULL`` would lock them)."""
        with self._reading(what) as db:
            db.run(f"VACUUM (ANALYZE) {', '.join(dict.fromkeys(tables))}")

    def _consistent(self, what: str) -> contextlib.AbstractContextManager[PostgresDb]:
        # at REPEATABLE READ, every statement of the transaction sees the snapshot its first one took
        return self._writing(what, begin="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    @contextlib.contextmanager
    def _writing(
        self, what: str, *, begin: str = "BEGIN", guard: tuple[str, Sequence[object]] | None = None
    ) -> Iterator[PostgresDb]:
        """A connection inside a transaction, committed at the end of the block, rolled back if it raises.

        Its ``BEGIN`` goes with the block's first statement and its deferred writes with the ``COMMIT``
        (``PostgresDb``): a transaction that reads one row and writes costs two round trips, one that only
        writes after a ``guard`` costs one.
        """
        self._check_usable(what)
        with self._connection(what) as conn:
            db = PostgresDb(conn, self._sql(what), begin=begin, guard=guard)
            try:
                yield db
                self._commit(db, what)
            except BaseException:
                _rollback(conn, what, self._where)
                raise

    def _commit(self, db: PostgresDb, what: str) -> None:
        try:
            db.commit()
        except psycopg.Error as exc:
            if db.committing and connection_lost(exc):
                # The server may have committed before the connection went: only reading tells.
                raise StoreError(
                    f"{what} failed on the store at {self._where}: the connection was lost while committing, "
                    "so the transaction may or may not have been committed: read the run back to know"
                ) from None
            raise StoreError(explain(what, self._where, exc, self._busy_timeout)) from None

    def _payload(self, notice: Commit) -> str:
        seqs = [event.seq for event in notice.events]
        first, last = (seqs[0], seqs[-1]) if seqs else (0, 0)
        return json.dumps({"o": self._origin, "r": notice.run_id, "f": first, "l": last, "s": notice.status})

    def _on_remote(self, payload: str) -> None:
        """A commit announced on the channel (in the listener's thread): tell the remote subscribers."""
        try:
            data = json.loads(payload)
            if data.get("o") == self._origin or self._closed:
                return  # our own commit, told already in the committing thread
            run_id, first, last = str(data["r"]), int(data["f"]), int(data["l"])
            status = data.get("s")
            events: list[Event] = []
            if first > 0:
                events = self.events(run_id, after=first - 1, limit=last - first + 1)
        except (ValueError, KeyError, TypeError, StoreError, NotFoundError) as exc:
            logger.warning("ignored a commit notice on the store at %s: %s", self._where, exc)
            return
        notice = Commit(
            run_id=run_id,
            events=tuple(events),
            status=status if status in check.RUN_STATUSES else None,
        )
        self._notify(notice, self._remote)


def _check_idle(conn: Connection) -> None:
    """Before the pool hands out an idle connection: a closed one has something to read (the server's
    goodbye, or the end of the stream); only then is a round trip spent to find out, and the pool replaces
    the connection if it fails."""
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


def _rollback(conn: Connection, what: str, where: str) -> None:
    if conn.broken or conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return  # nothing to roll back, or a lost session, which the server rolled back itself
    try:
        conn.execute("ROLLBACK")
    except psycopg.Error as exc:
        # The original exception matters more; the server rolls back a transaction whose session ends.
        logger.warning("rollback failed: %s", explain(f"rolling back {what}", where, exc, 0))


def _without(callbacks: tuple[Subscriber, ...], callback: Subscriber) -> tuple[Subscriber, ...]:
    kept = list(callbacks)
    with contextlib.suppress(ValueError):
        kept.remove(callback)
    return tuple(kept)


def _whole(seconds: float) -> int:
    # libpq's connect_timeout is in whole seconds, and 1 is its smallest useful value.
    return max(1, round(seconds))


__all__ = ["PostgresStore"]
