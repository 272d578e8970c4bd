"""What repositories build on (``store/repository.py``), on every backend: a component's own migrations,
applied once and refused when newer, the store's database and a transaction's connection lent to it, and a
component's hook on runs' transactions (what it writes commits with the run's change, or not at all)."""

from __future__ import annotations

import pytest
from store_backends import Backend

from plangate.errors import ConfigError, SchemaVersionError, StoreError
from plangate.events import SpeakEvent
from plangate.store import Store
from plangate.store._migrate import _REGISTERED
from plangate.store.base import RunChange
from plangate.store.ddl import JSON, POSITION, TEXT, AddColumn, Column, Create, FromCore, Index, Table
from plangate.store.repository import Component, Db, connection_of, database_of, register

NOTES = Table(
    "notes",
    (Column("pos", POSITION), Column("id", TEXT, unique=True), Column("body", JSON)),
    indexes=(Index("notes_by_id", ("id", "pos")),),
)
# Never registered: a registered component would be migrated by every store the other tests open.
NOTES_V1 = Component("notes", ((Create(NOTES),),))
NOTES_V2 = Component(
    "notes", (*NOTES_V1.migrations, (AddColumn("notes", Column("tag", TEXT, nullable=True)),))
)


def _version(store: Store, name: str) -> int | None:
    with database_of(store, NOTES_V1).reading("a test") as db:
        row = db.one("SELECT version FROM schema_versions WHERE component = ?", (name,))
    return None if row is None else int(row["version"])


def test_a_component_is_created_then_upgraded_in_place(shared_backend: Backend) -> None:
    first = shared_backend.open()
    try:
        database = database_of(first, NOTES_V1)
        with database.writing("a note") as db:
            db.run("INSERT INTO notes (id, body) VALUES (?, ?)", ("n1", '{"a":1}'))
        assert _version(first, "notes") == 1
    finally:
        first.close()
    again = shared_backend.open()
    try:
        database = database_of(again, NOTES_V2)  # a later release of the component adds a column
        with database.reading("the note") as db:
            row = db.one("SELECT id, body, tag FROM notes")
        assert row is not None and (row["id"], row["body"], row["tag"]) == ("n1", '{"a":1}', None)
        assert _version(again, "notes") == 2
        database_of(again, NOTES_V2)  # once per store object: nothing runs again
    finally:
        again.close()


def test_a_component_written_by_a_newer_plangate_is_refused(shared_backend: Backend) -> None:
    newer = shared_backend.open()
    try:
        database_of(newer, NOTES_V2)
    finally:
        newer.close()
    older = shared_backend.open()
    try:
        with pytest.raises(
            SchemaVersionError, match="has version 2 of its notes tables, written by a newer plangate"
        ):
            database_of(older, NOTES_V1)
    finally:
        older.close()


def test_a_component_from_the_core_finds_its_tables_or_says_they_are_gone(store: Store) -> None:
    database_of(store, Component("from-core", ((FromCore(2, ("documents",)),),)))
    assert _version(store, "from-core") == 1
    with pytest.raises(StoreError, match=r"lacks the table\(s\) missing that its core schema holds"):
        database_of(store, Component("gone", ((FromCore(2, ("missing",)),),)))
    assert _version(store, "gone") is None


def test_a_transaction_lends_its_connection_and_commits_the_repositorys_writes_with_its_own(
    store: Store,
) -> None:
    database = database_of(store, NOTES_V1)
    run_id = store.create_run("agent", "a", {}).id
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction(run_id) as tx:
            connection_of(tx, "a note").run("INSERT INTO notes (id, body) VALUES (?, ?)", ("n1", "{}"))
            tx.append(SpeakEvent(text="with the note"))
            raise RuntimeError("boom")
    with database.reading("the notes") as db:
        assert db.all("SELECT id FROM notes") == []
    assert store.events(run_id) == []


def test_repositories_need_a_store_opened_by_plangate() -> None:
    with pytest.raises(ConfigError, match="the notes repository: expected a store opened by plangate"):
        database_of(object(), NOTES_V1)
    with pytest.raises(ConfigError, match="a note: expected a transaction of a store opened by plangate"):
        connection_of(object(), "a note")


def test_a_component_name_is_registered_once() -> None:
    for name in ("core", "documents"):
        with pytest.raises(ConfigError, match=f"a component named {name!r} exists already"):
            register(Component(name, ()))


HOOKED = Table("hooked", (Column("pos", POSITION), Column("note", TEXT)))


def test_a_components_hook_writes_in_the_runs_own_transaction(
    shared_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = shared_backend.open()  # opened before the component exists: no hook until it is migrated
    heard: list[tuple[str | None, list[str], bool, str]] = []

    def hook(db: Db, change: RunChange) -> None:
        if change.status == "aborted":
            raise RuntimeError("the hook failed")
        # the run as the transaction began, though the transaction has just written its row
        heard.append((change.status, [i.kind for i in change.opened], change.ended, change.run.status))
        db.run("INSERT INTO hooked (note) VALUES (?)", (f"{change.run.id} {change.status}",))

    component = Component("hooked", ((Create(HOOKED),),), on_commit=hook)
    monkeypatch.setitem(_REGISTERED, component.name, component)
    store = shared_backend.open()
    try:
        run_id = store.create_run("agent", "a", {}).id
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="no end, no interaction: no hook"))
            tx.set_status("running")
        with store.transaction(run_id) as tx:
            tx.open_interaction("ask_user", "which day?")
            tx.set_status("waiting")
        with pytest.raises(RuntimeError, match="boom"), store.transaction(run_id) as tx:
            tx.set_status("failed")
            raise RuntimeError("boom")  # rolled back: neither the run's change nor the hook's row
        with pytest.raises(RuntimeError, match="the hook failed"), store.transaction(run_id) as tx:
            tx.set_status("aborted")  # the hook fails: the run's change goes with it
        with store.transaction(run_id) as tx:
            tx.set_status("completed", outcome={"status": "completed"})
        assert heard == [("waiting", ["ask_user"], False, "running"), ("completed", [], True, "waiting")]
        assert store.get_run(run_id).status == "completed"
        with database_of(store, component).reading("the notes") as db:
            assert [row["note"] for row in db.all("SELECT note FROM hooked ORDER BY pos")] == [
                f"{run_id} waiting",
                f"{run_id} completed",
            ]
        first, other = (before.create_run("agent", name, {}).id for name in "bc")
        with before.transaction(first) as tx:
            tx.set_status("cancelled")
        assert len(heard) == 2  # the store opened before the component never migrated it
        database_of(before, component)
        with before.transaction(other) as tx:
            tx.set_status("cancelled")
        assert heard[-1] == ("cancelled", [], True, "queued")
    finally:
        store.close()
        before.close()
