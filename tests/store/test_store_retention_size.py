"""The store does not grow without bound under a steady load: 10,000 ended runs (each with events, a
snapshot, an interaction and receipts, written in bulk through the store's database), pruned and compacted,
leave a SQLite file within 10 % of its size with the kept runs alone; on PostgreSQL, whose plain VACUUM
lets later rows reuse the space rather than shrinking the tables, loads of 2,000 runs pruned one after the
other leave the tables within 10 % of their size after the second load (the first load grows the indexes
once)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from plangate.store import Store, open_store, retention

RUNS = 10_000
KEPT = 200
DAY = 86_400.0
_PAYLOAD = json.dumps({"type": "status", "stage": "step", "code": "completed", "detail": "x" * 120})
_STATE = json.dumps({"steps": {f"s{i}": {"status": "complete", "output": {"rows": i}} for i in range(8)}})
_TABLES = ("runs", "events", "snapshots", "interactions", "receipts")


def _load(store: Store, prefix: str, count: int, *, status: str, at: float) -> None:
    """``count`` runs with 6 events, a snapshot, an interaction and 2 receipts each, in one transaction."""
    ids = [f"run_{prefix}{n:06d}" for n in range(count)]
    with store.database.writing("bulk load") as db:  # type: ignore[attr-defined]
        db.run_many(
            "INSERT INTO runs (id, kind, name, owner, parent_run_id, status, input, last_seq, created_at, "
            "updated_at) VALUES (?, 'formula', 'nightly', 'ana', NULL, ?, ?, 6, ?, ?)",
            [(run_id, status, '{"v": 1}', at, at) for run_id in ids],
        )
        db.run_many(
            "INSERT INTO events (run_id, seq, type, payload, at) VALUES (?, ?, 'status', ?, ?)",
            [(run_id, seq, _PAYLOAD, at) for run_id in ids for seq in range(1, 7)],
        )
        db.run_many(
            "INSERT INTO snapshots (run_id, version, seq, state, updated_at) VALUES (?, 1, 6, ?, ?)",
            [(run_id, _STATE, at) for run_id in ids],
        )
        db.run_many(
            "INSERT INTO interactions (id, run_id, kind, status, prompt, step_id, created_at, resolved_at, "
            "resolution) VALUES (?, ?, 'approval', 'resolved', 'Go on', 'gate', ?, ?, ?)",
            [(f"int_{run_id}", run_id, at, at, '{"kind": "approve"}') for run_id in ids],
        )
        db.run_many(
            "INSERT INTO receipts (run_id, step_index, source, name, arguments_digest, success, summary, at) "
            "VALUES (?, ?, 'tool_observation', 'db_query', 'abcdef', ?, 'ran the query', ?)",
            [(run_id, step, True, at) for run_id in ids for step in (1, 2)],
        )


def test_sqlite_file_returns_near_the_size_of_the_kept_runs(tmp_path: Path) -> None:
    path = tmp_path / "plangate.db"
    store = open_store(f"sqlite:///{path}")
    try:
        now = time.time()
        _load(store, "kept", KEPT, status="waiting", at=now - 40 * DAY)
        retention.compact(store)
        baseline = path.stat().st_size
        _load(store, "old", RUNS, status="completed", at=now - 40 * DAY)
        loaded = path.stat().st_size + Path(f"{path}-wal").stat().st_size
        started = time.monotonic()
        report = retention.prune(store, 30 * DAY)
        retention.compact(store)
        took = time.monotonic() - started
        after = path.stat().st_size
    finally:
        store.close()
    print(f"sqlite: kept {baseline} B, loaded {loaded} B, pruned {after} B; prune+VACUUM {took:.1f} s")
    assert (report.trees, report.runs, report.kept) == (RUNS, RUNS, 0)
    assert report.rows["events"] == 6 * RUNS and report.rows["receipts"] == 2 * RUNS
    assert loaded > 5 * baseline
    assert after <= 1.1 * baseline


PG_RUNS = 2_000
PG_CYCLES = 4


@pytest.mark.timeout(600)
def test_postgres_tables_stop_growing(postgres_schemas: Callable[[], str]) -> None:
    store = open_store(postgres_schemas())
    sizes: list[int] = []
    try:
        now = time.time()
        _load(store, "kept", KEPT, status="waiting", at=now - 40 * DAY)
        started = time.monotonic()
        for cycle in range(PG_CYCLES):
            _load(store, f"c{cycle}", PG_RUNS, status="completed", at=now - 40 * DAY)
            assert retention.prune(store, 30 * DAY).trees == PG_RUNS
            retention.compact(store)
            sizes.append(_size(store))
        took = time.monotonic() - started
        kept = store.list_runs(status="waiting", limit=KEPT + 1).items
    finally:
        store.close()
    print(f"postgres: sizes after each load of {PG_RUNS} runs and prune: {sizes} B; {took:.1f} s")
    assert len(kept) == KEPT
    # Plain VACUUM lets later rows reuse the space; how much the first rounds take depends on autovacuum's
    # timing, so the steady state is read from the last rounds: no growth from one to the next.
    assert sizes[-1] <= 1.1 * sizes[-2]
    assert sizes[-1] <= 2 * sizes[1]


def _size(store: Store) -> int:
    with store.database.reading("size") as db:  # type: ignore[attr-defined]
        total = 0
        for table in _TABLES:
            row = db.one("SELECT pg_total_relation_size(?::regclass) AS n", (table,))
            assert row is not None
            total += int(row["n"])
    return total
