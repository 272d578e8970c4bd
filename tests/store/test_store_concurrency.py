"""Concurrent writers on every backend: threads of one process, and several processes on one store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_backends import Backend

from plangate.errors import StaleInteraction
from plangate.events import SpeakEvent
from plangate.store import Interaction, SQLiteStore, Store

THREADS = 6
TRANSACTIONS = 25


def _in_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` in ``count`` threads released together; the errors they raised."""
    start = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        start.wait()
        try:
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _assert_gapless_and_atomic(store: Store, run_id: str, writers: int, per_writer: int, size: int) -> None:
    events = store.events(run_id)
    assert [event.seq for event in events] == list(range(1, writers * per_writer * size + 1))
    texts = [event.text for event in events if isinstance(event, SpeakEvent)]
    for start in range(0, len(texts), size):
        batch = texts[start : start + size]
        # A transaction's events are contiguous and in order: nobody else's seq lands in between.
        name, tx_index, _ = batch[0].split(":")
        assert batch == [f"{name}:{tx_index}:{part}" for part in range(size)]
    for writer in range(writers):
        mine = [int(text.split(":")[1]) for text in texts[::size] if text.startswith(f"w{writer}:")]
        assert mine == list(range(per_writer))


def test_threads_appending_to_one_run_get_gapless_seq(store: Store) -> None:
    run_id = store.create_run("formula", "fan-out", {}).id

    def work(writer: int) -> None:
        for tx_index in range(TRANSACTIONS):
            with store.transaction(run_id) as tx:
                for part in range(3):
                    tx.append(SpeakEvent(text=f"w{writer}:{tx_index}:{part}"))

    assert _in_threads(THREADS, work) == []
    _assert_gapless_and_atomic(store, run_id, THREADS, TRANSACTIONS, 3)
    assert store.last_seq(run_id) == THREADS * TRANSACTIONS * 3


def test_threads_on_separate_handles_get_gapless_seq(shared_backend: Backend) -> None:
    handles = [shared_backend.open() for _ in range(3)]
    run_id = handles[0].create_run("formula", "fan-out", {}).id

    def work(writer: int) -> None:
        handle = handles[writer % len(handles)]
        for tx_index in range(TRANSACTIONS):
            with handle.transaction(run_id) as tx:
                tx.append(SpeakEvent(text=f"w{writer}:{tx_index}:0"))
                tx.append(SpeakEvent(text=f"w{writer}:{tx_index}:1"))

    try:
        assert _in_threads(THREADS, work) == []
        _assert_gapless_and_atomic(handles[1], run_id, THREADS, TRANSACTIONS, 2)
    finally:
        for handle in handles:
            handle.close()


def _race_to_resolve(
    handles: list[Store], interaction_id: str
) -> tuple[list[Interaction], list[BaseException]]:
    winners: list[Interaction] = []

    def work(index: int) -> None:
        winners.append(
            handles[index].resolve_interaction(interaction_id, {"kind": "answer", "n": index}, f"p{index}")
        )

    return winners, _in_threads(len(handles), work)


def _open_question(store: Store) -> tuple[str, str]:
    run_id = store.create_run("agent", "ask", {}).id
    with store.transaction(run_id) as tx:
        interaction = tx.open_interaction("ask_user", "Which day?")
    return run_id, interaction.id


def test_two_threads_resolving_one_interaction_exactly_one_wins(store: Store) -> None:
    _, interaction_id = _open_question(store)
    winners, errors = _race_to_resolve([store, store], interaction_id)
    assert len(winners) == 1
    assert len(errors) == 1 and isinstance(errors[0], StaleInteraction)
    assert store.get_interaction(interaction_id) == winners[0]


def test_two_handles_resolving_one_interaction_exactly_one_wins(shared_backend: Backend) -> None:
    handles = [shared_backend.open(), shared_backend.open()]
    try:
        _, interaction_id = _open_question(handles[0])
        winners, errors = _race_to_resolve(handles, interaction_id)
        assert len(winners) == 1
        assert len(errors) == 1 and isinstance(errors[0], StaleInteraction)
        stored = handles[1].get_interaction(interaction_id)
        assert stored == winners[0] and stored.resolved_by is not None
        assert stored.resolution == {"kind": "answer", "n": int(stored.resolved_by[1:])}
    finally:
        for handle in handles:
            handle.close()


