"""What both store backends do the same way: every read, the writes that are one statement or a few, and
the skeleton of a run's transaction.

For: ``Backend``, the base class of ``SQLiteStore`` and ``PostgresStore``. It holds each ``Store`` method
whose SQL both backends speak (the shared ``?`` statements of ``Db``), written once: runs, snapshots,
events, interactions, receipts, write intents, the leases' reads and releases, the argument checks of
``create_run``, ``take_lease`` and ``extend_lease``, and ``transaction`` (lock the run's row, check the
fence, hand out the unit of work, commit, tell subscribers); and the ``Database`` it offers repositories
(``store/repository.py``). A backend says how it opens a connection for each kind of work (``_reading``,
``_writing``, ``_statement``, ``_consistent``) and keeps what it does its own way: opening and closing,
inserting a run, how the transaction locks the run's row and announces its commit, subscriptions,
migrations, and the one statement that takes or extends a lease. Not for: the SQL of one backend only, or
the unit of work itself (``store/_tx.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Generic, Literal, Self, TypeVar

from plangate.errors import NotFoundError, StoreError
from plangate.events import Event
from plangate.store import _checks as check
from plangate.store import _leases as leases
from plangate.store import _rows as rows
from plangate.store._migrate import CommitHook, Component, commit_hooks
from plangate.store._sql import Db
from plangate.store._tx import RUN_RECORD, StoreTransaction
from plangate.store.base import (
    Commit,
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
    WriteIntent,
)
from plangate.store.ddl import Dialect

logger = logging.getLogger("plangate.store")

# One statement on both backends: climb the parent links from the run to the run without a parent. UNION
# (not UNION ALL) ends the climb even on a cycle, which create_run's checks never let form.
_ROOT_OF = (
    "WITH RECURSIVE chain (id, parent_run_id) AS ("
    "SELECT id, parent_run_id FROM runs WHERE id = ? "
    "UNION SELECT r.id, r.parent_run_id FROM runs AS r JOIN chain AS c ON r.id = c.parent_run_id"
    ") SELECT id FROM chain WHERE parent_run_id IS NULL"
)
# A run's events after a seq, or one row of NULLs when it has none: one statement says which, and whether the
# run exists at all (no row).
_EVENTS_OF_RUN = (
    "SELECT e.run_id, e.seq, e.type, e.payload, e.at FROM runs AS r "
    "LEFT JOIN events AS e ON e.run_id = r.id AND e.seq > ? WHERE r.id = ? ORDER BY e.seq"
)
# The run's row as a transaction begins (locked with the backend's ``_ROW_LOCK``): what the transaction
# needs, or its whole record too (``RUN_RECORD``, which the transaction reads itself when first asked for)
_TX_ROW = f"SELECT id, status, last_seq, {leases.LEASE_COLUMNS} FROM runs WHERE id = ?"
_INTERACTION_COLUMNS = ", ".join(f"i.{name.strip()}" for name in rows.INTERACTION_COLUMNS.split(","))


T = TypeVar("T")
Y = TypeVar("Y")

Told = tuple[StoreTransaction, Commit | None]
"""A committed transaction, and the notice its commit made (PostgreSQL's), to tell subscribers."""

Unit = Callable[[Db], Generator[Y, None, T]]
"""Work in a transaction on ``Db``: it hands out what the ``with`` block gets (its one ``yield``: the run's
transaction, or the connection itself), then finishes when resumed; it returns the transaction's result."""

Related = tuple[str | None, str | None]
"""The runs a new run names: its parent and its origin (either may be None)."""

_RELATED = ("parent_run_id", "origin_run_id")


def check_related(db: Db, related: Related, where: str) -> None:
    """Raise NotFoundError when a run ``related`` names does not exist (inside the insert's write lock)."""
    for column, run_id in zip(_RELATED, related, strict=True):
        if run_id is not None and not run_exists(db, run_id):
            raise NotFoundError(f"create_run: {column}: no run {run_id!r} in {where}")


INSERT_RUN = (
    "INSERT INTO runs (id, kind, name, owner, parent_run_id, origin_run_id, status, input, created_at, "
    "updated_at, lease_owner, lease_expires_at, lease_generation) "
    "VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)"
)
"""The one insert of a run, both backends' (its values: ``NewRun.values``)."""

LeaseRequest = tuple[str, float]
"""``(holder, ttl)``: a new run's lease, held from its creation."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to insert, its values checked by ``create_run``.

    Attributes:
        related: its parent and its origin (either may be None).
        input_json: its input, as stored.
        lease: held from its creation (generation 1), or None.
    """

    id: str
    kind: RunKind
    name: str
    owner: str
    related: Related
    input_json: str
    lease: LeaseRequest | None

    def values(self, now: float) -> tuple[object, ...]:
        """The parameters of ``INSERT_RUN``, created at ``now``."""
        leased = (None, None, 0) if self.lease is None else (self.lease[0], now + self.lease[1], 1)
        return (self.id, self.kind, self.name, self.owner, *self.related, self.input_json, now, now, *leased)


class Held(threading.local):
    """Per thread: the run whose transaction the thread holds (None: none). A default on the class, so that
    a thread that never held one reads it without an ``AttributeError`` raised and caught inside."""

    tx_run: str | None = None


class _Process:
    """This process, as a store knows it was opened in it: ``token`` is replaced in the child of a
    ``fork()``, so that every call compares two objects rather than asking the system for the process id."""

    token = object()


def _forked() -> None:
    _Process.token = object()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork()
    os.register_at_fork(after_in_child=_forked)


class Block(Generic[Y]):
    """The ``with`` block of ``transaction``, ``try_transaction`` and a backend's own ``commit``
    (``PostgresStore``): it runs the backend's generator as ``contextlib.contextmanager`` would (what it
    hands out is the block's; resumed when the block ends, the block's exception thrown into it), without
    its generic work on the path of every commit; then tells the subscribers of the commit."""

    __slots__ = ("_store", "_work")

    def __init__(self, store: Backend, work: Generator[Y, None, Told | None]) -> None:
        self._store = store
        self._work = work

    def __enter__(self) -> Y:
        return next(self._work)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None:
            try:
                next(self._work)
            except StopIteration as stopped:
                if stopped.value is not None:
                    self._store._tell(*stopped.value)
                return False
            raise StoreError("a store's transaction handed out more than one value")
        try:
            self._work.throw(exc)
        except StopIteration:
            raise StoreError("a store's transaction swallowed its block's exception") from exc
        except RuntimeError as raised:
            if raised is exc or raised.__cause__ is exc:  # a StopIteration of the block's, turned into this
                return False
            raise
        except BaseException as raised:
            if raised is exc:  # rolled back: the block's own exception goes on, with its traceback
                return False
            raise
        raise StoreError("a store's transaction went on after its block's exception")


class Backend(ABC):
    """The ``Store`` methods both backends share; a backend sets the attributes below and opens the
    connections.

    Attributes:
        dialect: the SQL the backend speaks.
        _where: the store's location as messages name it (a path, or a URL without its password).
        _clock: where timestamps come from.
        _closed: the store was closed.
        _pid: the process that opened it, and ``_process`` its token (``_opened_here``).
        _subscribers: who hear of this store object's commits.
        _local: per thread, the run whose transaction the thread holds (``tx_run``).
    """

    dialect: ClassVar[Dialect]
    _where: str
    _clock: Callable[[], float]
    _closed: bool
    _pid: int
    _process: object
    _subscribers: tuple[Subscriber, ...]
    _local: Held
    #: what locks the run's row when a transaction reads it (PostgreSQL; SQLite's write lock covers it)
    _ROW_LOCK: ClassVar[str] = ""
    #: whether a transaction reads its run's whole record as it begins (PostgreSQL, where reading it later,
    #: for a run's end, would cost a round trip), rather than only when asked (SQLite: its input is text a
    #: commit never needs, read in process)
    _TX_READS_RECORD: ClassVar[bool] = False
    _database: StoreDatabase | None = None

    def _opened_here(self) -> None:
        """Record the process that opens the store, and start its threads' record of transactions held."""
        self._pid = os.getpid()
        self._process = _Process.token
        self._local = Held()

    # -- what a backend provides --------------------------------------------------------------------------

    @abstractmethod
    def _reading(self, what: str) -> AbstractContextManager[Db]:
        """A connection for reads (each statement sees what was committed when it ran)."""

    @abstractmethod
    def _writing(self, what: str) -> AbstractContextManager[Db]:
        """A connection inside a transaction, committed when the block ends, rolled back if it raises."""

    def _within(self, what: str, unit: Unit[Y, T]) -> Generator[Y, None, T]:
        """``unit`` inside a transaction of ``_writing``: the one generator a ``transaction`` block runs
        through (a backend may make it without ``_writing``'s own block, on the path of every commit)."""
        with self._writing(what) as db:
            return (yield from unit(db))

    def _at_once(self, what: str, unit: Unit[Y, T]) -> Generator[Y | None, None, T | None]:
        """``_within`` when its transaction begins without waiting for a lock; else it hands out None once
        and returns None. By default it never begins at once (a backend that waits on the network for every
        statement)."""
        yield None
        return None

    @abstractmethod
    def _statement(self, what: str) -> AbstractContextManager[Db]:
        """A connection for statements that each write on their own (no transaction around them needed)."""

    @abstractmethod
    def _consistent(self, what: str) -> AbstractContextManager[Db]:
        """A connection whose reads all see the same moment (a record read from several tables)."""

    @abstractmethod
    def _migrate(self, component: Component) -> None:
        """Bring ``component``'s tables up to date under the backend's schema lock."""

    @abstractmethod
    def _compact(self, what: str, tables: Sequence[str]) -> None:
        """Give the space of deleted rows back (SQLite: the whole file; PostgreSQL: ``tables``)."""

    def _announce(self, db: Db, tx: StoreTransaction) -> Commit | None:
        """Just before a transaction commits, on its connection: announce the commit to other processes
        (PostgreSQL); returns the notice when it was made."""
        return None

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

    @property
    def database(self) -> StoreDatabase:
        """The database behind the store, as repositories reach it (``store/repository.py``)."""
        if self._database is None:
            self._database = StoreDatabase(self)
        return self._database

    # -- writing ------------------------------------------------------------------------------------------

    def transaction(
        self, run_id: str, *, fence: Lease | None = None
    ) -> AbstractContextManager[StoreTransaction]:
        """A unit of work on one run, committed when the ``with`` block ends, rolled back if it raises.

        It locks the run first (SQLite: the file's write lock; PostgreSQL: the run's row), so that other
        transactions on the run, in any process, wait until it ends. With ``fence``, it goes ahead only
        while that lease is the run's live one; the lock, kept to the end, keeps anybody from taking the
        lease meanwhile. Subscribers are told after the commit, outside the store's locks.

        Raises:
            NotFoundError: there is no such run.
            LeaseLost: ``fence`` is no longer the run's live lease; nothing was written.
            StoreError: the database failed (the transaction was rolled back), or the connection was lost
                while committing (the message says the commit may or may not have happened).
        """
        checked = None if fence is None else leases.checked_fence(fence, run_id)
        unit = functools.partial(self._unit, run_id=run_id, fence=checked)
        return Block(self, self._within(f"the transaction on run {run_id!r}", unit))

    def try_transaction(
        self, run_id: str, *, fence: Lease | None = None
    ) -> AbstractContextManager[StoreTransaction | None]:
        """``transaction``, when it can begin at once; else the block gets None and nothing happens.

        For a caller that must not wait (an event loop): a transaction is given only when the store takes
        the run's lock without waiting for anybody (SQLite: no other thread's or process's transaction is
        open; a PostgreSQL store waits on the network for every statement, and gives None). Raises as
        ``transaction`` does.
        """
        checked = None if fence is None else leases.checked_fence(fence, run_id)
        unit = functools.partial(self._unit, run_id=run_id, fence=checked)
        return Block(self, self._at_once(f"the transaction on run {run_id!r}", unit))

    def commit(self, run_id: str, write: Callable[[StoreTransaction], T], *, fence: Lease) -> T:
        """``write`` in a ``transaction`` on the run fenced by ``fence``, committed when it returns; what it
        returned. A backend may call ``write`` a second time, on a new transaction, when the first was rolled
        back without writing anything (``PostgresStore``): ``write`` must act only through its transaction.

        Raises:
            as ``transaction``, and what ``write`` raises (the transaction rolled back).
        """
        with self.transaction(run_id, fence=fence) as tx:
            return write(tx)

    def _unit(
        self, db: Db, *, run_id: str, fence: Lease | None, begun: rows.Row | None = None
    ) -> Generator[StoreTransaction, None, Told]:
        """The unit of work inside the backend's transaction on ``db``: lock the run's row and check the
        fence, hand the transaction out (the one ``yield``), then write it; its commit notice, if made.
        ``begun``: the run's ``id``, ``status`` and ``last_seq`` as the backend knows them, checked by
        its own means (``PostgresStore.commit``): the row is not read, and the transaction can be undone."""
        if begun is not None:
            tx = StoreTransaction(db, begun, self._clock, hooks=self.database.hooks, undoable=True)
        else:
            whole = self._TX_READS_RECORD
            row = db.one((RUN_RECORD if whole else _TX_ROW) + self._ROW_LOCK, (run_id,))
            if row is None:
                raise self._no_run(run_id)
            if fence is not None:
                leases.require_current_row(fence, run_id, row, self._clock(), "the transaction")
            tx = StoreTransaction(db, row, self._clock, hooks=self.database.hooks, whole=whole)
        self._local.tx_run = run_id
        try:
            yield tx
            tx.finish()
        finally:
            self._local.tx_run = None
            tx.close()
        return tx, self._announce(db, tx)

    def _tell(self, tx: StoreTransaction, notice: Commit | None) -> None:
        """After the commit: tell the subscribers (one may have subscribed since the transaction began)."""
        if self._subscribers:
            notice = tx.commit_notice() if notice is None else notice
            if notice is not None:
                self._notify(notice)

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
        origin_run_id: str | None = None,
        lease: LeaseRequest | None = None,
    ) -> RunRecord:
        """Create a ``queued`` run; its id is random (``run_…``) unless ``run_id`` is given;
        ``origin_run_id``: the run it is a fork or a retry of; ``lease``: ``(holder, ttl)``, its lease held
        from the start (generation 1), as ``take_lease`` would give it to the first holder.

        Raises:
            ConfigError: a bad argument, or a run with ``run_id`` exists already.
            NotFoundError: ``parent_run_id`` or ``origin_run_id`` names no run.
        """
        check.choice(kind, check.RUN_KINDS, "create_run: kind")
        check.text(name, "create_run: name")
        check.text(owner, "create_run: owner", empty=False)
        input_json = check.json_object(input, "create_run: input")
        new_id = (
            check.new_run_id() if run_id is None else check.text(run_id, "create_run: run_id", empty=False)
        )
        if lease is not None:
            lease = (
                leases.checked_holder(lease[0], "create_run: lease holder"),
                check.seconds(lease[1], "create_run: lease ttl"),
            )
        related = (parent_run_id, origin_run_id)
        return self._insert_run(NewRun(new_id, kind, name, owner, related, input_json, lease))

    @abstractmethod
    def _insert_run(self, new: NewRun) -> RunRecord:
        """Insert a run whose values ``create_run`` checked; a ConfigError if its id is taken, a
        NotFoundError if a run it names does not exist."""

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
        origin_run_id: str | None = None,
    ) -> RunPage:
        """Runs matching every filter given, newest first, at most ``limit`` (1..1000) per page;
        ``top_level``: only runs that are no other run's sub-run; ``origin_run_id``: only the forks and
        retries of that run."""
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
        for column, value in (
            ("owner", owner),
            ("parent_run_id", parent_run_id),
            ("origin_run_id", origin_run_id),
        ):
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
        params: tuple[object, ...] = (after, run_id)
        query = _EVENTS_OF_RUN
        if limit is not None:
            query += " LIMIT ?"
            params = (*params, check.integer(limit, "events: limit", minimum=1))
        with self._reading("events") as db:
            found = db.all(query, params)
        if not found:
            raise self._no_run(run_id)
        return [rows.event(row) for row in found if row["seq"] is not None]

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

    def _check_usable(self, what: str) -> None:
        """``_check_open``, and refuse a call from a thread that holds a transaction on this store."""
        self._check_open(what)
        held = self._local.tx_run
        if held is not None:
            raise StoreError(
                f"{what}: this thread holds an open transaction on run {held!r}; use that "
                "transaction, or call the store after its with block ends"
            )

    def _check_open(self, what: str) -> None:
        """Refuse a call on a closed store, or in a process that did not open it."""
        if self._closed:
            raise StoreError(f"{what}: the store at {self._where} is closed")
        if self._process is not _Process.token:
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


