"""Makes the fixtures of a store written by a released plangate, which ``test_store_upgrade.py`` opens.

Run once, with the release's ``src`` first on ``PYTHONPATH`` (never this checkout's)::

    PYTHONPATH=/path/to/release/src python tests/store/make_release_store.py tests/store/fixtures URL

It writes, through that release's own API, a bit of everything a store holds (runs with a parent, events,
a snapshot, interactions, receipts, write intents, a lease, documents, tokens, a conversation and its turn)
and saves: ``sqlite_store_v6.sql`` (the whole SQLite file, as ``iterdump`` prints it),
``postgres_store_v6.sql`` (the rows of the PostgreSQL store, in insert order; its schema is migrations 1..6)
and ``store_v6_records.json`` (every record as that release read it back). Frozen: never made again for a
release that shipped.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from plangate.events import InteractionTool, OutcomeEvent, SpeakEvent, StatusEvent
from plangate.store import AttemptRecord, Store, TurnRecord, open_store

_TABLES = (
    ("runs", "pos"),
    ("events", "run_id, seq"),
    ("snapshots", "run_id"),
    ("interactions", "pos"),
    ("receipts", "pos"),
    ("write_intents", "key"),
    ("documents", "namespace, key"),
    ("tokens", "pos"),
    ("conversations", "pos"),
    ("turns", "pos"),
    ("attempts", "turn_id, n"),
)
_IDENTITY = ("runs", "interactions", "receipts", "tokens", "conversations", "turns")
DOCUMENTS = (("schedule", "default"), ("sources", "ana"))
INTENTS = ("write-1", "write-2")


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def _same_ids() -> None:
    """Make the store's random ids a sequence, so that both backends' stores hold the same records."""
    counter = iter(range(1, 1_000_000))
    secrets.token_urlsafe = lambda nbytes=None: f"id{next(counter):04d}"  # type: ignore[assignment]


def fill(store: Any) -> None:
    """Write a bit of everything, through the release's API."""
    parent = store.create_run("formula", "release", {"version": "1.2", "é": [1, 2.5, None]}, owner="ana")
    child = store.create_run("agent", "notes", {"prompt": "write"}, owner="ana", parent_run_id=parent.id)
    store.create_run("formula", "other", {}, owner="bo")
    with store.transaction(parent.id) as tx:
        tx.append(StatusEvent(stage="run", code="started", text="Cut a release"))
        tx.append(SpeakEvent(text='héllo "world" 🙂'))
        tx.set_snapshot({"steps": {"build": "done"}, "order": ["z", "a"]}, version=2)
        tx.add_receipt(
            step_index=0,
            source="tool_observation",
            name="read",
            arguments_digest="sha256:r",
            success=True,
            summary="read it",
            output={"rows": [[1, "a"]]},
        )
        tx.record_write_intent("write-1", "publish", "sha256:p")
        tx.open_interaction(
            "approval",
            "Publish 1.2?",
            tool=InteractionTool(name="publish", arguments={"version": "1.2"}, arguments_digest="sha256:p"),
            step_id="publish",
        )
        tx.set_status("waiting")
    with store.transaction(child.id) as tx:
        tx.record_write_intent("write-2", "notes", "sha256:n")
        tx.complete_write_intent(
            "write-2", step_index=1, success=True, summary="written", result={"ok": True}, output="v1.2 notes"
        )
        opened = tx.open_interaction("ask_user", "Which tone?")
        tx.resolve_interaction(opened.id, {"kind": "answer", "text": "plain"}, resolved_by="ana")
        tx.set_status("completed", outcome={"status": "completed", "stage": "done", "code": "ok"})
    store.take_lease(parent.id, "host:1:boot:token", ttl=30)
    store.put_document("schedule", "default", {"tasks": [{"id": "t1"}]}, expected_version=None)
    store.put_document("schedule", "default", {"tasks": []}, expected_version=1)
    store.put_document("sources", "ana", {"sources": [{"name": "shop"}]}, expected_version=None)
    store.create_token("ana", hashlib.sha256(b"pg_one").hexdigest(), "laptop")
    revoked = store.create_token("bo", hashlib.sha256(b"pg_two").hexdigest())
    store.revoke_token(revoked.id)
    _ask(store)


