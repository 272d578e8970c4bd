"""What every store backend offers: the ``Store`` and ``Transaction`` protocols and the records they return.

For: the contract engines, the server and workers program against, so that SQLite and PostgreSQL are
interchangeable without touching them. Not for: any backend's SQL (``store/sqlite.py``,
``store/postgres.py``) or for opening a store from a URL (``store/url.py``).

The API is synchronous and transactions are short: build events and state first, then write them in one
``with store.transaction(run_id) as tx:`` block, with no ``await`` inside it. All timestamps are seconds
since the Unix epoch (UTC), as floats.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate.errors import SchemaVersionError, StoreError
from plangate.events import Event, InteractionKind, InteractionTool, JsonObject
from plangate.vocab import TERMINAL_STATUSES as TERMINAL_STATUSES
from plangate.vocab import InteractionStatus as InteractionStatus
from plangate.vocab import ReceiptSource as ReceiptSource
from plangate.vocab import RunKind as RunKind
from plangate.vocab import RunStatus as RunStatus
from plangate.vocab import WriteIntentStatus as WriteIntentStatus

if TYPE_CHECKING:  # encoded.py checks with the store's rules, which import this module
    from plangate.store.encoded import EncodedObject

T = TypeVar("T")


class Record(BaseModel):
    """The base of a store's records: frozen, and no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RunRecord(Record):
    """A run as stored: what it is, where it stands, and who holds its lease.

    Attributes:
        last_seq: the ``seq`` of its last event (0 before the first).
        outcome: set with the terminal status (``{status, stage, code, user_message, ...}``), else None.
        lease_owner: the worker advancing it, while ``lease_expires_at`` is in the future.
        origin_run_id: the run it was forked or retried from (None for any other run); left out of the
            JSON form when None, so that records read before it existed keep their exact form.
    """

    id: str
    kind: RunKind
    name: str
    status: RunStatus
    input: JsonObject
    owner: str
    parent_run_id: str | None
    outcome: JsonObject | None
    last_seq: int
    created_at: float
    updated_at: float
    lease_owner: str | None
    lease_expires_at: float | None
    origin_run_id: str | None = Field(default=None, exclude_if=lambda value: value is None)


class RunPage(Record):
    """One page of ``list_runs``, newest first; pass ``next_cursor`` back for the next (None: no more)."""

    items: list[RunRecord]
    next_cursor: str | None


class Snapshot(Record):
    """The latest state an engine saved for a run (replaced at each save, never appended).

    Attributes:
        version: the format version of ``state``, chosen by the engine that wrote it.
        seq: the run's ``last_seq`` when it was saved, so a reader knows which events it covers.
    """

    run_id: str
    version: int
    seq: int
    state: JsonObject
    updated_at: float

    def checked_state(self, supported_version: int) -> JsonObject:
        """The state, if this code can read its version.

        Raises:
            SchemaVersionError: the snapshot was written in a newer format than ``supported_version``.
        """
        if self.version > supported_version:
            raise SchemaVersionError(
                f"the snapshot of run {self.run_id!r} has format version {self.version}; this plangate reads "
                f"up to version {supported_version}: upgrade plangate to resume this run"
            )
        return self.state


class Interaction(Record):
    """A question or consent request waiting for (or answered by) a person.

    Attributes:
        id: random and unguessable; resuming a run needs it.
        tool: the exact call a consent request is about, else None.
        resolution: what the person answered (``{"kind": "approve"}``, ...), once resolved.
    """

    id: str
    run_id: str
    kind: InteractionKind
    status: InteractionStatus
    prompt: str
    tool: InteractionTool | None
    step_id: str | None
    created_at: float
    resolved_at: float | None
    resolved_by: str | None
    resolution: JsonObject | None