class StoreDatabase:
    """The ``Database`` a backend offers repositories: its connections, clock and location, and the
    migrations of their components, run once per store object."""

    __slots__ = ("_backend", "_hooks", "_migrated")

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._migrated: set[str] = set()
        self._hooks: tuple[CommitHook, ...] = ()

    @property
    def hooks(self) -> tuple[CommitHook, ...]:
        """The ``on_commit`` hooks of the components this store brought up to date."""
        return self._hooks

    @property
    def dialect(self) -> Dialect:
        """The SQL the database speaks."""
        return self._backend.dialect

    @property
    def where(self) -> str:
        """The store's location as messages name it."""
        return self._backend._where

    def now(self) -> float:
        """The store's clock."""
        return self._backend._clock()

    def reading(self, what: str) -> AbstractContextManager[Db]:
        """A connection for reads."""
        return self._backend._reading(what)

    def consistent(self, what: str) -> AbstractContextManager[Db]:
        """A connection whose reads all see the same moment."""
        return self._backend._consistent(what)

    def writing(self, what: str) -> AbstractContextManager[Db]:
        """A connection inside a transaction."""
        return self._backend._writing(what)

    def compact(self, what: str, tables: Sequence[str]) -> None:
        """Give the space of deleted rows of ``tables`` back (``store/retention.py``)."""
        self._backend._compact(what, tables)

    def migrated(self, names: set[str]) -> None:
        """Note that the components ``names`` are up to date (the store migrated them as it opened)."""
        self._migrated.update(names)
        self._hooks = commit_hooks(self._migrated)

    def migrate(self, component: Component) -> None:
        """Bring ``component``'s tables up to date, the first time this store object is asked to."""
        # no lock: a second thread that migrates meanwhile finds the work done under the schema lock
        if component.name not in self._migrated:
            self._backend._migrate(component)
            self._migrated.add(component.name)
            self._hooks = commit_hooks(self._migrated)


def run_exists(db: Db, run_id: str) -> bool:
    """Whether the store holds a run with that id."""
    return db.one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is not None


__all__ = ["Backend", "StoreDatabase", "run_exists"]
