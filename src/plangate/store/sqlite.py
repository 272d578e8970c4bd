"""The SQLite store: one file (or memory), WAL, safe for several threads and several processes.

For: the default ``Store`` backend, built on the standard library's ``sqlite3``. Not for: parsing store URLs
(``store/url.py``), the schema (``store/_sqlite_schema.py``) or the unit of work (``store/_tx.py``).

Concurrency: writes go through one connection per store object, guarded by a lock, so threads of a process
take turns. Reads of a file store go through a connection of the reading thread's own, outside that lock:
in WAL mode a reader never waits for a writer, so a write stuck on another process's lock (up to
``busy_timeout``) never holds up the threads that only read, and a reader never sees another thread's
uncommitted writes. A store in memory is one connection, reads included. Between processes, every write
transaction starts with ``BEGIN IMMEDIATE``, so it holds the file's write lock from its first statement and
the ``seq`` it reads cannot be taken by another process; others wait up to ``busy_timeout``. WAL with
``synchronous=NORMAL`` survives a killed process (only its open transaction is lost); a power cut may lose
the last commits, never the file. A store opened before a ``fork()`` refuses to work in the child.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
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
from plangate.store._sql import SQLiteDb
from plangate.store._sqlite_errors import Translated, explain
from plangate.store._sqlite_schema import migrate
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

MEMORY = ":memory:"
"""The target of a store that lives in memory and dies with its object."""


class SQLiteStore:
    """A ``Store`` in one SQLite file, or in memory with ``SQLiteStore(":memory:")``.

    Args:
        path: the database file (its folder is created) or ``":memory:"``.
        busy_timeout: how long a write waits for another process's transaction, in seconds.
        clock: where timestamps come from (seconds since the epoch); tests pass a fake one.

    Raises:
        StoreError: the file cannot be opened or is not a SQLite database.
        SchemaVersionError: the file was written by a newer plangate.
    """

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
        self._tx_thread: int | None = None
        self._tx_run: str | None = None
        self._subscribers: tuple[Subscriber, ...] = ()
        self._subscribers_lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._readers = threading.local()
        self._readers_lock = threading.Lock()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conn = self._connect()
        try:
            with self._sql("opening"):
                migrate(self._conn, self._where)
        except BaseException:
            self._conn.close()
            raise

    # -- lifecycle ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; later calls fail with ``StoreError``. Closing twice is harmless."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
                with self._readers_lock:
                    readers, self._reader_conns = self._reader_conns, []
                for conn in readers:
                    conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._where!r})"

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
        with self._writing("create_run") as conn:
            if parent_run_id is not None and not _exists(conn, "runs", "id", parent_run_id):
                raise NotFoundError(f"create_run: parent_run_id: no run {parent_run_id!r} in {self._where}")
            if _exists(conn, "runs", "id", new_id):
                raise ConfigError(f"create_run: run_id: a run {new_id!r} exists already in {self._where}")
            now = self._clock()
            conn.execute(
                "INSERT INTO runs (id, kind, name, owner, parent_run_id, status, input, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
                (new_id, kind, name, owner, parent_run_id, input_json, now, now),
            )
            row = conn.execute(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (new_id,)).fetchone()
        return rows.run_record(row)

    def get_run(self, run_id: str, *, owner: str | None = None) -> RunRecord:
        """The run with that id (NotFoundError if none, or if ``owner`` is given and is not its owner)."""
        with self._reading("get_run") as conn:
            row = conn.execute(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
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
        with self._reading("list_runs") as conn:
            found = conn.execute(
                f"SELECT {rows.RUN_COLUMNS} FROM runs {where}ORDER BY pos DESC LIMIT ?", (*params, limit + 1)
            ).fetchall()
        page = found[:limit]
        next_cursor = check.cursor_for(page[-1]["pos"]) if len(found) > limit else None
        return RunPage(items=[rows.run_record(row) for row in page], next_cursor=next_cursor)

    def get_snapshot(self, run_id: str) -> Snapshot | None:
        """The run's latest snapshot, or None if none was saved."""
        with self._reading("get_snapshot") as conn:
            row = conn.execute(
                "SELECT run_id, version, seq, state, updated_at FROM snapshots WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None and not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
        return None if row is None else rows.snapshot(row)

    # -- writing ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, run_id: str, *, fence: Lease | None = None) -> Iterator[StoreTransaction]:
        """A unit of work on one run, committed when the ``with`` block ends, rolled back if it raises.

        With ``fence``, it goes ahead only while that lease is the run's live one; the check runs under the
        file's write lock, which the transaction keeps to its end, so nobody takes the lease meanwhile.
        Subscribers are told after the commit, outside the store's lock.

        Raises:
            NotFoundError: there is no such run.
            LeaseLost: ``fence`` is no longer the run's live lease; nothing was written.
        """
        sql = self._sql(f"the transaction on run {run_id!r}")
        if fence is not None:
            fence = leases.checked_fence(fence, run_id)
        self._check_usable("transaction")
        with self._lock:
            self._begin(sql)
            try:
                with sql:
                    row = self._conn.execute(
                        f"SELECT {rows.RUN_COLUMNS}, lease_generation FROM runs WHERE id = ?", (run_id,)
                    ).fetchone()
                if row is None:
                    raise self._no_run(run_id)
                if fence is not None:
                    leases.require_current_row(fence, run_id, row, self._clock(), "the transaction")
                heard = bool(self._subscribers)  # else the events as stored are made only if asked for
                tx = StoreTransaction(SQLiteDb(self._conn, sql), row, self._clock, heard=heard)
                self._tx_thread, self._tx_run = threading.get_ident(), run_id
                try:
                    yield tx
                    tx.finish()
                finally:
                    self._tx_thread = self._tx_run = None
                    tx.close()
                with sql:
                    self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        # who listens now (one may have subscribed since the transaction began: its events are made again)
        if self._subscribers:
            notice = tx.commit_notice()
            if notice is not None:
                self._notify(notice)

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

    # -- events -------------------------------------------------------------------------------------------

    def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """The run's events with ``seq > after``, in order, at most ``limit`` of them."""
        check.integer(after, "events: after", minimum=0)
        query = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"
        params: tuple[object, ...] = (run_id, after)
        if limit is not None:
            query += " LIMIT ?"
            params = (*params, check.integer(limit, "events: limit", minimum=1))
        with self._reading("events") as conn:
            if not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
            found = conn.execute(query, params).fetchall()
        return [rows.event(row) for row in found]

    def last_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's last event (0 before the first)."""
        with self._reading("last_seq") as conn:
            row = conn.execute("SELECT last_seq FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise self._no_run(run_id)
        return int(row[0])

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

        Prefer ``tx.resolve_interaction`` in engines, to record the resolution with its events.

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
        with self._reading("receipts") as conn:
            if not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
            found = conn.execute(
                f"SELECT {rows.RECEIPT_COLUMNS} FROM receipts WHERE run_id = ? ORDER BY pos", (run_id,)
            ).fetchall()
        return [rows.receipt(row) for row in found]

    def get_write_intent(self, key: str) -> WriteIntent | None:
        """The write intent with that key, or None."""
        with self._reading("get_write_intent") as conn:
            row = conn.execute(
                f"SELECT {rows.WRITE_INTENT_COLUMNS} FROM write_intents WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else rows.write_intent(row)

    def pending_write_intents(self, run_id: str) -> list[WriteIntent]:
        """The run's intents that have no receipt yet, oldest first."""
        with self._reading("pending_write_intents") as conn:
            if not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
            found = conn.execute(
                f"SELECT {rows.WRITE_INTENT_COLUMNS} FROM write_intents "
                "WHERE run_id = ? AND status = 'intent' ORDER BY created_at, key",
                (run_id,),
            ).fetchall()
        return [rows.write_intent(row) for row in found]

    # -- documents ----------------------------------------------------------------------------------------

    def get_document(self, namespace: str, key: str) -> Document | None:
        """The document stored under ``(namespace, key)``, or None if none was written."""
        namespace, key = documents.checked_name(namespace, key, "get_document")
        with self._reading("get_document") as conn:
            return documents.read(self._db(conn, "get_document"), namespace, key)

    def put_document(
        self, namespace: str, key: str, value: Mapping[str, object], *, expected_version: int | None
    ) -> Document:
        """Write ``value`` under ``(namespace, key)`` if the stored version is ``expected_version``.

        ``expected_version=None`` creates the document and fails if one exists. The check and the write run
        under the file's write lock, so of two writers that read the same version exactly one succeeds.

        Raises:
            DocumentConflict: the stored version is another one; nothing changed.
            ConfigError: a bad argument.
        """
        with self._writing("put_document") as conn:
            db = self._db(conn, "put_document")
            return documents.write(db, self._clock, namespace, key, value, expected_version)

    # -- tokens -------------------------------------------------------------------------------------------

    def create_token(self, owner: str, token_hash: str, name: str = "") -> Token:
        """Record a bearer token by its hash (a lowercase hex digest), for ``owner``.

        Raises:
            ConfigError: a bad argument, or a token with that hash exists already.
        """
        with self._writing("create_token") as conn:
            return tokens.create(self._db(conn, "create_token"), self._clock, owner, token_hash, name)

    def find_token(self, token_hash: str) -> Token | None:
        """The token with that hash if it exists and is not revoked, else None."""
        with self._reading("find_token") as conn:
            return tokens.find(self._db(conn, "find_token"), token_hash)

    def list_tokens(self, *, owner: str | None = None) -> list[Token]:
        """Every token (revoked ones included), oldest first, only ``owner``'s when given."""
        with self._reading("list_tokens") as conn:
            return tokens.listed(self._db(conn, "list_tokens"), owner)

    def revoke_token(self, token_id: str) -> Token:
        """Revoke a token: ``find_token`` no longer returns it. Revoking twice keeps the first time.

        Raises:
            NotFoundError: no token has that id.
        """
        with self._writing("revoke_token") as conn:
            return tokens.revoke(self._db(conn, "revoke_token"), self._clock, token_id, self._where)

    # -- conversations and turns ----------------------------------------------------------------------------

    def create_conversation(
        self, *, owner: str = "local", title: str = "", conversation_id: str | None = None
    ) -> Conversation:
        """Start a conversation; its id is random (``conv_…``) unless ``conversation_id`` is given.

        Raises:
            ConfigError: a bad argument, or a conversation with that id exists already.
        """
        with self._writing("create_conversation") as conn:
            db = self._db(conn, "create_conversation")
            return turns.create_conversation(db, self._clock, owner, title, conversation_id, self._where)

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> Conversation:
        """The conversation with that id (NotFoundError if none, or if it is not ``owner``'s)."""
        with self._reading("get_conversation") as conn:
            db = self._db(conn, "get_conversation")
            return turns.get_conversation(db, conversation_id, owner, self._where)

    def list_conversations(
        self, *, owner: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ConversationPage:
        """Conversations, most recently updated first, one page of at most ``limit`` (1..1000)."""
        with self._reading("list_conversations") as conn:
            return turns.list_conversations(self._db(conn, "list_conversations"), owner, limit, cursor)

    def get_turn(self, turn_id: str, *, owner: str | None = None) -> TurnRecord:
        """The stored turn with that id, attempts included (NotFoundError if none, or not ``owner``'s)."""
        with self._reading("get_turn") as conn:
            return turns.get_turn(self._db(conn, "get_turn"), turn_id, owner, self._where)

    def find_turn(self, run_id: str) -> TurnRecord | None:
        """The turn the ``ask`` run ``run_id`` stored, or None while it runs (or if it stored none)."""
        with self._reading("find_turn") as conn:
            return turns.find_turn(self._db(conn, "find_turn"), run_id)

    def list_turns(
        self, conversation_id: str, *, owner: str | None = None, last: int | None = None
    ) -> list[TurnRecord]:
        """The conversation's turns, oldest first; only the ``last`` ones when given.

        Raises:
            NotFoundError: no such conversation (for this owner).
        """
        with self._reading("list_turns") as conn:
            db = self._db(conn, "list_turns")
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
        with self._writing("take_lease") as conn:
            now = self._clock()
            # One statement decides and writes (SET reads the old row), under the file's write lock.
            conn.execute(
                "UPDATE runs SET lease_generation = CASE WHEN lease_owner = ? AND lease_expires_at > ? "
                "THEN lease_generation ELSE lease_generation + 1 END, lease_owner = ?, lease_expires_at = ? "
                "WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at <= ?)",
                (holder, now, holder, now + ttl, run_id, holder, now),
            )
            current = self._lease_row(conn, run_id)
        return current if current is not None and current.holder == holder else None

    def extend_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a live lease to ``ttl`` seconds from now; returns it with its new ``expires_at``.

        Raises:
            LeaseLost: the lease is no longer current (expired, released or taken); nothing changed.
            NotFoundError: there is no such run.
        """
        fence = leases.checked_fence(lease, None, "extend_lease: lease")
        ttl = check.seconds(ttl, "extend_lease: ttl")
        with self._writing("extend_lease") as conn:
            now = self._clock()
            leases.require_current(fence, self._lease_row(conn, fence.run_id), now, "extend_lease")
            conn.execute("UPDATE runs SET lease_expires_at = ? WHERE id = ?", (now + ttl, fence.run_id))
        return fence.model_copy(update={"expires_at": now + ttl})

    def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (live or expired), or None when nobody holds it."""
        with self._reading("get_lease") as conn:
            return self._lease_row(conn, run_id)

    def acquire_lease(self, run_id: str, owner: str, ttl: float) -> bool:
        """Take the run's lease for ``ttl`` seconds if it is free, expired, or already ``owner``'s."""
        leases.checked_holder(owner, "acquire_lease: owner")
        check.seconds(ttl, "acquire_lease: ttl")
        return self.take_lease(run_id, owner, ttl) is not None

    def renew_lease(self, run_id: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s live lease to ``ttl`` seconds from now; False if it is not theirs or expired."""
        ttl = check.seconds(ttl, "renew_lease: ttl")
        owner = leases.checked_holder(owner, "renew_lease: owner")
        with self._writing("renew_lease") as conn:
            now = self._clock()
            changed = conn.execute(
                "UPDATE runs SET lease_expires_at = ? "
                "WHERE id = ? AND lease_owner = ? AND lease_expires_at > ?",
                (now + ttl, run_id, owner, now),
            ).rowcount
            if changed == 0 and not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
        return changed == 1

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease up; False if ``owner`` did not hold it. The next holder gets a new generation."""
        owner = leases.checked_holder(owner, "release_lease: owner")
        with self._writing("release_lease") as conn:
            changed = conn.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE id = ? AND lease_owner = ?",
                (run_id, owner),
            ).rowcount
            if changed == 0 and not _exists(conn, "runs", "id", run_id):
                raise self._no_run(run_id)
        return changed == 1

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

    def _db(self, conn: sqlite3.Connection, what: str) -> SQLiteDb:
        return SQLiteDb(conn, self._sql(what))

    def _check_usable(self, what: str) -> None:
        if self._closed:
            raise StoreError(f"{what}: the store at {self._where} is closed")
        if self._pid != os.getpid():
            # A SQLite connection copied by fork() corrupts locks; Celery's prefork pool is the usual way in.
            raise StoreError(
                f"{what}: the store at {self._where} was opened in process {self._pid} and is used in "
                f"process {os.getpid()} (after a fork); open the store again in this process"
            )
        if self._tx_thread == threading.get_ident():
            raise StoreError(
                f"{what}: this thread holds an open transaction on run {self._tx_run!r}; use that "
                "transaction, or call the store after its with block ends"
            )

    def _begin(self, sql: Translated) -> None:
        with sql:
            # IMMEDIATE takes the write lock now, so the run row (and its last_seq) read next is ours alone.
            self._conn.execute("BEGIN IMMEDIATE")

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
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        self._check_usable(what)
        sql = self._sql(what)
        if self.path is None:
            with self._lock, sql:
                yield self._conn
            return
        conn = self._reader(sql)
        with sql:
            yield conn

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        self._check_usable(what)
        sql = self._sql(what)
        with self._lock:
            self._begin(sql)
            try:
                with sql:
                    yield self._conn
                    self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _lease_row(self, conn: sqlite3.Connection, run_id: str) -> Lease | None:
        row = conn.execute(f"SELECT {leases.LEASE_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
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
        with self._reading("interactions") as conn:
            found = conn.execute(f"SELECT {columns} FROM {source} {where}ORDER BY i.pos", params).fetchall()
        return [rows.interaction(row) for row in found]

    def _notify(self, notice: Commit) -> None:
        for callback in self._subscribers:
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


def _exists(conn: sqlite3.Connection, table: str, column: str, value: str) -> bool:
    return conn.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (value,)).fetchone() is not None