class Receipt(Record):
    """Evidence that something happened during a plan step (a read, an executed write, a user reply).

    Attributes:
        name: the tool that produced it (``ask_user`` for a person's answer).
        output: what the call returned: the tool's JSON data, else its observation text; a person's answer;
            None where nothing was recorded (receipts written before schema version 4).
    """

    run_id: str
    step_index: int
    source: ReceiptSource
    name: str
    arguments_digest: str
    success: bool
    summary: str
    at: float
    output: JsonValue = None


class WriteIntent(Record):
    """The promise, committed before a write tool runs, that it runs at most once for ``key``.

    Attributes:
        key: the idempotency key (the id of the interaction that approved the write).
        status: ``intent`` until the write's receipt is committed, then ``done``.
    """

    key: str
    run_id: str
    tool: str
    arguments_digest: str
    status: WriteIntentStatus
    result: JsonObject | None
    created_at: float
    completed_at: float | None


class Lease(Record):
    """The right to advance one run, held by one holder until ``expires_at``, fencing its commits.

    Each time the lease changes hands (taken while free, released or expired) its ``generation`` grows by one,
    so a holder that lost it (paused past expiry, cut off) carries a generation that is no longer current: a
    transaction fenced by it (``store.transaction(run_id, fence=lease)``) is refused with ``LeaseLost``.

    Attributes:
        holder: who holds it (a worker's name, unique per process and task).
        generation: 1 for the first holder of the run, one more for each later one.
        expires_at: when it lapses unless renewed (seconds since the epoch, by the store's clock).
    """

    run_id: str
    holder: str
    generation: int
    expires_at: float


@dataclass(frozen=True, slots=True)
class Commit:
    """What subscribers hear after a transaction committed: its events, and the run's new status if set."""

    run_id: str
    events: tuple[Event, ...]
    status: RunStatus | None


@dataclass(frozen=True, slots=True)
class RunChange:
    """What a run's transaction changed that a component may act on inside it (``Component.on_commit``): it
    set a terminal status, or opened an interaction.

    Attributes:
        run: the run as it was when the transaction began.
        status: the status the transaction set, or None.
        outcome: the outcome set with it, or None.
        opened: the interactions the transaction opened.
        at: the store's clock as the transaction ends.
    """

    run: RunRecord
    status: RunStatus | None
    outcome: JsonObject | None
    opened: tuple[Interaction, ...]
    at: float

    @property
    def ended(self) -> bool:
        """Whether the transaction ended the run (a terminal status set on a run that had none)."""
        return self.status in TERMINAL_STATUSES and self.run.status not in TERMINAL_STATUSES


Subscriber = Callable[[Commit], None]
"""Called after each commit (in the committing thread for this store object's own); must be quick and must
not raise."""


class LeaseLost(StoreError):
    """A transaction fenced by a lease that is no longer current (expired, released or taken by another
    holder) was refused; it wrote nothing.

    The holder must stop advancing the run: whoever holds the lease now continues it from the store.

    Attributes:
        lease: the lease the transaction was fenced by.
        current: the run's lease as stored now (None when nobody holds it).
    """

    def __init__(self, message: str, *, lease: Lease, current: Lease | None) -> None:
        self.lease = lease
        self.current = current
        super().__init__(message)


class WriteIntentConflict(StoreError):
    """A write intent already exists for that key, or was already completed: the write may have run.

    Attributes:
        intent: the intent as stored.
    """

    def __init__(self, message: str, *, intent: WriteIntent) -> None:
        self.intent = intent
        super().__init__(message)


