"""The unit of work on one run, on either backend: events, snapshot, status, receipts, interactions and
intents, and the connection it lends repositories to write with them.

For: what happens between the store's ``BEGIN`` (which locks the run: ``BEGIN IMMEDIATE`` on SQLite, the run
row ``FOR NO KEY UPDATE`` on PostgreSQL) and its ``COMMIT``; the store opens, commits or rolls back, and
tells subscribers. Not for: reads outside a transaction, or opening the database.

The snapshot and the run row are written once, when the block ends, so that a snapshot saved mid-block
still records the ``seq`` of the last event committed with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError

from plangate._models import built, restamped, stamped
from plangate.errors import ConfigError, InteractionError, NotFoundError, StaleInteraction, StoreError
from plangate.events import BaseEvent, Event, InteractionKind, InteractionTool, payload_json
from plangate.store import _checks as check
from plangate.store import _rows as rows
from plangate.store._sql import Db
from plangate.store.base import (
    Commit,
    Interaction,
    Receipt,
    ReceiptSource,
    RunChange,
    RunRecord,
    RunStatus,
    WriteIntent,
    WriteIntentConflict,
)
from plangate.store.encoded import EncodedObject
from plangate.vocab import TERMINAL_STATUSES

if TYPE_CHECKING:
    from plangate.store._migrate import CommitHook

_INSERT_EVENT = "INSERT INTO events (run_id, seq, type, payload, at) VALUES (?, ?, ?, ?, ?)"
#: a run's whole record, lease included: what a transaction reads of its run as it begins, or when first
#: asked for (``StoreTransaction.run``)
RUN_RECORD = f"SELECT {rows.RUN_COLUMNS}, lease_generation FROM runs WHERE id = ?"
_UPSERT_SNAPSHOT = (
    "INSERT INTO snapshots (run_id, version, seq, state, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, seq = excluded.seq, "
    "state = excluded.state, updated_at = excluded.updated_at"
)


class StoreTransaction:
    """A ``Transaction`` on one run; made by the store's ``transaction()``, which holds the run's lock."""

    def __init__(
        self,
        db: Db,
        run_row: rows.Row,
        clock: Callable[[], float],
        *,
        hooks: tuple[CommitHook, ...] = (),
        whole: bool = False,
        undoable: bool = False,
    ) -> None:
        """``run_row``: the run's ``id``, ``status`` and ``last_seq`` as the transaction began; ``whole``:
        its whole record too (else that is read when first asked for). ``hooks``: the components'
        ``on_commit`` hooks, called in ``finish`` when the transaction set a terminal status or opened an
        interaction. ``undoable``: ``undo`` may be called after a rollback (each event stamped in place
        keeps what it had before)."""
        self._db = db
        self._run_row = run_row
        self._whole = whole
        self._run: RunRecord | None = None
        self._run_id: str = run_row["id"]
        self._seq: int = run_row["last_seq"]
        self._clock = clock
        # The events as stored: the very objects appended, given their run_id, seq and at (an event is built
        # once and never copied), with their rows, inserted together when the block ends.
        self._events: list[Event] = []
        self._rows: list[tuple[str, int, str, str, float]] = []
        self._snapshot: tuple[int, str] | None = None
        self._status: RunStatus | None = None
        self._outcome: str | None = None
        self._outcome_value: dict[str, JsonValue] | None = None
        self._opened: list[Interaction] = []
        self._hooks = hooks
        self._dirty = False
        self._open = True
        self._written_at: float | None = None
        # each event stamped in place, with the stamp's fields as they were and the fields it had set
        self._undo: list[tuple[Event, dict[str, object], set[str]]] | None = [] if undoable else None

    @property
    def run_id(self) -> str:
        """The run this transaction writes to."""
        return self._run_id

    @property
    def run(self) -> RunRecord:
        """The run as it was when the transaction began: read on first use (a commit itself needs only the
        run's status, position and lease, not its input), before this transaction writes to its row."""
        if self._run is None:
            row = self._run_row if self._whole else self._record_row()
            self._run = rows.run_record(row)
        return self._run

    def _record_row(self) -> rows.Row:
        self._check_open()
        row = self._db.one(RUN_RECORD, (self._run_id,))
        if row is None:  # the store holds the run's lock: nobody deleted it meanwhile
            raise NotFoundError(f"no run {self._run_id!r} in the store")
        return row

    @property
    def status(self) -> RunStatus:
        """The run's status when the transaction began, read from the row as it is."""
        status: RunStatus = self._run_row["status"]
        return status

    @property
    def events(self) -> Sequence[Event]:
        """The events appended so far, as stored."""
        return tuple(self._events)

    def append(self, event: Event) -> Event:
        """Add an event to the run's log; returns it as stored, with the next ``seq``: the event itself, made
        stored (a copy when it was one of this run's stored events already)."""
        return self._add(event, "append")

    def extend(self, events: Iterable[Event]) -> None:
        """Add each of ``events`` to the run's log, in order, as ``append`` does."""
        for event in events:
            self._add(event, "extend")

    def _add(self, event: Event, what: str) -> Event:
        self._check_open()
        if not isinstance(event, BaseEvent):
            raise ConfigError(f"{what}: expected an event (plangate.events); found {type(event).__name__}")
        owner = event.run_id
        if owner and owner != self._run_id:
            raise ConfigError(
                f"{what}: the {event.type} event belongs to run {owner!r}, not to run {self._run_id!r}"
            )
        try:
            payload = payload_json(event)
        except PydanticSerializationError as exc:
            raise ConfigError(f"{what}: the {event.type} event cannot be encoded as JSON; {exc}") from None
        seq, at = self._seq + 1, self._clock()
        # inserted with the others when the block ends (one statement for them all): nothing reads the
        # log inside a transaction, and the store holds the run's lock until it commits
        self._rows.append((self._run_id, seq, event.type, payload, at))
        self._seq = seq
        envelope = {"run_id": self._run_id, "seq": seq, "at": at}
        # An event its maker hands over is stamped in place; one this run stored already, appended again,
        # is copied, so that the one stored before keeps its seq.
        if not owner and self._undo is not None:
            before = {name: event.__dict__.get(name) for name in envelope}
            self._undo.append((event, before, set(event.__pydantic_fields_set__)))
        stored = restamped(event, envelope) if owner else stamped(event, envelope)
        self._events.append(stored)
        self._dirty = True
        return stored

    def set_snapshot(self, state: Mapping[str, object] | EncodedObject, *, version: int = 1) -> None:
        """Replace the run's snapshot with ``state`` in format ``version`` (written when the block ends);
        an ``EncodedObject`` is written as it was encoded."""
        self._check_open()
        version = check.integer(version, "set_snapshot: version", minimum=1)
        if isinstance(state, EncodedObject):
            self._snapshot = (version, state.text)
        else:
            self._snapshot = (version, check.json_object(state, "set_snapshot: state"))
        self._dirty = True

    def set_status(self, status: RunStatus, *, outcome: Mapping[str, object] | None = None) -> None:
        """Set the run's status; ``outcome`` is kept with it when given (else the stored one stays)."""
        self._check_open()
        check.choice(status, check.RUN_STATUSES, "set_status: status")
        if outcome is not None:
            self._outcome = check.json_object(outcome, "set_status: outcome")
            if self._hooks:
                self._outcome_value = json.loads(self._outcome)
        self._status = status
        self._dirty = True

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
        """Record evidence bound to plan step ``step_index``; ``output`` is what its call returned."""
        self._check_open()
        check.integer(step_index, "add_receipt: step_index", minimum=0)
        check.choice(source, check.RECEIPT_SOURCES, "add_receipt: source")
        check.text(name, "add_receipt: name", empty=False)
        check.text(arguments_digest, "add_receipt: arguments_digest")
        check.text(summary, "add_receipt: summary")
        if not isinstance(success, bool):
            raise ConfigError(f"add_receipt: success: expected True or False; found {success!r}")
        output_json = None if output is None else check.json_value(output, "add_receipt: output")
        # every value was checked above (the output encodes as JSON): nothing to validate again
        values = {
            "run_id": self._run_id,
            "step_index": step_index,
            "source": source,
            "name": name,
            "arguments_digest": arguments_digest,
            "success": success,
            "summary": summary,
            "at": self._clock(),
            "output": output,
        }
        receipt = built(Receipt, values)
        self._db.run(
            f"INSERT INTO receipts ({rows.RECEIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._run_id,
                step_index,
                source,
                name,
                arguments_digest,
                success,
                summary,
                receipt.at,
                output_json,
            ),
        )
        self._dirty = True
        return receipt

    def open_interaction(
        self,
        kind: InteractionKind,
        prompt: str,
        *,
        tool: InteractionTool | None = None,
        step_id: str | None = None,
    ) -> Interaction:
        """Open the run's interaction with a new random id; a run has at most one open at a time.

        Raises:
            InteractionError: the run already has an open interaction.
        """
        self._check_open()
        check.choice(kind, check.INTERACTION_KINDS, "open_interaction: kind")
        check.text(prompt, "open_interaction: prompt")
        if tool is not None and not isinstance(tool, InteractionTool):
            raise ConfigError(
                f"open_interaction: tool: expected an InteractionTool or None; found {type(tool).__name__}"
            )
        if step_id is not None:
            check.text(step_id, "open_interaction: step_id")
        row = self._db.one(
            "SELECT id, kind FROM interactions WHERE run_id = ? AND status = 'open'", (self._run_id,)
        )
        if row is not None:
            raise InteractionError(
                f"run {self._run_id!r} already has an open interaction ({row['kind']} {row['id']!r}); "
                f"expected none open before opening a {kind}: resolve or expire it first"
            )
        interaction = Interaction(
            id=check.new_interaction_id(),
            run_id=self._run_id,
            kind=kind,
            status="open",
            prompt=prompt,
            tool=tool,
            step_id=step_id,
            created_at=self._clock(),
            resolved_at=None,
            resolved_by=None,
            resolution=None,
        )
        arguments = None if tool is None else check.json_object(tool.arguments, "open_interaction: tool")
        self._db.run(
            f"INSERT INTO interactions ({rows.INTERACTION_COLUMNS}) "
            "VALUES (?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, NULL, NULL, NULL)",
            (
                interaction.id,
                self._run_id,
                kind,
                prompt,
                None if tool is None else tool.name,
                arguments,
                None if tool is None else tool.arguments_digest,
                step_id,
                interaction.created_at,
            ),
        )
        self._opened.append(interaction)
        self._dirty = True
        return interaction

    def resolve_interaction(
        self, interaction_id: str, resolution: Mapping[str, object], resolved_by: str | None = None
    ) -> Interaction:
        """Resolve this run's open interaction, compare-and-set.

        Raises:
            StaleInteraction: the interaction is not open, or belongs to another run; nothing changed.
            NotFoundError: there is no interaction with that id.
        """
        self._check_open()
        resolution_json = check.json_object(resolution, "resolve_interaction: resolution")
        if resolved_by is not None:
            check.text(resolved_by, "resolve_interaction: resolved_by")
        return self._close_interaction(interaction_id, "resolved", resolution_json, resolved_by)

    def expire_interaction(self, interaction_id: str) -> Interaction:
        """Mark this run's open interaction expired, compare-and-set.

        Raises:
            StaleInteraction: the interaction is not open, or belongs to another run; nothing changed.
            NotFoundError: there is no interaction with that id.
        """
        self._check_open()
        return self._close_interaction(interaction_id, "expired", None, None)

    def record_write_intent(self, key: str, tool: str, arguments_digest: str) -> WriteIntent:
        """Promise that the write keyed ``key`` is about to run; commit this before running it.

        Raises:
            WriteIntentConflict: an intent with that key exists already; the write may have run.
        """
        self._check_open()
        check.text(key, "record_write_intent: key", empty=False)
        check.text(tool, "record_write_intent: tool", empty=False)
        check.text(arguments_digest, "record_write_intent: arguments_digest")
        intent = WriteIntent(
            key=key,
            run_id=self._run_id,
            tool=tool,
            arguments_digest=arguments_digest,
            status="intent",
            result=None,
            created_at=self._clock(),
            completed_at=None,
        )
        # The insert is the check: of two runs recording one key at once (another process), one inserts.
        inserted = self._db.run(
            f"INSERT INTO write_intents ({rows.WRITE_INTENT_COLUMNS}) "
            "VALUES (?, ?, ?, ?, 'intent', NULL, ?, NULL) ON CONFLICT (key) DO NOTHING",
            (key, self._run_id, tool, arguments_digest, intent.created_at),
        )
        if inserted != 1:
            existing = self._write_intent(key)
            if existing is None:
                raise StoreError(
                    f"record_write_intent: the write intent {key!r} vanished while it was written"
                )
            raise WriteIntentConflict(
                f"a write intent with key {key!r} exists already (run {existing.run_id!r}, tool "
                f"{existing.tool!r}, status {existing.status}); the write may have run: reconcile it "
                "instead of running it again",
                intent=existing,
            )
        self._dirty = True
        return intent

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
        """Mark the write keyed ``key`` done and record its ``write_receipt`` (with ``output``), which is
        returned.

        Raises:
            NotFoundError: this run has no write intent with that key.
            WriteIntentConflict: the intent is done already.
        """
        self._check_open()
        result_json = None if result is None else check.json_object(result, "complete_write_intent: result")
        intent = self._write_intent(key)
        if intent is None or intent.run_id != self._run_id:
            raise NotFoundError(f"complete_write_intent: run {self._run_id!r} has no write intent {key!r}")
        if intent.status != "intent":
            raise WriteIntentConflict(
                f"complete_write_intent: the write intent {key!r} is {intent.status} already; "
                "expected one still waiting for its receipt",
                intent=intent,
            )
        self._db.run(
            "UPDATE write_intents SET status = 'done', result = ?, completed_at = ? "
            "WHERE key = ? AND status = 'intent'",
            (result_json, self._clock(), key),
        )
        return self.add_receipt(
            step_index=step_index,
            source="write_receipt",
            name=intent.tool,
            arguments_digest=intent.arguments_digest,
            success=success,
            summary=summary,
            output=output,
        )

    def connection(self, *, touch: bool = False) -> Db:
        """This transaction's connection, for a repository to write with the run's other changes
        (``store/repository.py``); ``touch``: the write concerns the run, whose ``updated_at`` then moves."""
        self._check_open()
        if touch:
            self._dirty = True
        return self._db

    # -- used by the store's transaction() ----------------------------------------------------------------

    def finish(self) -> None:
        """Write the events, the snapshot and the run row; the store commits right after (PostgreSQL sends
        them with the ``COMMIT``: nothing here waits for an answer)."""
        self._check_open()
        if not self._dirty:
            return
        db = self._db
        # only a run's end and a person asked are acted on: the commits between pay one comparison
        told = bool(self._hooks) and bool(self._opened or self._status in TERMINAL_STATUSES)
        run = self.run if told else None  # as the transaction began: read before its row is written
        if self._rows:
            db.defer_many(_INSERT_EVENT, self._rows)
            self._rows = []
        now = self._written_at = self._clock()
        if self._snapshot is not None:
            version, state = self._snapshot
            db.defer(_UPSERT_SNAPSHOT, (self._run_id, version, self._seq, state, now))
        assignments = "last_seq = ?, updated_at = ?"
        values: list[object] = [self._seq, now]
        if self._status is not None:
            assignments += ", status = ?"
            values.append(self._status)
        if self._outcome is not None:
            assignments += ", outcome = ?"
            values.append(self._outcome)
        values.append(self._run_id)
        db.defer(f"UPDATE runs SET {assignments} WHERE id = ?", values)
        if run is not None:
            change = RunChange(run, self._status, self._outcome_value, tuple(self._opened), now)
            for hook in self._hooks:
                hook(db, change)

    def close(self) -> None:
        """End the transaction object's life; later calls fail."""
        self._open = False

    def after(self) -> tuple[RunStatus, int, float | None]:
        """The run's ``status``, ``last_seq`` and ``updated_at`` as this transaction left them, once it
        committed (``updated_at``: None when this transaction did not write the run's row and began
        without its whole record)."""
        status: RunStatus = self._status or self._run_row["status"]
        if self._written_at is not None:
            return status, self._seq, self._written_at
        return status, self._seq, self._run_row["updated_at"] if self._whole else None

    def undo(self) -> None:
        """After a rollback: give each event stamped in place what it had before (``undoable``), so that the
        same events can be appended to another transaction."""
        for event, before, fields in reversed(self._undo or ()):
            event.__dict__.update(before)
            event.__pydantic_fields_set__.clear()
            event.__pydantic_fields_set__.update(fields)
        self._undo = [] if self._undo is not None else None

    def commit_notice(self) -> Commit | None:
        """What subscribers hear about this transaction, or None when it changed no event or status."""
        events = self.events
        if not events and self._status is None:
            return None
        return Commit(run_id=self._run_id, events=tuple(events), status=self._status)

    # -- internals ----------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._open:
            raise StoreError(
                f"the transaction on run {self._run_id!r} has ended; open a new one with store.transaction()"
            )

    def _write_intent(self, key: str) -> WriteIntent | None:
        row = self._db.one(f"SELECT {rows.WRITE_INTENT_COLUMNS} FROM write_intents WHERE key = ?", (key,))
        return None if row is None else rows.write_intent(row)

    def _close_interaction(
        self, interaction_id: str, status: str, resolution: str | None, resolved_by: str | None
    ) -> Interaction:
        check.text(interaction_id, "interaction_id", empty=False)
        row = self._db.one("SELECT run_id, status FROM interactions WHERE id = ?", (interaction_id,))
        if row is None:
            raise NotFoundError(f"no interaction {interaction_id!r} in the store")
        if row["run_id"] != self._run_id:
            raise StaleInteraction(
                f"interaction {interaction_id!r} belongs to run {row['run_id']!r}, not to run "
                f"{self._run_id!r}; nothing changed"
            )
        # Compare-and-set: only an open interaction changes, whoever else tries at the same moment.
        changed = self._db.run(
            "UPDATE interactions SET status = ?, resolved_at = ?, resolved_by = ?, resolution = ? "
            "WHERE id = ? AND status = 'open'",
            (status, self._clock(), resolved_by, resolution, interaction_id),
        )
        current = self._db.one(
            f"SELECT {rows.INTERACTION_COLUMNS} FROM interactions WHERE id = ?", (interaction_id,)
        )
        if current is None:
            raise NotFoundError(f"no interaction {interaction_id!r} in the store")
        if changed != 1:
            raise StaleInteraction(
                f"interaction {interaction_id!r} of run {self._run_id!r} is {current['status']} already; "
                "expected an open one, nothing changed"
            )
        self._dirty = True
        return rows.interaction(current)
