"""``Store.commit``: a function written to a run's transaction fenced by a lease, on both backends.

A PostgreSQL store begins a commit from what its own last commit on the run left, without reading the row,
and checks that with its writes: these tests make somebody else write between two commits, and the second
one must see what they wrote, as a transaction that reads the row would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from store_backends import Backend, FakeClock

from plangate.errors import ConfigError
from plangate.events import SpeakEvent
from plangate.store import Lease, LeaseLost, Store, Transaction
from plangate.store.postgres import PostgresStore


def _leased(store: Store, holder: str = "worker-a") -> tuple[str, Lease]:
    run_id = store.create_run("formula", "committed", {}, lease=(holder, 30)).id
    lease = store.get_lease(run_id)
    assert lease is not None
    return run_id, lease


def _texts(store: Store, run_id: str) -> list[tuple[int, str]]:
    return [(event.seq, getattr(event, "text", "")) for event in store.events(run_id)]


def _appending(event: SpeakEvent) -> Callable[[Transaction], SpeakEvent]:
    def append(tx: Transaction) -> SpeakEvent:
        assert tx.append(event) is event  # stamped in place, each try
        return event

    return append


def _again_on_postgres(store: Store) -> int:
    """How many times a commit's function runs when somebody else wrote to the run since this store's last
    commit: twice on PostgreSQL (the first try, begun from what the store knew, is rolled back)."""
    return 2 if isinstance(store, PostgresStore) else 1


def test_a_commit_writes_what_its_function_wrote_and_returns_what_it_returned(store: Store) -> None:
    run_id, lease = _leased(store)
    first = SpeakEvent(text="one")

    def write(tx: Transaction) -> str:
        assert tx.append(first) is first
        tx.set_status("running")
        return "written"

    assert store.commit(run_id, write, fence=lease) == "written"
    second = store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="two")), fence=lease)
    assert (first.seq, first.run_id, second.seq) == (1, run_id, 2)
    assert _texts(store, run_id) == [(1, "one"), (2, "two")]
    assert store.get_run(run_id).status == "running"


def test_a_commit_numbers_its_events_after_those_somebody_else_added_meanwhile(store: Store) -> None:
    run_id, lease = _leased(store)
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="mine")), fence=lease)
    with store.transaction(run_id) as tx:  # a person's answer, say: written without the lease
        tx.append(SpeakEvent(text="theirs"))
    mine = SpeakEvent(text="mine again")
    tries: list[int | None] = []

    def write(tx: Transaction) -> None:
        tries.append(None)
        tries[-1] = tx.run.last_seq  # a read: on PostgreSQL, the first try's guard fails with it
        assert tx.append(mine) is mine

    store.commit(run_id, write, fence=lease)
    assert (mine.seq, mine.run_id) == (3, run_id)
    assert _texts(store, run_id) == [(1, "mine"), (2, "theirs"), (3, "mine again")]
    assert tries == [None] * (_again_on_postgres(store) - 1) + [2]


def test_an_event_a_rolled_back_try_stamped_is_stamped_again(store: Store) -> None:
    run_id, lease = _leased(store)
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="mine")), fence=lease)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="theirs"))
    mine = SpeakEvent(text="mine again")
    seqs: list[int] = []

    def write(tx: Transaction) -> None:
        seqs.append(tx.append(mine).seq)  # the same object each try, stamped in place

    store.commit(run_id, write, fence=lease)
    assert (mine.seq, mine.run_id) == (3, run_id) and seqs == [2] * (_again_on_postgres(store) - 1) + [3]
    assert _texts(store, run_id) == [(1, "mine"), (2, "theirs"), (3, "mine again")]


def test_a_commit_sees_a_run_ended_meanwhile(store: Store) -> None:
    run_id, lease = _leased(store)
    store.commit(run_id, lambda tx: tx.set_status("running"), fence=lease)
    with store.transaction(run_id) as tx:
        tx.set_status("cancelled", outcome={"status": "cancelled"})
    seen: list[str] = []

    def write(tx: Transaction) -> None:
        seen.append(tx.status)
        if tx.status == "running":
            tx.append(SpeakEvent(text="as if still running"))

    store.commit(run_id, write, fence=lease)
    assert seen[-1] == "cancelled" and len(seen) == _again_on_postgres(store)
    assert store.events(run_id) == [] and store.get_run(run_id).status == "cancelled"


def test_a_commit_after_a_takeover_writes_nothing_and_hands_its_events_back_unstamped(
    store: Store, clock: FakeClock
) -> None:
    run_id, paused = _leased(store)
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="before the pause")), fence=paused)
    clock.advance(45)
    taker = store.take_lease(run_id, "worker-b", ttl=30)
    assert taker is not None
    late = SpeakEvent(text="late")
    taken = r"'worker-b' took it over \(generation 2, live\); nothing was written"
    with pytest.raises(LeaseLost, match=taken):
        store.commit(run_id, lambda tx: tx.append(late), fence=paused)
    unstamped = SpeakEvent(text="late")
    assert (late.run_id, late.seq, late.at) == (unstamped.run_id, unstamped.seq, unstamped.at)
    assert _texts(store, run_id) == [(1, "before the pause")]
    store.commit(run_id, lambda tx: tx.append(late), fence=taker)
    assert _texts(store, run_id) == [(1, "before the pause"), (2, "late")]


def test_a_commit_whose_function_raises_writes_nothing_and_the_next_one_goes_on(store: Store) -> None:
    run_id, lease = _leased(store)
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="one")), fence=lease)

    def fails(tx: Transaction) -> None:
        tx.append(SpeakEvent(text="never"))
        tx.set_status("running")
        raise ConfigError("the function's own mistake")

    with pytest.raises(ConfigError, match="the function's own mistake"):
        store.commit(run_id, fails, fence=lease)
    assert _texts(store, run_id) == [(1, "one")] and store.get_run(run_id).status == "queued"
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="two")), fence=lease)
    assert _texts(store, run_id) == [(1, "one"), (2, "two")]


def test_a_commit_that_ends_the_run_leaves_nothing_to_begin_from(store: Store) -> None:
    run_id, lease = _leased(store)
    store.commit(run_id, lambda tx: tx.set_status("completed", outcome={"status": "completed"}), fence=lease)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="after the end"))
    store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="and again")), fence=lease)
    assert _texts(store, run_id) == [(1, "after the end"), (2, "and again")]


def test_commits_beside_another_writer_keep_the_log_gapless_and_in_each_writers_order(
    shared_backend: Backend,
) -> None:
    # two handles (two processes, in effect): one commits under the lease, the other writes as answers do;
    # each of the holder's commits may find the other's write landed since its last
    holder, other = shared_backend.open(), shared_backend.open()
    try:
        run_id = holder.create_run("formula", "shared", {}, lease=("worker-a", 60)).id
        lease = holder.get_lease(run_id)
        assert lease is not None
        stored: list[tuple[int, str]] = []

        def hold() -> None:
            for i in range(150):
                event = holder.commit(run_id, _appending(SpeakEvent(text=f"a{i}")), fence=lease)
                stored.append((event.seq, event.text))

        def answer() -> None:
            for i in range(150):
                with other.transaction(run_id) as tx:
                    tx.append(SpeakEvent(text=f"b{i}"))

        threads = [threading.Thread(target=hold), threading.Thread(target=answer)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        log = _texts(holder, run_id)
        assert [seq for seq, _ in log] == list(range(1, 301))
        assert [text for _, text in log if text.startswith("a")] == [f"a{i}" for i in range(150)]
        assert [text for _, text in log if text.startswith("b")] == [f"b{i}" for i in range(150)]
        assert stored == [(seq, text) for seq, text in log if text.startswith("a")]  # as handed back
    finally:
        holder.close()
        other.close()
