"""Fault tests of the workers, with real processes, real PostgreSQL and Redis, and SIGKILL.

100 runs (formulas with write steps and approvals, agent runs with consent) on 3 workers, one of which is
killed with SIGKILL every few seconds and replaced, until every run ended: no run lost, no write executed
twice (counted by the write tool in a table of its own), no run that never ends. Then Redis restarted
mid-way (it keeps nothing: every queued message is lost), and PostgreSQL restarted mid-way. Each test is
bounded in time.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

import fault_tools
import pytest
from worker_helpers import Workers, approve_open, submit_agent, submit_formula, unfinished, until

from plangate.errors import StoreError
from plangate.store import Store, open_store
from plangate.workers import RunQueue

pytestmark = pytest.mark.slow

_OPTIONS = {"ttl": 3, "reap": 0.5, "grace": 10}


def _drive(store: Store, queue: RunQueue, run_ids: list[str], deadline: float, chaos: object = None) -> None:
    """Answer every question until all runs ended (or the deadline), calling ``chaos(now)`` meanwhile."""
    while time.monotonic() < deadline:
        try:
            approve_open(store, queue)
            if not unfinished(store, run_ids):
                return
        except StoreError:
            pass  # the store is being restarted: try again in a moment
        if callable(chaos):
            chaos(time.monotonic())
        time.sleep(0.3)


def _not_completed(store: Store, run_ids: list[str]) -> dict[str, object]:
    """Each run that did not complete, with its outcome and its last events (what its failure says)."""
    found: dict[str, object] = {}
    for run_id in run_ids:
        run = store.get_run(run_id)
        if run.status != "completed":
            last = [event.model_dump(mode="json") for event in store.events(run_id)[-8:]]
            found[run_id] = {"status": run.status, "outcome": run.outcome, "last events": last}
    return found


def _check_writes(store_url: str, expected: int) -> dict[str, int]:
    done = fault_tools.executions(store_url)
    twice = {key: count for key, count in done.items() if count > 1}
    assert twice == {}, f"writes executed more than once: {twice}"
    assert len(done) == expected, f"expected {expected} writes, found {len(done)}"
    return done


@pytest.mark.timeout(420)
def test_100_runs_on_3_workers_killed_every_few_seconds_all_end_and_no_write_runs_twice(
    store: Store, store_url: str, queue: RunQueue, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAULT_WRITE_DELAY", "0.2")  # a window for kills between a write's intent and receipt
    for proc in [workers.start(**_OPTIONS) for _ in range(3)]:
        workers.wait_ready(proc)
    formulas = [submit_formula(store, queue, "chaos", label=f"f{i}") for i in range(70)]
    agents = [submit_agent(store, queue, f"a{i}") for i in range(30)]
    run_ids = formulas + agents
    chooser = random.Random(15)
    kills: list[float] = []

    def chaos(now: float) -> None:
        if kills and now - kills[-1] < 4:
            return
        alive = workers.alive()
        if alive:
            workers.kill(chooser.choice(alive))
            kills.append(now)
        while len(workers.alive()) < 3:
            workers.start(**_OPTIONS)

    started = time.monotonic()
    _drive(store, queue, run_ids, started + 300, chaos)
    took = time.monotonic() - started
    never_ended = unfinished(store, run_ids)
    statuses = {run_id: store.get_run(run_id).status for run_id in run_ids}
    lost = [run_id for run_id, status in statuses.items() if status != "completed"]
    done = fault_tools.executions(store_url)
    print(
        f"\nfault test: {len(run_ids)} runs, {len(kills)} workers killed with SIGKILL in {took:.0f} s; "
        f"runs lost {len(lost)}, never ended {len(never_ended)}, writes {len(done)}, "
        f"executed twice {sum(1 for c in done.values() if c > 1)}"
    )
    assert never_ended == []
    assert lost == [], {run_id: statuses[run_id] for run_id in lost}
    assert len(kills) >= 5, "too few kills to test anything"
    _check_writes(store_url, 70 * 2 + 30)


def _redis_server(port: int, folder: Path) -> subprocess.Popen[bytes]:
    program = shutil.which("redis-server")
    assert program is not None
    # fmt: off
    command = [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(folder)]
    # fmt: on
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until(lambda: fault_tools_ping(port), 30, "redis to answer")
    return proc


def fault_tools_ping(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.mark.timeout(300)
def test_redis_restarted_mid_way_loses_its_messages_and_every_run_still_ends(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redis = _redis_server(port, tmp_path)
    broker = f"redis://127.0.0.1:{port}/0"
    workers = Workers(store_url, broker, tmp_path)
    queue = RunQueue(broker)
    try:
        for proc in [workers.start(**_OPTIONS), workers.start(**_OPTIONS)]:
            workers.wait_ready(proc)
        run_ids = [submit_formula(store, queue, "chaos", label=f"r{i}") for i in range(20)]
        restarted: list[float] = []

        def chaos(now: float) -> None:
            nonlocal redis
            if not restarted and now - started > 4:
                redis.kill()  # no persistence: the queue, the unacknowledged messages, all gone
                redis.wait()
                time.sleep(2)
                redis = _redis_server(port, tmp_path)
                restarted.append(now)

        started = time.monotonic()
        _drive(store, queue, run_ids, started + 200, chaos)
        assert restarted, "Redis was never restarted: nothing tested"
        assert unfinished(store, run_ids) == []
        assert _not_completed(store, run_ids) == {}
        _check_writes(store_url, 20 * 2)
    finally:
        workers.stop_all()
        queue.close()
        redis.kill()
        redis.wait()


@pytest.mark.timeout(300)
def test_postgresql_restarted_mid_way_every_run_still_ends_and_no_write_runs_twice(
    fresh_postgres: object, broker: str, tmp_path: Path
) -> None:
    cluster = fresh_postgres
    url: str = cluster.url  # type: ignore[attr-defined]
    fault_tools.prepare_table(url)
    store = open_store(url)
    workers = Workers(url, broker, tmp_path)
    queue = RunQueue(broker)
    try:
        for proc in [workers.start(**_OPTIONS), workers.start(**_OPTIONS)]:
            workers.wait_ready(proc)
        run_ids = [submit_formula(store, queue, "chaos", label=f"p{i}") for i in range(20)]
        restarted: list[float] = []

        def chaos(now: float) -> None:
            if not restarted and now - started > 4:
                cluster.pg_ctl("restart", mode="fast")  # type: ignore[attr-defined]
                restarted.append(now)

        started = time.monotonic()
        _drive(store, queue, run_ids, started + 200, chaos)
        assert restarted, "PostgreSQL was never restarted: nothing tested"
        assert unfinished(store, run_ids) == []
        assert _not_completed(store, run_ids) == {}
        _check_writes(url, 20 * 2)
    finally:
        workers.stop_all()
        queue.close()
        store.close()