class Transaction(Protocol):
    """One unit of work on one run: everything written through it commits together or not at all.

    Other writers of the same run wait until it ends. Events get their ``seq`` as they are appended; they
    reach subscribers only after the commit.
    """

    @property
    def run_id(self) -> str:
        """The run this transaction writes to."""
        ...

    @property
    def run(self) -> RunRecord:
        """The run as it was when the transaction began."""
        ...

    @property
    def status(self) -> RunStatus:
        """The run's status when the transaction began (``run.status``, without reading the whole row)."""
        ...

    @property
    def events(self) -> Sequence[Event]:
        """The events appended so far, as stored (with ``run_id``, ``seq`` and ``at``)."""
        ...

    def append(self, event: Event) -> Event:
        """Add an event to the run's log; returns it as stored, with the next ``seq``."""
        ...

    def extend(self, events: Iterable[Event]) -> None:
        """Add each of ``events`` to the run's log, in order, as ``append`` does, returning nothing (for a
        commit of many events whose stored copies nobody reads)."""
        ...

    def set_snapshot(self, state: Mapping[str, object] | EncodedObject, *, version: int = 1) -> None:
        """Replace the run's snapshot with ``state`` (a JSON object, or one encoded already) in format
        ``version``."""
        ...

    def set_status(self, status: RunStatus, *, outcome: Mapping[str, object] | None = None) -> None:
        """Set the run's status; ``outcome`` (a JSON object) is kept with it when given."""
        ...

    def add_receipt(
        self,
        *,
        step_index: int,
        source: ReceiptSource,
        name: str,
        arguments_digest: str,
        success: bool,
        summary: str,
        output: JsonValue = None,
    ) -> Receipt:
        """Record evidence bound to plan step ``step_index``; ``output`` (any JSON value) is what its call
        returned."""
        ...

    def open_interaction(
        self,
        kind: InteractionKind,
        prompt: str,
        *,
        tool: InteractionTool | None = None,
        step_id: str | None = None,
    ) -> Interaction:
        """Open the run's interaction (a run has at most one open) with a new random id."""
        ...

    def resolve_interaction(
        self, interaction_id: str, resolution: Mapping[str, object], resolved_by: str | None = None
    ) -> Interaction:
        """Resolve this run's open interaction, compare-and-set: only an open one can be resolved."""
        ...

    def expire_interaction(self, interaction_id: str) -> Interaction:
        """Mark this run's open interaction expired (nobody will answer it), compare-and-set."""
        ...

    def record_write_intent(self, key: str, tool: str, arguments_digest: str) -> WriteIntent:
        """Promise that the write keyed ``key`` is about to run; commit this before running it."""
        ...

    def complete_write_intent(
        self,
        key: str,
        *,
        step_index: int,
        success: bool,
        summary: str,
        result: Mapping[str, object] | None = None,
        output: JsonValue = None,
    ) -> Receipt:
        """Mark the write keyed ``key`` done and record its ``write_receipt`` with ``output`` (returned)."""
        ...


