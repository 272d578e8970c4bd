"""The reaper enqueues only what a worker can advance: never a copilot turn's ``ask`` run nor the formula runs
it started (a turn runs where its question was taken; enqueued, it would be dropped again and again), while a
formula run nobody advances is handed on (real Redis, real PostgreSQL store)."""

from __future__ import annotations

import redis

from plangate.store import Store
from plangate.workers import Reaper, RunQueue


def _running(store: Store, kind: str, parent: str | None = None) -> str:
    run = store.create_run(kind, kind, {}, parent_run_id=parent)  # type: ignore[arg-type]
    with store.transaction(run.id) as tx:
        tx.set_status("running")
    return run.id


def _queued_messages(broker: str) -> int:
    client = redis.Redis.from_url(broker)
    try:
        return int(client.llen("plangate"))
    finally:
        client.close()


def test_the_reaper_never_enqueues_a_run_no_worker_can_advance(
    store: Store, queue: RunQueue, broker: str
) -> None:
    turn = _running(store, "ask")  # a server died mid-turn: nobody holds it
    turns_formula = _running(store, "formula", parent=turn)
    orphan = _running(store, "formula")  # a formula run whose worker died before it took the lease

    sent = Reaper(store, queue, grace=0.0).reap()

    assert sent == [orphan]
    assert turn not in sent and turns_formula not in sent
    assert _queued_messages(broker) == 1
