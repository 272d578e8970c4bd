"""The PostgreSQL store: many processes on many machines, one database, the same guarantees as SQLite's.

For: the ``Store`` backend for servers and workers, on psycopg 3 and a ``psycopg_pool`` connection pool,
opened from a ``postgresql://`` URL (``open_store``). Not for: the schema (``store/_pg_schema.py``), the unit
of work (``store/_tx.py``, shared with SQLite) or the listener of other processes' commits
(``store/_pg_listen.py``).

Concurrency: every transaction on a run starts by locking the run's row (``SELECT … FOR NO KEY UPDATE``),
so transactions on one run take turns across every process and machine, and the ``seq`` a transaction reads
cannot be taken by another; transactions on other runs go on in parallel. A statement waits at most
``busy_timeout`` for a lock. A session that stays idle inside a transaction for ``stuck_timeout`` (a paused
or hung process) is ended by the server, which rolls it back and frees the run. Each commit that added events
or set a status sends a ``NOTIFY`` (on a channel of the store's schema), so that subscribers with
``remote=True`` in any other process hear it.

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
import os
import secrets
import select
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from types import TracebackType
from typing import Self

from plangate.errors import ConfigError, NotFoundError, StoreError
from plangate.events import Event
from plangate.store import _checks as check
from plangate.store import _documents as documents
from plangate.store import _leases as leases
from plangate.store import _rows as rows
from plangate.store import _tokens as tokens
from plangate.store import _turns as turns
from plangate.store._pg_listen import Listener
from plangate.store._pg_schema import migrate
from plangate.store._pg_sql import PostgresDb, Translated, connection_lost, explain, safe_url
from plangate.store._tx import StoreTransaction
from plangate.store.base import (
    Commit,
    Conversation,
    ConversationPage,
    Document,
    Interaction,
    InteractionStatus,
    Lease,
    Receipt,
    RunKind,
    RunPage,
    RunRecord,
    RunStatus,
    Snapshot,
    Subscriber,
    Token,
    TurnRecord,
    WriteIntent,
)

logger = logging.getLogger("plangate.store")

Connection = psycopg.Connection[DictRow]


class PostgresStore:
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
        self._local = threading.local()
        self._subscribers: tuple[Subscriber, ...] = ()
        self._remote: tuple[Subscriber, ...] = ()
        self._subscribers_lock = threading.Lock()
        self._listener: Listener | None = None
        self._closed = False
        self._pid = os.getpid()
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
        # The pool makes its first connection in the background while the schema is checked on a connection
        # of its own (which also gives a clear error at once when the server cannot be reached).
        self._pool.open(wait=False)
        try:
            self._channel = self._open_schema()
        except BaseException:
            self._pool.close()
            raise

    # -- lifecycle ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (and the listener); later calls fail with ``StoreError``. Closing twice is
        harmless."""
        if self._closed:
            return
        self._closed = True
        if self._listener is not None:
            self._listener.stop()
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    # -- runs ---------------------------------------------------------------------------------------------

    def create_run(
        self,
        kind: RunKind,
        name: str,
        input: Mapping[str, object],
        *,
        owner: str = "local",
        parent_run_id: str | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """Create a ``queued`` run; its id is random (``run_…``) unless ``run_id`` is given.

        Raises:
            ConfigError: a bad argument, or a run with ``run_id`` exists already.
            NotFoundError: ``parent_run_id`` names no run.
        """
        check.choice(kind, check.RUN_KINDS, "create_run: kind")
        check.text(name, "create_run: name")
        check.text(owner, "create_run: owner", empty=False)
        input_json = check.json_object(input, "create_run: input")
        new_id = (
            check.new_run_id() if run_id is None else check.text(run_id, "create_run: run_id", empty=False)
        )
        with self._reading("create_run") as db:
            if parent_run_id is not None and not _exists(db, parent_run_id):
                raise NotFoundError(f"create_run: parent_run_id: no run {parent_run_id!r} in {self._where}")
            now = self._clock()
            # One statement, so that of two processes creating the same id exactly one succeeds.
            row = db.one(
                "INSERT INTO runs (id, kind, name, owner, parent_run_id, status, input, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?) ON CONFLICT (id) DO NOTHING "
                f"RETURNING {rows.RUN_COLUMNS}",
                (new_id, kind, name, owner, parent_run_id, input_json, now, now),
            )
        if row is None:
            raise ConfigError(f"create_run: run_id: a run {new_id!r} exists already in {self._where}")
        return rows.run_record(row)

    def get_run(self, run_id: str, *, owner: str | None = None) -> RunRecord:
        """The run with that id (NotFoundError if none, or if ``owner`` is given and is not its owner)."""
        with self._reading("get_run") as db:
            row = db.one(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None or (owner is not None and row["owner"] != owner):
            raise self._no_run(run_id, owner)
        return rows.run_record(row)

    def list_runs(
        self,
        *,
        status: RunStatus | Collection[RunStatus] | None = None,
        kind: RunKind | None = None,
        owner: str | None = None,
        parent_run_id: str | None = None,
        top_level: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Runs matching every filter given, newest first, at most ``limit`` (1..1000) per page;
        ``top_level``: only runs that are no other run's sub-run."""
        limit = check.page_limit(limit)
        clauses: list[str] = []
        params: list[object] = []
        if status is not None:
            wanted = check.statuses(status, "list_runs: status")
            clauses.append(f"status IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        if kind is not None:
            clauses.append("kind = ?")
            params.append(check.choice(kind, check.RUN_KINDS, "list_runs: kind"))
        for column, value in (("owner", owner), ("parent_run_id", parent_run_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if top_level:
            clauses.append("parent_run_id IS NULL")
        if cursor is not None:
            clauses.append("pos < ?")
            params.append(check.cursor_position(cursor))
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        with self._reading("list_runs") as db:
            found = db.all(
                f"SELECT {rows.RUN_COLUMNS} FROM runs {where}ORDER BY pos DESC LIMIT ?", (*params, limit + 1)
            )
        page = found[:limit]
        next_cursor = check.cursor_for(page[-1]["pos"]) if len(found) > limit else None
        return RunPage(items=[rows.run_record(row) for row in page], next_cursor=next_cursor)

    def get_snapshot(self, run_id: str) -> Snapshot | None:
        """The run's latest snapshot, or None if none was saved."""
        with self._reading("get_snapshot") as db:
            row = db.one(
                "SELECT run_id, version, seq, state, updated_at FROM snapshots WHERE run_id = ?", (run_id,)
            )
            if row is None and not _exists(db, run_id):
                raise self._no_run(run_id)
        return None if row is None else rows.snapshot(row)

    # -- writing ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, run_id: str, *, fence: Lease | None = None) -> Iterator[StoreTransaction]:
        """A unit of work on one run, committed when the ``with`` block ends, rolled back if it raises.

        It locks the run's row first, so other transactions on the run (any process) wait until it ends.
        With ``fence``, it goes ahead only while that lease is the run's live one; the lock, kept to the
        end, keeps anybody from taking the lease meanwhile. Subscribers are told after the commit.

        Raises:
            NotFoundError: there is no such run.
            LeaseLost: ``fence`` is no longer the run's live lease; nothing was written.
            StoreError: the database failed (the transaction was rolled back), or the connection was lost
                while committing (the message says the commit may or may not have happened).
        """
        what = f"the transaction on run {run_id!r}"
        if fence is not None:
            fence = leases.checked_fence(fence, run_id)
        self._check_usable("transaction")
        with self._connection(what) as conn:
            db = PostgresDb(conn, self._sql(what))
            db.run("BEGIN")
            try:
                row = db.one(
                    f"SELECT {rows.RUN_COLUMNS}, lease_generation FROM runs WHERE id = ? FOR NO KEY UPDATE",
                    (run_id,),
                )
                if row is None:
                    raise self._no_run(run_id)
                if fence is not None:
                    leases.require_current_row(fence, run_id, row, self._clock(), "the transaction")
                tx = StoreTransaction(db, row, self._clock)
                self._local.tx_run = run_id
                try:
                    yield tx
                    tx.finish()
                finally:
                    self._local.tx_run = None
                    tx.close()
                notice = tx.commit_notice()
                if notice is not None:
                    # Sent only if the transaction commits, in commit order: remote listeners hear it then.
                    db.one("SELECT pg_notify(?, ?)", (self._channel, self._payload(notice)))
                self._commit(conn, what)
            except BaseException:
                _rollback(conn, what, self._where)
                raise
        if notice is not None:
            self._notify(notice)

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

    # -- events -------------------------------------------------------------------------------------------

    def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """The run's events with ``seq > after``, in order, at most ``limit`` of them."""
        check.integer(after, "events: after", minimum=0)
        query = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"
        params: tuple[object, ...] = (run_id, after)
        if limit is not None:
            query += " LIMIT ?"
            params = (*params, check.integer(limit, "events: limit", minimum=1))
        with self._reading("events") as db:
            found = db.all(query, params)
            if not found and not _exists(db, run_id):
                raise self._no_run(run_id)
        return [rows.event(row) for row in found]

    def last_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's last event (0 before the first)."""
        with self._reading("last_seq") as db:
            row = db.one("SELECT last_seq FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise self._no_run(run_id)
        return int(row["last_seq"])

    # -- interactions -------------------------------------------------------------------------------------

    def get_interaction(self, interaction_id: str, *, owner: str | None = None) -> Interaction:
        """The interaction with that id (NotFoundError if none, or if its run is not ``owner``'s)."""
        found = self._interactions(["i.id = ?"], [interaction_id], owner)
        if not found:
            raise self._no_interaction(interaction_id, owner)
        return found[0]

    def list_interactions(
        self,
        *,
        status: InteractionStatus | None = None,
        run_id: str | None = None,
        owner: str | None = None,
    ) -> list[Interaction]:
        """Interactions matching every filter given, oldest first."""
        clauses: list[str] = []
        params: list[object] = []
        if status is not None:
            clauses.append("i.status = ?")
            params.append(check.choice(status, check.INTERACTION_STATUSES, "list_interactions: status"))
        if run_id is not None:
            clauses.append("i.run_id = ?")
            params.append(run_id)
        return self._interactions(clauses, params, owner)

    def resolve_interaction(
        self,
        interaction_id: str,
        resolution: Mapping[str, object],
        resolved_by: str | None = None,
        *,
        owner: str | None = None,
    ) -> Interaction:
        """Resolve an open interaction in a transaction of its own; exactly one of concurrent callers wins.

        Raises:
            StaleInteraction: it is not open any more; nothing changed.
            NotFoundError: no such interaction (for this owner).
        """
        run_id = self.get_interaction(interaction_id, owner=owner).run_id
        with self.transaction(run_id) as tx:
            return tx.resolve_interaction(interaction_id, resolution, resolved_by)

    # -- receipts and write intents -----------------------------------------------------------------------

    def receipts(self, run_id: str) -> list[Receipt]:
        """The run's receipts, in the order they were recorded."""
        with self._reading("receipts") as db:
            found = db.all(
                f"SELECT {rows.RECEIPT_COLUMNS} FROM receipts WHERE run_id = ? ORDER BY pos", (run_id,)
            )
            if not found and not _exists(db, run_id):
                raise self._no_run(run_id)
        return [rows.receipt(row) for row in found]

    def get_write_intent(self, key: str) -> WriteIntent | None:
        """The write intent with that key, or None."""
        with self._reading("get_write_intent") as db:
            row = db.one(f"SELECT {rows.WRITE_INTENT_COLUMNS} FROM write_intents WHERE key = ?", (key,))
        return None if row is None else rows.write_intent(row)

    def pending_write_intents(self, run_id: str) -> list[WriteIntent]:
        """The run's intents that have no receipt yet, oldest first."""
        with self._reading("pending_write_intents") as db:
            found = db.all(
                f"SELECT {rows.WRITE_INTENT_COLUMNS} FROM write_intents "
                "WHERE run_id = ? AND status = 'intent' ORDER BY created_at, key",
                (run_id,),
            )
            if not found and not _exists(db, run_id):
                raise self._no_run(run_id)
        return [rows.write_intent(row) for row in found]

    # -- documents ----------------------------------------------------------------------------------------

    def get_document(self, namespace: str, key: str) -> Document | None:
        """The document stored under ``(namespace, key)``, or None if none was written."""
        namespace, key = documents.checked_name(namespace, key, "get_document")
        with self._reading("get_document") as db:
            return documents.read(db, namespace, key)

    def put_document(
        self, namespace: str, key: str, value: Mapping[str, object], *, expected_version: int | None
    ) -> Document:
        """Write ``value`` under ``(namespace, key)`` if the stored version is ``expected_version``.

        ``expected_version=None`` creates the document and fails if one exists. Each statement is its own
        compare-and-set (a concurrent writer waits for the row, then finds the new version), so of two
        writers that read the same version exactly one succeeds.

        Raises:
            DocumentConflict: the stored version is another one; nothing changed.
            ConfigError: a bad argument.
        """
        with self._writing("put_document") as db:
            return documents.write(db, self._clock, namespace, key, value, expected_version)

    # -- tokens -------------------------------------------------------------------------------------------

    def create_token(self, owner: str, token_hash: str, name: str = "") -> Token:
        """Record a bearer token by its hash (a lowercase hex digest), for ``owner``.

        Raises:
            ConfigError: a bad argument, or a token with that hash exists already.
        """
        with self._reading("create_token") as db:
            return tokens.create(db, self._clock, owner, token_hash, name)

    def find_token(self, token_hash: str) -> Token | None:
        """The token with that hash if it exists and is not revoked, else None."""
        with self._reading("find_token") as db:
            return tokens.find(db, token_hash)

    def list_tokens(self, *, owner: str | None = None) -> list[Token]:
        """Every token (revoked ones included), oldest first, only ``owner``'s when given."""
        with self._reading("list_tokens") as db:
            return tokens.listed(db, owner)

    def revoke_token(self, token_id: str) -> Token:
        """Revoke a token: ``find_token`` no longer returns it. Revoking twice keeps the first time.

        Raises:
            NotFoundError: no token has that id.
        """
        with self._writing("revoke_token") as db:
            return tokens.revoke(db, self._clock, token_id, self._where)

    # -- conversations and turns ----------------------------------------------------------------------------

    def create_conversation(
        self, *, owner: str = "local", title: str = "", conversation_id: str | None = None
    ) -> Conversation:
        """Start a conversation; its id is random (``conv_…``) unless ``conversation_id`` is given.

        Raises:
            ConfigError: a bad argument, or a conversation with that id exists already.
        """
        with self._writing("create_conversation") as db:
            return turns.create_conversation(db, self._clock, owner, title, conversation_id, self._where)

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> Conversation:
        """The conversation with that id (NotFoundError if none, or if it is not ``owner``'s)."""
        with self._reading("get_conversation") as db:
            return turns.get_conversation(db, conversation_id, owner, self._where)

    def list_conversations(
        self, *, owner: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ConversationPage:
        """Conversations, most recently updated first, one page of at most ``limit`` (1..1000)."""
        with self._reading("list_conversations") as db:
            return turns.list_conversations(db, owner, limit, cursor)

    def get_turn(self, turn_id: str, *, owner: str | None = None) -> TurnRecord:
        """The stored turn with that id, attempts included (NotFoundError if none, or not ``owner``'s)."""
        with self._writing("get_turn") as db:  # one snapshot for the turn and its attempts
            return turns.get_turn(db, turn_id, owner, self._where)

    def find_turn(self, run_id: str) -> TurnRecord | None:
        """The turn the ``ask`` run ``run_id`` stored, or None while it runs (or if it stored none)."""
        with self._writing("find_turn") as db:
            return turns.find_turn(db, run_id)

    def list_turns(
        self, conversation_id: str, *, owner: str | None = None, last: int | None = None
    ) -> list[TurnRecord]:
        """The conversation's turns, oldest first; only the ``last`` ones when given.

        Raises:
            NotFoundError: no such conversation (for this owner).
        """
        with self._writing("list_turns") as db:
            return turns.list_turns(db, conversation_id, owner, last, self._where)

    # -- leases -------------------------------------------------------------------------------------------

    def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease | None:
        """Take the run's lease for ``ttl`` seconds if it is free or expired (a new generation), or extend it
        if ``holder`` holds it live (the same generation); None while another holder's lease is live.

        Raises:
            NotFoundError: there is no such run.
        """
        holder = leases.checked_holder(holder, "take_lease: holder")
        ttl = check.seconds(ttl, "take_lease: ttl")
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
            if row is None and not _exists(db, run_id):
                raise self._no_run(run_id)
        return None if row is None else leases.lease_of(run_id, row)

    def extend_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a live lease to ``ttl`` seconds from now; returns it with its new ``expires_at``.

        Raises:
            LeaseLost: the lease is no longer current (expired, released or taken); nothing changed.
            NotFoundError: there is no such run.
        """
        fence = leases.checked_fence(lease, None, "extend_lease: lease")
        ttl = check.seconds(ttl, "extend_lease: ttl")
        with self._reading("extend_lease") as db:
            now = self._clock()
            row = db.one(
                "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? "
                f"AND lease_generation = ? AND lease_expires_at > ? RETURNING {leases.LEASE_COLUMNS}",
                (now + ttl, fence.run_id, fence.holder, fence.generation, now),
            )
            if row is None:
                leases.require_current(fence, self._lease_row(db, fence.run_id), now, "extend_lease")
        return fence.model_copy(update={"expires_at": now + ttl})

    def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (live or expired), or None when nobody holds it."""
        with self._reading("get_lease") as db:
            return self._lease_row(db, run_id)

    def acquire_lease(self, run_id: str, owner: str, ttl: float) -> bool:
        """Take the run's lease for ``ttl`` seconds if it is free, expired, or already ``owner``'s."""
        leases.checked_holder(owner, "acquire_lease: owner")
        check.seconds(ttl, "acquire_lease: ttl")
        return self.take_lease(run_id, owner, ttl) is not None

    def renew_lease(self, run_id: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s live lease to ``ttl`` seconds from now; False if it is not theirs or expired."""
        ttl = check.seconds(ttl, "renew_lease: ttl")
        owner = leases.checked_holder(owner, "renew_lease: owner")
        with self._reading("renew_lease") as db:
            now = self._clock()
            changed = db.run(
                "UPDATE runs SET lease_expires_at = ? "
                "WHERE id = ? AND lease_owner = ? AND lease_expires_at > ?",
                (now + ttl, run_id, owner, now),
            )
            if changed == 0 and not _exists(db, run_id):
                raise self._no_run(run_id)
        return changed == 1

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease up; False if ``owner`` did not hold it. The next holder gets a new generation."""
        owner = leases.checked_holder(owner, "release_lease: owner")
        with self._reading("release_lease") as db:
            changed = db.run(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE id = ? AND lease_owner = ?",
                (run_id, owner),
            )
            if changed == 0 and not _exists(db, run_id):
                raise self._no_run(run_id)
        return changed == 1

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
            migrate(conn, self._where)
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

    def _check_usable(self, what: str) -> None:
        if self._closed:
            raise StoreError(f"{what}: the store at {self._where} is closed")
        if self._pid != os.getpid():
            # Connections copied by fork() share one socket with the parent; Celery's prefork pool does this.
            raise StoreError(
                f"{what}: the store at {self._where} was opened in process {self._pid} and is used in "
                f"process {os.getpid()} (after a fork); open the store again in this process"
            )
        held = getattr(self._local, "tx_run", None)
        if held is not None:
            raise StoreError(
                f"{what}: this thread holds an open transaction on run {held!r}; use that "
                "transaction, or call the store after its with block ends"
            )

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

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[PostgresDb]:
        """A connection inside a transaction, committed at the end of the block, rolled back if it raises."""
        self._check_usable(what)
        with self._connection(what) as conn:
            db = PostgresDb(conn, self._sql(what))
            db.run("BEGIN")
            try:
                yield db
                self._commit(conn, what)
            except BaseException:
                _rollback(conn, what, self._where)
                raise

    def _commit(self, conn: Connection, what: str) -> None:
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            if connection_lost(exc):
                # The server may have committed before the connection went: only reading tells.
                raise StoreError(
                    f"{what} failed on the store at {self._where}: the connection was lost while committing, "
                    "so the transaction may or may not have been committed: read the run back to know"
                ) from None
            raise StoreError(explain(what, self._where, exc, self._busy_timeout)) from None

    def _lease_row(self, db: PostgresDb, run_id: str) -> Lease | None:
        row = db.one(f"SELECT {leases.LEASE_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise self._no_run(run_id)
        return leases.lease_of(run_id, row)

    def _interactions(self, clauses: list[str], params: list[object], owner: str | None) -> list[Interaction]:
        columns = ", ".join(f"i.{name.strip()}" for name in rows.INTERACTION_COLUMNS.split(","))
        source = "interactions AS i"
        if owner is not None:
            source += " JOIN runs AS r ON r.id = i.run_id"
            clauses = [*clauses, "r.owner = ?"]
            params = [*params, owner]
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        with self._reading("interactions") as db:
            found = db.all(f"SELECT {columns} FROM {source} {where}ORDER BY i.pos", params)
        return [rows.interaction(row) for row in found]

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

    def _notify(self, notice: Commit, subscribers: tuple[Subscriber, ...] | None = None) -> None:
        for callback in self._subscribers if subscribers is None else subscribers:
            try:
                callback(notice)
            except Exception:
                # The commit stands; one broken listener must not silence the others or fail the writer.
                logger.exception("a store subscriber failed on a commit of run %s", notice.run_id)

    def _no_run(self, run_id: str, owner: str | None = None) -> NotFoundError:
        scope = f" for owner {owner!r}" if owner is not None else ""
        return NotFoundError(f"no run {run_id!r}{scope} in the store at {self._where}")

    def _no_interaction(self, interaction_id: str, owner: str | None) -> NotFoundError:
        scope = f" for owner {owner!r}" if owner is not None else ""
        return NotFoundError(f"no interaction {interaction_id!r}{scope} in the store at {self._where}")


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


def _exists(db: PostgresDb, run_id: str) -> bool:
    return db.one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is not None


def _without(callbacks: tuple[Subscriber, ...], callback: Subscriber) -> tuple[Subscriber, ...]:
    kept = list(callbacks)
    with contextlib.suppress(ValueError):
        kept.remove(callback)
    return tuple(kept)


def _whole(seconds: float) -> int:
    # libpq's connect_timeout is in whole seconds, and 1 is its smallest useful value.
    return max(1, round(seconds))


__all__ = ["PostgresStore"]
