"""A store written by the last release (schema version 6) opens in place on both backends with nothing lost.

The fixtures were made once by that release's own code (``make_release_store.py``): the whole SQLite file,
the PostgreSQL store's rows, and every record as that release read it back. Opening the store upgrades its
core schema to the current version, and each repository (documents, tokens, conversations) recognises the
tables the core made for it as its version 1; every record then reads back as the release read it, and the
store goes on writing where the release left off.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from pg_schema import dump
from store_backends import FakeClock

from plangate.copilot._conversations import Conversations
from plangate.events import SpeakEvent
from plangate.server.tokens import Tokens
from plangate.store import SCHEMA_VERSION, Documents, SQLiteStore, Store
from plangate.store._migrate import _REGISTERED
from plangate.store._pg_schema import migrate
from plangate.store.ddl import Create
from plangate.store.postgres import PostgresStore
from services_plugin import PostgresServer

FIXTURES = Path(__file__).parent / "fixtures"
RELEASED = json.loads((FIXTURES / "store_v6_records.json").read_text())
DOCUMENTS = (("schedule", "default"), ("sources", "ana"))
INTENTS = ("write-1", "write-2")
COMPONENTS = [("conversations", 1), ("documents", 1), ("tokens", 1)]


def _others() -> tuple[list[str], list[str]]:
    """The components other modules of this test process registered (beyond the core's three above), and
    the tables they create, children first: dropped before a schema is compared with the frozen one."""
    names = sorted(set(_REGISTERED) - {name for name, _ in COMPONENTS})
    tables = [
        step.table.name
        for name in names
        for migration in _REGISTERED[name].migrations
        for step in migration
        if isinstance(step, Create)
    ]
    return names, tables[::-1]


def _drop_others(conn: Any) -> None:
    names, tables = _others()
    for table in tables:
        conn.execute(f"DROP TABLE {table}")
    for name in names:
        conn.execute(f"DELETE FROM schema_versions WHERE component = '{name}'")


def _frozen(backend: str) -> str:
    return (FIXTURES / f"{backend}_schema_v{SCHEMA_VERSION}.sql").read_text().split("\n\n", 1)[1]


def _dump(record: Any) -> Any:
    return None if record is None else record.model_dump(mode="json")


def _records(store: Store) -> dict[str, Any]:
    """What ``make_release_store.records`` read with the release's API, read with this one's."""
    found: dict[str, Any] = {"runs": {}}
    for run in store.list_runs(limit=100).items:
        found["runs"][run.id] = {
            "run": run.model_dump(mode="json"),
            "root": store.root_of(run.id),
            "events": [event.model_dump(mode="json") for event in store.events(run.id)],
            "snapshot": _dump(store.get_snapshot(run.id)),
            "interactions": [i.model_dump(mode="json") for i in store.list_interactions(run_id=run.id)],
            "receipts": [r.model_dump(mode="json") for r in store.receipts(run.id)],
            "pending": [w.model_dump(mode="json") for w in store.pending_write_intents(run.id)],
            "lease": _dump(store.get_lease(run.id)),
        }
    found["intents"] = {key: _dump(store.get_write_intent(key)) for key in INTENTS}
    found["documents"] = [_dump(Documents(store).get(ns, key)) for ns, key in DOCUMENTS]
    found["tokens"] = [token.model_dump(mode="json") for token in Tokens(store).listed()]
    conversations = Conversations(store)
    items = conversations.list_conversations().items
    found["conversations"] = [c.model_dump(mode="json") for c in items]
    found["turns"] = [t.model_dump(mode="json") for c in items for t in conversations.list_turns(c.id)]
    return found


def _goes_on_writing(store: Store, clock: FakeClock) -> None:
    """The upgraded store writes after what the release wrote: new positions, versions and generations."""
    waiting = next(run for run in store.list_runs(status="waiting").items)
    newest = store.list_runs(limit=1).items[0]
    run = store.create_run("agent", "after the upgrade", {}, parent_run_id=waiting.id)
    assert store.list_runs(limit=1).items[0].id == run.id != newest.id
    assert store.root_of(run.id) == waiting.id
    with store.transaction(waiting.id) as tx:
        assert tx.append(SpeakEvent(text="after")).seq == waiting.last_seq + 1
    clock.advance(3600)
    lease = store.take_lease(waiting.id, "worker-b", ttl=30)
    assert lease is not None and lease.generation == RELEASED["runs"][waiting.id]["lease"]["generation"] + 1
    document = Documents(store).put("schedule", "default", {"tasks": ["t2"]}, expected_version=2)
    assert document.version == 3
    assert Conversations(store).create_conversation(owner="ana").id not in {
        c["id"] for c in RELEASED["conversations"]
    }


def test_a_sqlite_store_of_the_last_release_opens_in_place_with_nothing_lost(tmp_path: Path) -> None:
    path = tmp_path / "release.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "sqlite_store_v6.sql").read_text())
    conn.close()
    clock = FakeClock(start=1_760_000_000.0)
    with SQLiteStore(path, clock=clock) as store:
        assert _records(store) == RELEASED
        _goes_on_writing(store, clock)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _drop_others(conn)
        tables = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name"
        ).fetchall()
        versions = conn.execute("SELECT component, version FROM schema_versions ORDER BY 1").fetchall()
        (core,) = conn.execute("SELECT version FROM schema_version").fetchone()
    finally:
        conn.close()
    schema = "".join(f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in tables).rstrip() + "\n"
    assert (schema, core, versions) == (_frozen("sqlite"), SCHEMA_VERSION, COMPONENTS)


def test_a_postgres_store_of_the_last_release_opens_in_place_with_nothing_lost(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_url()  # a schema without tables
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, "test", upto=6)  # the release's schema (postgres_schema_v6.sql pins it)
        with conn.transaction():
            for statement in (FIXTURES / "postgres_store_v6.sql").read_text().splitlines():
                conn.execute(statement)
    clock = FakeClock(start=1_760_000_000.0)
    with PostgresStore(url, clock=clock) as store:
        assert _records(store) == RELEASED
        _goes_on_writing(store, clock)
    with psycopg.connect(url, autocommit=True) as conn:
        _drop_others(conn)
        assert dump(conn) == _frozen("postgres")
        versions = conn.execute("SELECT component, version FROM schema_versions ORDER BY 1").fetchall()
        assert versions == COMPONENTS
