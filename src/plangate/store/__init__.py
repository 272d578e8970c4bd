"""The durable store of runs (event logs, snapshots, interactions, receipts, write intents, leases), of
small versioned documents that outlive a run, and of copilot conversations and their turns.

For: everything that must survive a restart, behind the ``Store`` protocol (SQLite by default, PostgreSQL
for many processes and machines: ``open_store("postgresql://…")``).
Not for: deciding what a run does next (the engines) or how events are encoded (``plangate.events``).

A run's life, in short::

    from plangate.events import StatusEvent
    from plangate.store import open_store

    store = open_store(":memory:")  # open_store() alone: $PLANGATE_STORE, else .plangate/plangate.db
    run = store.create_run("agent", "plan my week", {"prompt": "Free up Monday"})
    with store.transaction(run.id) as tx:  # one commit: events, snapshot, status
        tx.append(StatusEvent(stage="route", code="started"))
        tx.set_snapshot({"phase": "route"}, version=1)
        tx.set_status("running")
    assert [event.seq for event in store.events(run.id)] == [1]
    assert store.get_run(run.id).status == "running"
"""

from __future__ import annotations

from plangate.store._sqlite_schema import SCHEMA_VERSION
from plangate.store.base import (
    AttemptRecord,
    Commit,
    Conversation,
    ConversationPage,
    Document,
    DocumentConflict,
    Interaction,
    Lease,
    LeaseLost,
    Receipt,
    RunPage,
    RunRecord,
    Snapshot,
    Store,
    Subscriber,
    Token,
    Transaction,
    TurnRecord,
    WriteIntent,
    WriteIntentConflict,
)
from plangate.store.encoded import EncodedObject
from plangate.store.run_lease import DEFAULT_LEASE_TTL, LeaseBook
from plangate.store.sqlite import MEMORY, SQLiteStore
from plangate.store.url import DEFAULT_STORE_PATH, STORE_ENV, open_store
from plangate.vocab import (
    TERMINAL_STATUSES,
    InteractionStatus,
    ReceiptSource,
    RunKind,
    RunStatus,
    TurnStatus,
    WriteIntentStatus,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STORE_PATH",
    "MEMORY",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "TERMINAL_STATUSES",
    "AttemptRecord",
    "Commit",
    "Conversation",
    "ConversationPage",
    "Document",
    "DocumentConflict",
    "EncodedObject",
    "Interaction",
    "InteractionStatus",
    "Lease",
    "LeaseBook",
    "LeaseLost",
    "Receipt",
    "ReceiptSource",
    "RunKind",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "SQLiteStore",
    "Snapshot",
    "Store",
    "Subscriber",
    "Token",
    "Transaction",
    "TurnRecord",
    "TurnStatus",
    "WriteIntent",
    "WriteIntentConflict",
    "WriteIntentStatus",
    "open_store",
]
