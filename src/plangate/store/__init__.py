"""The durable store of runs (event logs, snapshots, interactions, receipts, write intents, leases), and the
database that the repositories of what outlives a run share with it (documents, here; bearer tokens and
copilot conversations, in their packages: ``plangate.store.repository``).

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

from plangate.store._schema import SCHEMA_VERSION
from plangate.store.base import (
    Commit,
    Interaction,
    Lease,
    LeaseLost,
    Receipt,
    Record,
    RunPage,
    RunRecord,
    Snapshot,
    Store,
    Subscriber,
    Transaction,
    WriteIntent,
    WriteIntentConflict,
)
from plangate.store.documents import Document, DocumentConflict, Documents
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
    WriteIntentStatus,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STORE_PATH",
    "MEMORY",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "TERMINAL_STATUSES",
    "Commit",
    "Document",
    "DocumentConflict",
    "Documents",
    "EncodedObject",
    "Interaction",
    "InteractionStatus",
    "Lease",
    "LeaseBook",
    "LeaseLost",
    "Receipt",
    "ReceiptSource",
    "Record",
    "RunKind",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "SQLiteStore",
    "Snapshot",
    "Store",
    "Subscriber",
    "Transaction",
    "WriteIntent",
    "WriteIntentConflict",
    "WriteIntentStatus",
    "open_store",
]
