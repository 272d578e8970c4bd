"""Versioned documents (``store/documents.py``) on every backend: compare-and-set writes, transactions,
reopening, racing writers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from store_backends import Backend, FakeClock

from plangate.errors import ConfigError, StoreError
from plangate.events import SpeakEvent
from plangate.store import Document, DocumentConflict, Documents, Store

NS = "schedule"


def test_a_missing_document_reads_as_none(store: Store) -> None:
    assert Documents(store).get(NS, "default") is None


def test_create_then_update_bumps_the_version_and_replaces_the_value(store: Store, clock: FakeClock) -> None:
    created = Documents(store).put(NS, "default", {"tasks": ["t1"], "n": 1}, expected_version=None)
    assert created == Document(
        namespace=NS, key="default", value={"tasks": ["t1"], "n": 1}, version=1, updated_at=clock.now
    )
    assert Documents(store).get(NS, "default") == created
    clock.advance(3)
    updated = Documents(store).put(NS, "default", {"tasks": []}, expected_version=1)
    assert (updated.version, updated.value, updated.updated_at) == (2, {"tasks": []}, clock.now)
    assert Documents(store).get(NS, "default") == updated


def test_a_stale_version_is_refused_and_nothing_changes(store: Store) -> None:
    Documents(store).put(NS, "default", {"v": 1}, expected_version=None)
    current = Documents(store).put(NS, "default", {"v": 2}, expected_version=1)
    with pytest.raises(
        DocumentConflict,
        match=r"document 'default' in namespace 'schedule' changed since it was read: expected version 1, "
        r"found version 2; nothing was written",
    ) as caught:
        Documents(store).put(NS, "default", {"v": "lost"}, expected_version=1)
    assert isinstance(caught.value, StoreError)
    assert (caught.value.namespace, caught.value.key, caught.value.expected_version) == (NS, "default", 1)
    assert caught.value.current == current
    assert Documents(store).get(NS, "default") == current


def test_creating_an_existing_document_or_updating_a_missing_one_conflicts(store: Store) -> None:
    first = Documents(store).put(NS, "a", {"v": 1}, expected_version=None)
    with pytest.raises(DocumentConflict, match="expected no document yet, found version 1") as caught:
        Documents(store).put(NS, "a", {"v": 2}, expected_version=None)
    assert caught.value.current == first
    with pytest.raises(DocumentConflict, match="expected version 4, found none") as missing:
        Documents(store).put(NS, "b", {"v": 1}, expected_version=4)
    assert missing.value.current is None
    assert Documents(store).get(NS, "b") is None


def test_namespaces_keep_equal_keys_apart(store: Store) -> None:
    Documents(store).put("schedule", "default", {"kind": "week"}, expected_version=None)
    Documents(store).put("settings", "default", {"kind": "prefs"}, expected_version=None)
    Documents(store).put("settings", "default", {"kind": "prefs", "n": 2}, expected_version=1)
    week = Documents(store).get("schedule", "default")
    prefs = Documents(store).get("settings", "default")
    assert week is not None and prefs is not None
    assert (week.value, week.version) == ({"kind": "week"}, 1)
    assert (prefs.value, prefs.version) == ({"kind": "prefs", "n": 2}, 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("", "k", {}), {"expected_version": None}, "namespace: expected a non-empty string; found ''"),
        ((NS, "", {}), {"expected_version": None}, "key: expected a non-empty string; found ''"),
        (
            (NS, "k", ["x"]),
            {"expected_version": None},
            r"value: expected a JSON object \(a dict\); found list",
        ),
        ((NS, "k", {"x": float("inf")}), {"expected_version": None}, "value: expected JSON data"),
        ((NS, "k", {}), {"expected_version": 0}, r"expected_version: expected None \(create .*found 0"),
        ((NS, "k", {}), {"expected_version": True}, "expected_version: .*found True"),
        ((NS, "k", {}), {"expected_version": "1"}, "expected_version: .*found '1'"),
    ],
)
def test_put_document_names_the_bad_argument(
    store: Store, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Documents(store).put(*args, **kwargs)
    assert Documents(store).get(NS, "k") is None


def test_get_document_names_the_bad_argument(store: Store) -> None:
    with pytest.raises(ConfigError, match="get_document: key: expected a non-empty string; found None"):
        Documents(store).get(NS, None)  # type: ignore[arg-type]


def test_a_transaction_writes_a_document_together_with_its_events(store: Store) -> None:
    run_id = store.create_run("agent", "plan", {}).id
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="moved t1"))
        written = Documents(store).put(NS, "default", {"moved": ["t1"]}, expected_version=None, tx=tx)
        assert Documents(store).get(NS, "default", tx=tx) == written
    assert Documents(store).get(NS, "default") == written
    assert [event.seq for event in store.events(run_id)] == [1]


def test_a_conflict_inside_a_transaction_rolls_back_its_events(store: Store) -> None:
    run_id = store.create_run("agent", "plan", {}).id
    Documents(store).put(NS, "default", {"n": 1}, expected_version=None)
    Documents(store).put(NS, "default", {"n": 2}, expected_version=1)
    with pytest.raises(DocumentConflict):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="moved t1"))
            Documents(store).put(NS, "default", {"n": 3}, expected_version=1, tx=tx)
    assert store.events(run_id) == []
    document = Documents(store).get(NS, "default")
    assert document is not None and document.value == {"n": 2}


def test_a_failed_transaction_leaves_no_document_behind(store: Store) -> None:
    run_id = store.create_run("agent", "plan", {}).id
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction(run_id) as tx:
            Documents(store).put(NS, "default", {"n": 1}, expected_version=None, tx=tx)
            raise RuntimeError("boom")
    assert Documents(store).get(NS, "default") is None


def test_the_store_refuses_document_calls_from_inside_its_own_transaction(store: Store) -> None:
    run_id = store.create_run("agent", "plan", {}).id
    documents = Documents(store)
    with store.transaction(run_id) as tx:
        with pytest.raises(StoreError, match="this thread holds an open transaction"):
            documents.put(NS, "default", {}, expected_version=None)
        tx.append(SpeakEvent(text="still usable"))
    assert store.last_seq(run_id) == 1


def test_documents_survive_reopening_and_conflict_across_handles(shared_backend: Backend) -> None:
    first = shared_backend.open()
    second = shared_backend.open()
    try:
        Documents(first).put(NS, "default", {"by": "first"}, expected_version=None)
        seen = Documents(second).get(NS, "default")
        assert seen is not None and seen.version == 1
        Documents(first).put(NS, "default", {"by": "first", "n": 2}, expected_version=1)
        with pytest.raises(DocumentConflict, match="expected version 1, found version 2"):
            Documents(second).put(NS, "default", {"by": "second"}, expected_version=seen.version)
    finally:
        first.close()
        second.close()
    reopened = shared_backend.open()
    try:
        document = Documents(reopened).get(NS, "default")
        assert document is not None and (document.value, document.version) == ({"by": "first", "n": 2}, 2)
    finally:
        reopened.close()


def _increment(store: Store, key: str) -> int:
    """Read-modify-write a counter, retrying on conflict; returns how many conflicts it met."""
    conflicts = 0
    while True:
        current = Documents(store).get(NS, key)
        count = 0 if current is None else int(current.value["count"])  # type: ignore[arg-type]
        try:
            Documents(store).put(
                NS, key, {"count": count + 1}, expected_version=None if current is None else current.version
            )
        except DocumentConflict:
            conflicts += 1
            continue
        return conflicts


def test_racing_writers_that_retry_lose_no_update(shared_backend: Backend) -> None:
    writers, rounds = 4, 15
    stores = [shared_backend.open() for _ in range(writers)]
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        start.wait()
        try:
            for _ in range(rounds):
                _increment(stores[index], "counter")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        document = Documents(stores[0]).get(NS, "counter")
        assert document is not None
        assert document.value == {"count": writers * rounds}
        assert document.version == writers * rounds
    finally:
        for opened in stores:
            opened.close()


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"nested": {"list": [1, [2, [3, {"deep": None}]]], "empty": [], "none": None}},
        {"text": 'héllo 世界 🙂 \u0000 "quoted" \\ back', "": "empty key"},
        {"big": 2**70, "negative": -(2**63), "float": 0.1, "tiny": 5e-324, "huge": 1.7976931348623157e308},
        {"zero": -0.0, "bools": [True, False], "mixed": [1, "1", 1.5, None, {"a": []}]},
    ],
    ids=["empty", "nested", "unicode", "numbers", "mixed"],
)
def test_json_objects_read_back_equal(store: Store, value: dict[str, Any]) -> None:
    written = Documents(store).put("prop", "k", value, expected_version=None)
    assert written.value == value
    assert Documents(store).get("prop", "k") == written
