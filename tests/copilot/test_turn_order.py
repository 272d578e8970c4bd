"""One turn writes a conversation at a time (``copilot/_turn_order.py``), on real stores: the writer, the
turns waiting after it in the order they came, freed in the turn's last transaction; a writer whose run
ended or was never stored holds nothing; of many processes racing for a free conversation on PostgreSQL,
exactly one writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from plangate.copilot._turn_order import UNSTORED_AFTER, TurnOrder
from plangate.store import SQLiteStore, Store, open_store


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Store:
    return SQLiteStore(tmp_path / "turns.db", clock=clock)


def _turn(store: Store) -> str:
    return store.create_run("ask", "q", {}, owner="ana").id


def _end(store: Store, run_id: str) -> None:
    with store.transaction(run_id) as tx:
        TurnOrder.release(tx)
        tx.set_status("completed")


def test_turns_write_a_conversation_one_after_the_other_in_order(store: Store) -> None:
    order = TurnOrder(store)
    first, second, third = _turn(store), _turn(store), _turn(store)
    assert order.claim("conv_1", first) is None and order.claim("conv_1", first) is None
    assert order.claim("conv_1", second, queue=False) == first  # refused, not in line
    assert order.ahead("conv_1", second) == [first]
    assert order.claim("conv_1", third) == first  # in line first
    assert order.claim("conv_1", second) == first  # in line after the third
    assert order.ahead("conv_1", second) == [first, third]
    assert order.claim("conv_2", second) is None  # another conversation is another line
    _end(store, first)
    assert order.claim("conv_1", second) == third  # the third came first
    assert order.claim("conv_1", third) is None
    assert order.writer("conv_1") == third
    _end(store, third)
    assert order.claim("conv_1", second) is None


def test_a_writer_that_ended_or_was_never_stored_holds_nothing(store: Store, clock: Clock) -> None:
    order = TurnOrder(store)
    ended = _turn(store)
    assert order.claim("conv_1", ended) is None
    with store.transaction(ended) as tx:  # ended without releasing (an older process's way)
        tx.set_status("failed")
    waiting = _turn(store)
    assert order.claim("conv_1", waiting) is None
    _end(store, waiting)
    assert order.claim("conv_1", "run_never_stored") is None  # its process died before storing the run
    later = _turn(store)
    assert order.claim("conv_1", later) == "run_never_stored"
    clock.now += UNSTORED_AFTER + 1
    assert order.claim("conv_1", later) is None
    order.withdraw(later)  # a turn that will not run leaves the conversation free
    assert order.writer("conv_1") is None


def test_of_processes_racing_for_a_conversation_one_writes(postgres_url: str) -> None:
    stores = [open_store(postgres_url) for _ in range(4)]
    try:
        runs = [stores[0].create_run("ask", f"q{n}", {}, owner="race").id for n in range(8)]
        won: list[str] = []

        def claim(store: Store, run_id: str) -> None:
            if TurnOrder(store).claim("conv_race", run_id, queue=False) is None:
                won.append(run_id)

        threads = [
            threading.Thread(target=claim, args=(stores[n % 4], run_id)) for n, run_id in enumerate(runs)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1 and TurnOrder(stores[1]).writer("conv_race") == won[0]
    finally:
        for store in stores:
            store.close()