def _ask(store: Any) -> None:
    conversation = store.create_conversation(owner="ana", title="Revenue")
    ask = store.create_run("ask", "How much?", {"question": "How much?"}, owner="ana")
    attempt = {
        "status": "done",
        "reason": "answered",
        "review": {"severity": "ok", "verdict": "accept", "signals": []},
        "formula": {"formula": "revenue", "steps": []},
        "run_id": None,
        "answer": "42.",
        "result": {"columns": ["n"], "rows": [[42]]},
        "issues": [],
        "started_at": 1.0,
        "finished_at": 2.0,
    }
    attempts = [
        AttemptRecord.model_validate({**attempt, "n": 1, "status": "unusable"}),
        AttemptRecord.model_validate({**attempt, "n": 2}),
    ]
    turn = TurnRecord(
        id="turn_1",
        conversation_id=conversation.id,
        run_id=ask.id,
        owner="ana",
        question="How much?",
        status="done",
        reason="answered",
        answer="42.",
        result={"columns": ["n"], "rows": [[42]]},
        formula={"formula": "revenue", "steps": []},
        source="shop",
        model="scripted",
        created_at=1.0,
        finished_at=3.0,
        attempts=attempts,
    )
    with store.transaction(ask.id) as tx:
        tx.append(OutcomeEvent(status="completed", stage="review", code="done", user_message="42."))
        tx.record_turn(turn)
        tx.set_status("completed", outcome={"status": "completed", "stage": "review", "code": "done"})


def records(store: Any) -> dict[str, Any]:
    """Everything ``fill`` wrote, as the release reads it (JSON)."""
    runs = store.list_runs(limit=100).items
    found: dict[str, Any] = {"runs": {}}
    for run in runs:
        snapshot = store.get_snapshot(run.id)
        found["runs"][run.id] = {
            "run": run.model_dump(mode="json"),
            "root": run.parent_run_id or run.id,
            "events": [event.model_dump(mode="json") for event in store.events(run.id)],
            "snapshot": None if snapshot is None else snapshot.model_dump(mode="json"),
            "interactions": [i.model_dump(mode="json") for i in store.list_interactions(run_id=run.id)],
            "receipts": [r.model_dump(mode="json") for r in store.receipts(run.id)],
            "pending": [w.model_dump(mode="json") for w in store.pending_write_intents(run.id)],
            "lease": _dump(store.get_lease(run.id)),
        }
    found["intents"] = {key: _dump(store.get_write_intent(key)) for key in INTENTS}
    found["documents"] = [_dump(store.get_document(ns, key)) for ns, key in DOCUMENTS]
    found["tokens"] = [token.model_dump(mode="json") for token in store.list_tokens()]
    conversations = store.list_conversations().items
    found["conversations"] = [c.model_dump(mode="json") for c in conversations]
    found["turns"] = [t.model_dump(mode="json") for c in conversations for t in store.list_turns(c.id)]
    return found


def _dump(record: Any) -> Any:
    return None if record is None else record.model_dump(mode="json")


def postgres_rows(conn: psycopg.Connection[Any]) -> str:
    """The store's rows as statements that insert them again, in an order its keys allow."""
    lines = []
    for table, order in _TABLES:
        for (row,) in conn.execute(f"SELECT row_to_json(t)::text FROM {table} t ORDER BY {order}"):
            literal = row.replace("'", "''")
            lines.append(
                f"INSERT INTO {table} OVERRIDING SYSTEM VALUE "
                f"SELECT * FROM json_populate_record(NULL::{table}, '{literal}');"
            )
    for table in _IDENTITY:
        lines.append(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'pos'), (SELECT max(pos) FROM {table}));"
        )
    return "\n".join(lines) + "\n"


def main(folder: Path, admin_url: str) -> None:
    path = folder / "release.db"
    _same_ids()
    store: Store = open_store(f"sqlite:///{path}", clock=Clock())
    fill(store)
    expected = records(store)
    store.close()
    conn = sqlite3.connect(path)
    (folder / "sqlite_store_v6.sql").write_text("\n".join(conn.iterdump()) + "\n")
    conn.close()
    path.unlink()
    schema = f"release_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            url = f"{admin_url}{'&' if '?' in admin_url else '?'}options={quote(f'-csearch_path={schema}')}"
            _same_ids()
            store = open_store(url, clock=Clock())
            fill(store)
            assert records(store) == expected, "the two backends read back differently"
            store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                (folder / "postgres_store_v6.sql").write_text(postgres_rows(conn))
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    (folder / "store_v6_records.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
