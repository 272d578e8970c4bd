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
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue

from plangate.errors import SchemaVersionError, StoreError
from plangate.events import Event, InteractionKind, InteractionTool, JsonObject
from plangate.vocab import TERMINAL_STATUSES as TERMINAL_STATUSES
from plangate.vocab import InteractionStatus as InteractionStatus
from plangate.vocab import ReceiptSource as ReceiptSource
from plangate.vocab import RunKind as RunKind
from plangate.vocab import RunStatus as RunStatus
from plangate.vocab import TurnStatus as TurnStatus
from plangate.vocab import WriteIntentStatus as WriteIntentStatus

if TYPE_CHECKING:  # encoded.py checks with the store's rules, which import this module
    from plangate.store.encoded import EncodedObject



class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunRecord(_Record):
    """A run as stored: what it is, where it stands, and who holds its lease.

    Attributes:
        last_seq: the ``seq`` of its last event (0 before the first).
        outcome: set with the terminal status (``{status, stage, code, user_message, ...}``), else None.
        lease_owner: the worker advancing it, while ``lease_expires_at`` is in the future.
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


class RunPage(_Record):
    """One page of ``list_runs``, newest first; pass ``next_cursor`` back for the next (None: no more)."""

    items: list[RunRecord]
    next_cursor: str | None


class Snapshot(_Record):
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


class Interaction(_Record):
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


class Receipt(_Record):
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


class Document(_Record):
    """A small JSON object kept under ``(namespace, key)``, written by compare-and-set.

    Documents hold state that belongs to no single run (a week planner, a user's settings). Each write
    increments ``version``; a writer names the version it read, so that two writers never overwrite each
    other's changes unnoticed.

    Attributes:
        namespace: the kind of document (``schedule``), so that toolkits never collide on keys.
        key: the document's name inside its namespace.
        value: the JSON object stored.
        version: 1 after the first write, one more after each later write.
        updated_at: when the current version was written.
    """

    namespace: str
    key: str
    value: JsonObject
    version: int
    updated_at: float


class Token(_Record):
    """A bearer token as stored: who it speaks for and whether it still works, never the token itself.

    The store keeps only a hash of the token (``create_token``); whoever made the token showed it once.

    Attributes:
        id: not secret (listings show it); ``revoke_token`` takes it.
        owner: the owner every request made with the token acts as.
        name: a label to tell a person's tokens apart (``laptop``, ``ci``); may be empty.
        revoked_at: when it was revoked, or None while it works.
    """

    id: str
    owner: str
    name: str
    created_at: float
    revoked_at: float | None


class Conversation(_Record):
    """A thread of copilot turns that belong together (later turns see the earlier ones as history).

    Attributes:
        id: ``conv_…``, random.
        title: the first question, clipped; may be empty.
        turns: how many turns it holds.
        updated_at: when its last turn was stored (its creation time before that).
    """

    id: str
    owner: str
    title: str
    turns: int
    created_at: float
    updated_at: float


class ConversationPage(_Record):
    """One page of ``list_conversations``, most recently updated first; ``next_cursor`` for the next."""

    items: list[Conversation]
    next_cursor: str | None


class AttemptRecord(_Record):
    """One attempt of a turn, as stored: how it ended, why, what the review found, what it built and ran.

    Attributes:
        n: 1 for the first attempt, 2 for the retry.
        review: ``{severity, verdict, signals: [{kind, detail, severity}], note}``.
        formula: the formula it built (its JSON form), or None.
        run_id: the formula run it started, or None.
        result: ``{columns, rows}``: the rows its answer is based on.
        issues: the check's issues left when it was final (``{level, code, path, message}``).
    """

    n: int
    status: TurnStatus
    reason: str
    review: JsonObject
    formula: JsonObject | None
    run_id: str | None
    answer: str
    result: JsonObject
    issues: list[JsonObject]
    started_at: float
    finished_at: float


class TurnRecord(_Record):
    """A finished copilot turn with all its attempts; stored whole, in one transaction, or not at all.

    Attributes:
        id: ``turn_…``.
        run_id: the ``ask`` run that carried it (its events are the turn's ops, review and outcome).
        result: ``{columns, rows}``: the rows the answer is based on (empty lists when none).
        formula: the formula of the attempt the turn's answer comes from, or None.
        source: the data source the question was about.
        model: the spec of the model that generated the formula.
    """

    id: str
    conversation_id: str
    run_id: str
    owner: str
    question: str
    status: TurnStatus
    reason: str
    answer: str
    result: JsonObject
    formula: JsonObject | None
    source: str
    model: str
    created_at: float
    finished_at: float
    attempts: list[AttemptRecord]


class WriteIntent(_Record):
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


class Lease(_Record):
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


class DocumentConflict(StoreError):
    """A compare-and-set write of a document found another version than the one it expected; nothing changed.

    Read the document again, reapply the change to what is stored now, and write with the new version.

    Attributes:
        namespace: the document's namespace.
        key: the document's key.
        expected_version: the version the writer expected (None: expected no document).
        current: the document as stored now, or None when there is none.
    """

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        expected_version: int | None,
        current: Document | None,
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.expected_version = expected_version
        self.current = current
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

    def get_document(self, namespace: str, key: str) -> Document | None:
        """The document as this transaction sees it (its own writes included), or None."""
        ...

    def put_document(
        self, namespace: str, key: str, value: Mapping[str, object], *, expected_version: int | None
    ) -> Document:
        """Write a document with the run's other changes, compare-and-set (see ``Store.put_document``).

        A conflict raises ``DocumentConflict``; left to propagate, it rolls the whole transaction back.
        """
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

    def record_turn(self, turn: TurnRecord) -> TurnRecord:
        """Store a finished copilot turn and its attempts with the run's other changes (its outcome).

        The turn's ``run_id`` must be this transaction's run; its conversation must exist, and its
        ``updated_at`` moves on to the turn's ``finished_at`` (never back).

        Raises:
            ConfigError: another run's turn, a turn id stored already, or attempts not numbered 1, 2, ...
            NotFoundError: no such conversation.
        """
        ...


class Store(Protocol):
    """A durable home for runs, their event logs, snapshots, interactions, receipts, write intents,
    small versioned documents, the hashes of bearer tokens, and copilot conversations and turns.

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
    ) -> RunRecord:
        """Create a ``queued`` run; its id is random (``run_…``) unless ``run_id`` is given."""
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
    ) -> RunPage:
        """Runs matching every filter given, newest first, one page of at most ``limit``; ``top_level``: only
        runs without a parent (no sub-runs, no agent steps' agents)."""
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

    # -- documents ----------------------------------------------------------------------------------------

    def get_document(self, namespace: str, key: str) -> Document | None:
        """The document stored under ``(namespace, key)``, or None if none was written."""
        ...

    def put_document(
        self, namespace: str, key: str, value: Mapping[str, object], *, expected_version: int | None
    ) -> Document:
        """Write ``value`` (a JSON object) under ``(namespace, key)`` if the stored version is as expected.

        Args:
            namespace: the kind of document; a non-empty string.
            key: the document's name; a non-empty string.
            value: the new content, replacing the old one whole.
            expected_version: the version read before the change; None to create a document that must not
                exist yet.

        Returns:
            The document as stored, with its new version.

        Raises:
            DocumentConflict: the stored version is not ``expected_version``; nothing changed.
        """
        ...

    # -- tokens -------------------------------------------------------------------------------------------

    def create_token(self, owner: str, token_hash: str, name: str = "") -> Token:
        """Record a bearer token by its hash (a lowercase hex digest), for ``owner``.

        Raises:
            ConfigError: a bad argument, or a token with that hash exists already.
        """
        ...

    def find_token(self, token_hash: str) -> Token | None:
        """The token with that hash if it exists and is not revoked, else None."""
        ...

    def list_tokens(self, *, owner: str | None = None) -> list[Token]:
        """Every token (revoked ones included), oldest first, only ``owner``'s when given."""
        ...

    def revoke_token(self, token_id: str) -> Token:
        """Revoke a token: ``find_token`` no longer returns it. Revoking twice keeps the first time.

        Raises:
            NotFoundError: no token has that id.
        """
        ...

    # -- conversations and turns ----------------------------------------------------------------------------

    def create_conversation(
        self, *, owner: str = "local", title: str = "", conversation_id: str | None = None
    ) -> Conversation:
        """Start a conversation; its id is random (``conv_…``) unless ``conversation_id`` is given.

        Raises:
            ConfigError: a bad argument, or a conversation with that id exists already.
        """
        ...

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> Conversation:
        """The conversation with that id (NotFoundError if none, or if it is not ``owner``'s)."""
        ...

    def list_conversations(
        self, *, owner: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ConversationPage:
        """Conversations, most recently updated first, one page of at most ``limit``."""
        ...

    def get_turn(self, turn_id: str, *, owner: str | None = None) -> TurnRecord:
        """The stored turn with that id, attempts included (NotFoundError if none, or not ``owner``'s)."""
        ...

    def find_turn(self, run_id: str) -> TurnRecord | None:
        """The turn the ``ask`` run ``run_id`` stored, or None while it runs (or if it stored none)."""
        ...

    def list_turns(
        self, conversation_id: str, *, owner: str | None = None, last: int | None = None
    ) -> list[TurnRecord]:
        """The conversation's turns, oldest first; only the ``last`` ones when given.

        Raises:
            NotFoundError: no such conversation (for this owner).
        """
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