class Store(Protocol):
    """A durable home for runs: their event logs, snapshots, interactions, receipts, write intents and
    leases (the run core). What belongs to no run's life (documents, bearer tokens, copilot conversations)
    is kept by repositories of its own on the same database (``store/repository.py``).

    Methods raise ``NotFoundError`` for an unknown run or interaction id (also when ``owner`` is given and
    the record belongs to someone else), ``ConfigError`` for a bad argument and ``StoreError`` when the
    backend itself fails. A thread holding an open transaction must not call the store (only the
    transaction) until the ``with`` block ends.
    """

    def close(self) -> None:
        """Release the backend's connections; later calls fail with ``StoreError``."""
        ...

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
        lease: tuple[str, float] | None = None,
    ) -> RunRecord:
        """Create a ``queued`` run; its id is random (``run_…``) unless ``run_id`` is given;
        ``origin_run_id``: the run it is a fork or a retry of; ``lease``: ``(holder, ttl)``, its lease held
        from the start (``LeaseBook.create_run``)."""
        ...

    def get_run(self, run_id: str, *, owner: str | None = None) -> RunRecord:
        """The run with that id."""
        ...

    def root_of(self, run_id: str) -> str:
        """The id of the run at the top of ``run_id``'s parent chain (``run_id`` itself when it has no
        parent), found in one query."""
        ...

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
        """Runs matching every filter given, newest first, one page of at most ``limit``; ``top_level``: only
        runs without a parent (no sub-runs, no agent steps' agents); ``origin_run_id``: only the forks and
        retries of that run (an index reads them)."""
        ...

    def get_snapshot(self, run_id: str) -> Snapshot | None:
        """The run's latest snapshot, or None if none was saved."""
        ...

    # -- writing ------------------------------------------------------------------------------------------

    def transaction(self, run_id: str, *, fence: Lease | None = None) -> AbstractContextManager[Transaction]:
        """A unit of work on one run, committed when the ``with`` block ends, rolled back if it raises.

        With ``fence``, the transaction goes ahead only while that lease is the run's live one (same holder,
        same generation, not expired); otherwise it raises ``LeaseLost`` and writes nothing.
        """
        ...

    def try_transaction(
        self, run_id: str, *, fence: Lease | None = None
    ) -> AbstractContextManager[Transaction | None]:
        """``transaction`` when it can begin at once, without waiting for a lock; else the block gets None
        (a backend that waits on the network for every statement, PostgreSQL, always gives None)."""
        ...

    def commit(self, run_id: str, write: Callable[[Transaction], T], *, fence: Lease) -> T:
        """``write`` in a ``transaction`` on the run fenced by ``fence``, committed when it returns; what it
        returned. The store may call ``write`` twice: when a transaction that began from what this store
        object committed last on the run finds, as it commits, that somebody else wrote to the run since, it
        is rolled back, nothing of it written, and ``write`` runs again on the run as it is. So ``write``
        acts only through its transaction (events appended to it are handed back unstamped before the second
        call).

        Raises:
            LeaseLost: ``fence`` is no longer the run's live lease; nothing was written.
            StoreError: as ``transaction``; and whatever ``write`` raises (nothing written).
        """
        ...

    def subscribe(self, callback: Subscriber, *, remote: bool = False) -> Callable[[], None]:
        """Call ``callback`` after each commit made through this store object; returns the unsubscriber.

        With ``remote``, also after commits made by other store objects (other processes, other machines),
        where the backend can tell (PostgreSQL's ``LISTEN/NOTIFY``; SQLite cannot).
        """
        ...

    # -- events -------------------------------------------------------------------------------------------

    def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """The run's events with ``seq > after``, in order, at most ``limit`` of them."""
        ...

    def last_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's last event (0 before the first)."""
        ...

    # -- interactions -------------------------------------------------------------------------------------

    def get_interaction(self, interaction_id: str, *, owner: str | None = None) -> Interaction:
        """The interaction with that id."""
        ...

    def list_interactions(
        self,
        *,
        status: InteractionStatus | None = None,
        run_id: str | None = None,
        owner: str | None = None,
    ) -> list[Interaction]:
        """Interactions matching every filter given, oldest first."""
        ...

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
        ...

    # -- receipts and write intents -----------------------------------------------------------------------

    def receipts(self, run_id: str) -> list[Receipt]:
        """The run's receipts, in the order they were recorded."""
        ...

    def get_write_intent(self, key: str) -> WriteIntent | None:
        """The write intent with that key, or None."""
        ...

    def pending_write_intents(self, run_id: str) -> list[WriteIntent]:
        """The run's intents that have no receipt yet (the writes whose fate a restart must reconcile)."""
        ...

    # -- leases -------------------------------------------------------------------------------------------

    def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease | None:
        """Take the run's lease for ``ttl`` seconds if it is free or expired (a new generation), or extend it
        if ``holder`` holds it live (the same generation); None while another holder's lease is live."""
        ...

    def extend_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a live lease to ``ttl`` seconds from now.

        Raises:
            LeaseLost: the lease is no longer current (expired, released or taken); nothing changed.
        """
        ...

    def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (live or expired), or None when nobody holds it."""
        ...

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease up; False if ``owner`` did not hold it."""
        ...
