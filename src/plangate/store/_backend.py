"""What both store backends do the same way: every read, and the writes that are one statement or a few.

For: ``Backend``, the base class of ``SQLiteStore`` and ``PostgresStore``. It holds each ``Store`` method
whose SQL both backends speak (the shared ``?`` statements of ``Db``), written once: runs, snapshots,
events, interactions, receipts, write intents, documents, tokens, conversations and turns, and the leases'
reads and releases, and the argument checks of ``create_run``, ``take_lease`` and ``extend_lease``. A
backend says how it opens a connection for each kind of work (``_reading``, ``_writing``, ``_statement``,
``_consistent``), and keeps what it does its own way: opening and closing, inserting a run, the unit of work
(``transaction``), subscriptions, and the one statement that takes or extends a lease. Not for: the SQL of
one backend only, or the unit of work itself (``store/_tx.py``).
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Self

from plangate.errors import NotFoundError, StoreError
from plangate.events import Event
from plangate.store import _checks as check
from plangate.store import _documents as documents
from plangate.store import _leases as leases
from plangate.store import _rows as rows
from plangate.store import _tokens as tokens
from plangate.store import _turns as turns
from plangate.store._sql import Db
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

# One statement on both backends: climb the parent links from the run to the run without a parent. UNION
# (not UNION ALL) ends the climb even on a cycle, which create_run's checks never let form.
_ROOT_OF = (
    "WITH RECURSIVE chain (id, parent_run_id) AS ("
    "SELECT id, parent_run_id FROM runs WHERE id = ? "
    "UNION SELECT r.id, r.parent_run_id FROM runs AS r JOIN chain AS c ON r.id = c.parent_run_id"
    ") SELECT id FROM chain WHERE parent_run_id IS NULL"
)
_INTERACTION_COLUMNS = ", ".join(f"i.{name.strip()}" for name in rows.INTERACTION_COLUMNS.split(","))


class Backend(ABC):
    """The ``Store`` methods both backends share; a backend sets the attributes below and opens the
    connections.

    Attributes:
        _where: the store's location as messages name it (a path, or a URL without its password).
        _clock: where timestamps come from.
        _closed: the store was closed.
        _pid: the process that opened it.
        _subscribers: who hears of this store object's commits.
    """

    _where: str
    _clock: Callable[[], float]
    _closed: bool
    _pid: int
    _subscribers: tuple[Subscriber, ...]

    # -- what a backend provides --------------------------------------------------------------------------

    @abstractmethod
    def _reading(self, what: str) -> AbstractContextManager[Db]:
        """A connection for reads (each statement sees what was committed when it ran)."""

    @abstractmethod
    def _writing(self, what: str) -> AbstractContextManager[Db]:
        """A connection inside a transaction, committed when the block ends, rolled back if it raises."""

    @abstractmethod
    def _statement(self, what: str) -> AbstractContextManager[Db]:
        """A connection for statements that each write on their own (no transaction around them needed)."""

    @abstractmethod
    def _consistent(self, what: str) -> AbstractContextManager[Db]:
        """A connection whose reads all see the same moment (a record read from several tables)."""

    @abstractmethod
    def transaction(
        self, run_id: str, *, fence: Lease | None = None
    ) -> AbstractContextManager[StoreTransaction]:
        """A unit of work on one run (see ``Store.transaction``)."""

    # -- lifecycle ----------------------------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Close the store; later calls fail with ``StoreError``. Closing twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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
        return self._insert_run(new_id, kind, name, owner, parent_run_id, input_json)

    @abstractmethod
    def _insert_run(
        self, new_id: str, kind: RunKind, name: str, owner: str, parent_run_id: str | None, input_json: str
    ) -> RunRecord:
        """Insert a run whose values ``create_run`` checked; ConfigError if its id is taken."""

    def get_run(self, run_id: str, *, owner: str | None = None) -> RunRecord:
        """The run with that id (NotFoundError if none, or if ``owner`` is given and is not its owner)."""
        with self._reading("get_run") as db:
            row = db.one(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None or (owner is not None and row["owner"] != owner):
            raise self._no_run(run_id, owner)
        return rows.run_record(row)

    def root_of(self, run_id: str) -> str:
        """The id of the run at the top of ``run_id``'s parent chain (itself when it has no parent).

        Raises:
            NotFoundError: there is no such run.
        """
        with self._reading("root_of") as db:
            row = db.one(_ROOT_OF, (run_id,))
        if row is None:
            raise self._no_run(run_id)
        root: str = row["id"]
        return root

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
            if row is None and not run_exists(db, run_id):
                raise self._no_run(run_id)
        return None if row is None else rows.snapshot(row)

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
            if not found and not run_exists(db, run_id):
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
            scope = f" for owner {owner!r}" if owner is not None else ""
            raise NotFoundError(f"no interaction {interaction_id!r}{scope} in the store at {self._where}")
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
        with self._reading("receipts") as db:
            found = db.all(
                f"SELECT {rows.RECEIPT_COLUMNS} FROM receipts WHERE run_id = ? ORDER BY pos", (run_id,)
            )
            if not found and not run_exists(db, run_id):
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
            if not found and not run_exists(db, run_id):
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

        ``expected_version=None`` creates the document and fails if one exists. The check and the write are
        one step (each statement a compare-and-set, inside a transaction that holds the write lock on
        SQLite), so of two writers that read the same version exactly one succeeds.

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
        with self._statement("create_token") as db:
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
        with self._consistent("get_turn") as db:  # the turn and its attempts as of one moment
            return turns.get_turn(db, turn_id, owner, self._where)

    def find_turn(self, run_id: str) -> TurnRecord | None:
        """The turn the ``ask`` run ``run_id`` stored, or None while it runs (or if it stored none)."""
        with self._consistent("find_turn") as db:
            return turns.find_turn(db, run_id)

    def list_turns(
        self, conversation_id: str, *, owner: str | None = None, last: int | None = None
    ) -> list[TurnRecord]:
        """The conversation's turns, oldest first; only the ``last`` ones when given.

        Raises:
            NotFoundError: no such conversation (for this owner).
        """
        with self._consistent("list_turns") as db:
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
        return self._take_lease(run_id, holder, ttl)

    @abstractmethod
    def _take_lease(self, run_id: str, holder: str, ttl: float) -> Lease | None:
        """``take_lease`` with its arguments checked: one statement decides and writes, under a lock."""

    def extend_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a live lease to ``ttl`` seconds from now; returns it with its new ``expires_at``.

        Raises:
            LeaseLost: the lease is no longer current (expired, released or taken); nothing changed.
            NotFoundError: there is no such run.
        """
        fence = leases.checked_fence(lease, None, "extend_lease: lease")
        ttl = check.seconds(ttl, "extend_lease: ttl")
        return fence.model_copy(update={"expires_at": self._extend_lease(fence, ttl)})

    @abstractmethod
    def _extend_lease(self, fence: Lease, ttl: float) -> float:
        """``extend_lease`` with its arguments checked; the lease's new expiry."""

    def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (live or expired), or None when nobody holds it."""
        with self._reading("get_lease") as db:
            return self._lease_row(db, run_id)

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease up; False if ``owner`` did not hold it. The next holder gets a new generation."""
        owner = leases.checked_holder(owner, "release_lease: owner")
        with self._statement("release_lease") as db:
            changed = db.run(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE id = ? AND lease_owner = ?",
                (run_id, owner),
            )
            if changed == 0 and not run_exists(db, run_id):
                raise self._no_run(run_id)
        return changed == 1

    # -- for the backends ---------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        """Refuse a call on a closed store, or in a process that did not open it."""
        if self._closed:
            raise StoreError(f"{what}: the store at {self._where} is closed")
        if self._pid != os.getpid():
            # Connections copied by fork() share their locks and sockets with the parent; Celery's prefork
            # pool is the usual way in.
            raise StoreError(
                f"{what}: the store at {self._where} was opened in process {self._pid} and is used in "
                f"process {os.getpid()} (after a fork); open the store again in this process"
            )

    def _lease_row(self, db: Db, run_id: str) -> Lease | None:
        row = db.one(f"SELECT {leases.LEASE_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise self._no_run(run_id)
        return leases.lease_of(run_id, row)

    def _interactions(self, clauses: list[str], params: list[object], owner: str | None) -> list[Interaction]:
        source = "interactions AS i"
        if owner is not None:
            source += " JOIN runs AS r ON r.id = i.run_id"
            clauses = [*clauses, "r.owner = ?"]
            params = [*params, owner]
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        with self._reading("interactions") as db:
            found = db.all(f"SELECT {_INTERACTION_COLUMNS} FROM {source} {where}ORDER BY i.pos", params)
        return [rows.interaction(row) for row in found]

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


def run_exists(db: Db, run_id: str) -> bool:
    """Whether the store holds a run with that id."""
    return db.one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is not None


__all__ = ["Backend", "run_exists"]