@given(plan=st.lists(st.integers(-2, 2), max_size=4))
def test_only_committed_transactions_leave_events(module_store: Store, plan: list[int]) -> None:
    """Each item is a transaction of ``abs(n)`` events; a negative one raises before its end."""
    run_id = module_store.create_run("agent", "property", {}).id
    expected: list[str] = []
    for tx_index, count in enumerate(plan):
        texts = [f"{tx_index}.{part}" for part in range(abs(count))]
        try:
            with module_store.transaction(run_id) as tx:
                for text in texts:
                    tx.append(SpeakEvent(text=text))
                if count < 0:
                    raise ValueError("abandon")
        except ValueError:
            continue
        expected.extend(texts)
    events = module_store.events(run_id)
    assert [event.text for event in events if isinstance(event, SpeakEvent)] == expected
    assert [event.seq for event in events] == list(range(1, len(expected) + 1))


# -- several processes ---------------------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, time
    from plangate.events import SpeakEvent
    from plangate.store import open_store

    url, run_id, writer, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = open_store(url)
    print("ready", flush=True)
    sys.stdin.readline()
    for tx_index in range(count):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text=f"{writer}:{tx_index}:0"))
            tx.append(SpeakEvent(text=f"{writer}:{tx_index}:1"))
        time.sleep(0.0005)  # leave the other writer a gap: SQLite's busy wait would otherwise starve it
    store.close()
    """
)

_STUCK = textwrap.dedent(
    """
    import sys, time
    from plangate.events import SpeakEvent
    from plangate.store import open_store

    store = open_store(sys.argv[1])
    with store.transaction(sys.argv[2]) as tx:
        tx.append(SpeakEvent(text="never committed"))
        tx.set_snapshot({"from": "the killed process"})
        tx.set_status("failed")
        tx.open_interaction("ask_user", "lost?")
        print("inside", flush=True)
        time.sleep(600)
    """
)


@pytest.mark.slow
def test_two_processes_appending_to_one_run_keep_seq_gapless(shared_backend: Backend) -> None:
    store = shared_backend.open()
    run_id = store.create_run("formula", "two processes", {}).id
    count = 300
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, shared_backend.url, run_id, f"w{i}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        # Both open the store first, then start writing together, so that their transactions contend.
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.close()
        assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
        _assert_gapless_and_atomic(store, run_id, 2, count, 2)
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
            if writer.stdout is not None:
                writer.stdout.close()
        store.close()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_process_killed_inside_a_transaction_loses_only_that_transaction(shared_backend: Backend) -> None:
    store = shared_backend.open()
    run_id = store.create_run("agent", "crash", {}).id
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="committed"))
        tx.set_snapshot({"from": "before the crash"})
        tx.set_status("running")
    before = store.get_run(run_id)
    stuck = subprocess.Popen(
        [sys.executable, "-c", _STUCK, shared_backend.url, run_id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stuck.stdout is not None
        assert stuck.stdout.readline().strip() == "inside"
        os.kill(stuck.pid, signal.SIGKILL)
        assert stuck.wait(timeout=60) == -signal.SIGKILL
    finally:
        if stuck.poll() is None:
            stuck.kill()
        if stuck.stdout is not None:
            stuck.stdout.close()
    try:
        assert store.get_run(run_id) == before
        assert [event.seq for event in store.events(run_id)] == [1]
        snapshot = store.get_snapshot(run_id)
        assert snapshot is not None and snapshot.state == {"from": "before the crash"}
        assert store.list_interactions(run_id=run_id) == []
        with store.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="after the crash")).seq == 2
    finally:
        store.close()


_HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def test_a_write_waiting_on_another_process_lock_holds_up_no_reader(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteStore(path, busy_timeout=10)
    run = store.create_run("agent", "a", {})
    hold = 2.0
    command = [sys.executable, "-c", _HOLD_LOCK, str(path), str(hold)]
    locker = subprocess.Popen(command, stdout=subprocess.PIPE)
    try:
        assert locker.stdout is not None and locker.stdout.readline() == b"locked\n"
        writer = threading.Thread(target=lambda: store.create_run("agent", "b", {}))
        writer.start()  # waits for the other process's lock, inside the store
        time.sleep(0.2)
        assert writer.is_alive()
        started = time.monotonic()
        found = store.get_run(run.id)  # another thread only reads
        took = time.monotonic() - started
        writer.join(timeout=hold * 4)
    finally:
        locker.kill()
        locker.wait(timeout=10)
        assert locker.stdout is not None
        locker.stdout.close()
        store.close()
    assert found.id == run.id
    # Compared with the lock it did not wait for (it read at once; the writer waited the rest of the 2 s).
    assert took < hold / 4, f"the read waited {took:.3f} s behind the blocked write"
