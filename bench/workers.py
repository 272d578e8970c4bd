"""Scale-out figures: formula runs through Celery workers on PostgreSQL, takeover after SIGKILL, and DBOS.

What it measures, on throwaway PostgreSQL and Redis servers it starts itself (``scripts/services.py``):

1. Throughput of N formula runs of 10 no-op tool steps (``workers_data/ten.formula.toml``), in-process
   (one ``FormulaRunner``, up to 8 runs at once, as the server's supervisor runs them) vs 1, 2 and 4
   ``plangate worker`` processes (concurrency 1 each): runs/s and the wall time per step.
2. Takeover: the worker holding a run is killed (SIGKILL, its whole process group) K times, and paused
   (SIGSTOP: looks alive, as a dead worker on another machine does) P times; the time until another
   worker holds the run's lease, median and max.
3. Side by side with DBOS (``dbos``, on a database of the same PostgreSQL server): the same 10-step
   workflow in plangate's runner and as a DBOS workflow, one at a time and 8 at once, in one process
   each, and plangate's 8 at once on 2 Celery workers (``plangate worker --concurrency 4`` twice, the runs
   submitted and enqueued at once): the time per step of each, and the ratio to DBOS's 8 at once. Then
   the round trips to PostgreSQL per step of the in-process run (counted where libpq sends a query or a
   pipeline's sync, in a process of their own: a figure the machine's load does not change).

Usage: ``.venv/bin/python bench/workers.py`` (1,000 runs, 20 kills, 5 pauses) or ``--quick`` (100 runs,
5 kills, 2 pauses); ``--only takeover`` (or ``throughput``, ``dbos``; repeatable) runs one phase.
The figures depend on the machine and its load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "workers_data"
TOOLS = f"{DATA / 'tools.py'}:registry"
PLANGATE = str(Path(sys.executable).with_name("plangate"))


def _services() -> object:
    path = HERE.parent / "scripts" / "services.py"
    spec = importlib.util.spec_from_file_location("plangate_bench_services", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def _fresh_schema(url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{name}"')
    return f"{url}?options=-csearch_path%3D{name}"


def in_process(url: str, runs: int, at_once: int = 8) -> float:
    """Seconds for ``runs`` runs of ``ten`` in this process, ``at_once`` at a time."""
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools

    store = open_store(url)
    runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
    plan = runner.plan("ten")

    async def all_runs(runs: int) -> None:
        slots = asyncio.Semaphore(at_once)

        async def one() -> None:
            async with slots:
                result = await runner.start(plan)
                assert result.status == "completed", result.reason

        await asyncio.gather(*(one() for _ in range(runs)))

    asyncio.run(all_runs(at_once))  # warm: what the first runs build (imports, the pool's connections)
    started = time.perf_counter()
    asyncio.run(all_runs(runs))
    took = time.perf_counter() - started
    store.close()
    return took


class Workers:
    def __init__(self, url: str, broker: str, folder: Path, ttl: float = 10, concurrency: int = 1) -> None:
        self.url, self.broker, self.folder, self.ttl = url, broker, folder, ttl
        self.concurrency = concurrency
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        n = len(self.procs) + 1
        log = open(self.folder / f"worker-{n}.log", "wb")
        # fmt: off
        proc = subprocess.Popen(
            [PLANGATE, "worker", "--store", self.url, "--broker", self.broker, "--tools", TOOLS,
             "--path", str(DATA), "--concurrency", str(self.concurrency), "--lease-ttl", str(self.ttl)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        # fmt: on
        log.close()
        self.procs.append(proc)
        return proc

    def ready(self, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
        n = self.procs.index(proc) + 1
        deadline = time.monotonic() + timeout
        while " ready." not in (self.folder / f"worker-{n}.log").read_text(errors="replace"):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"worker {n} did not start; see {self.folder}")
            time.sleep(0.1)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def holding(self, pid: int) -> subprocess.Popen[bytes]:
        """The live worker whose process group has the process ``pid`` (the child holding a lease)."""
        for proc in self.procs:
            if proc.poll() is None and _in_group(pid, proc.pid):
                return proc
        raise RuntimeError(f"no live worker has process {pid}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.kill(proc)


def _flush(broker: str) -> None:
    import redis

    client = redis.Redis.from_url(broker)
    client.flushdb()
    client.close()


def through_workers(
    url: str, broker: str, runs: int, count: int, folder: Path, concurrency: int = 1
) -> float:
    """Seconds for ``runs`` runs of ``ten``, submitted and enqueued at once, advanced by ``count`` workers of
    ``concurrency`` processes each."""
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools
    from plangate.workers import RunQueue

    _flush(broker)
    store = open_store(url)
    workers = Workers(url, broker, folder, concurrency=concurrency)
    queue = RunQueue(broker)
    try:
        for proc in [workers.start() for _ in range(count)]:
            workers.ready(proc)
        runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
        plan = runner.plan("ten")
        started = time.perf_counter()
        for _ in range(runs):
            queue.enqueue(runner.submit(plan))
        while store.list_runs(status="completed", limit=runs).items.__len__() < runs:
            if time.perf_counter() - started > 3600:
                raise RuntimeError("the runs did not complete within an hour")
            time.sleep(0.05)
        return time.perf_counter() - started
    finally:
        workers.stop()
        queue.close()
        store.close()


def takeover(url: str, broker: str, kills: int, pauses: int, folder: Path) -> tuple[list[float], list[float]]:
    """Seconds from a kill (and from a pause) of the worker holding a run until another worker holds it.

    One run of one long step is handed from worker to worker: each time, a fresh worker is started and
    ready first, then the worker holding the run is stopped, and the clock runs until the run's lease has
    a new generation (another worker took it). SIGKILL on this machine is seen at once (the holder's
    process is gone); SIGSTOP stands for a worker on another machine that died or was cut off: its
    process looks alive from here, so the run waits for the lease to expire (``--lease-ttl``) and the
    next pass of a reaper, as it would across machines.
    """
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools
    from plangate.workers import RunQueue

    _flush(broker)
    store = open_store(url)
    workers = Workers(url, broker, folder)
    queue = RunQueue(broker)
    runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
    killed: list[float] = []
    paused: list[float] = []
    run_id = ""
    try:
        workers.ready(workers.start())
        run_id = runner.submit("hold")
        queue.enqueue(run_id)
        lease = _lease_taken(store, run_id, None, 120)
        for n in range(kills + pauses):
            workers.ready(workers.start())  # the one that will take the run over
            victim = workers.holding(int(lease.holder.rsplit(":", 3)[1]))
            stopped = time.perf_counter()
            if n < kills:
                workers.kill(victim)
            else:
                os.killpg(victim.pid, signal.SIGSTOP)
            lease = _lease_taken(store, run_id, lease.generation, 120)
            (killed if n < kills else paused).append(time.perf_counter() - stopped)
            workers.kill(victim)  # a paused one too (SIGKILL ends a stopped process)
    finally:
        if run_id:
            runner.cancel(run_id, "measured")
        workers.stop()
        queue.close()
        store.close()
    return killed, paused


def _lease_taken(store: Any, run_id: str, generation: int | None, timeout: float) -> Any:
    """The run's lease once it is held with a generation other than ``generation``."""
    deadline = time.monotonic() + timeout
    while (lease := store.get_lease(run_id)) is None or lease.generation == generation:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no worker took run {run_id} over within {timeout:.0f} s")
        time.sleep(0.02)
    return lease


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def dbos_runs(base_url: str, runs: int, at_once: tuple[int, ...]) -> list[float]:
    """Seconds for ``runs`` DBOS workflows of 10 no-op steps, for each count of workflows at once (threads:
    DBOS's workflows are synchronous functions here)."""
    from concurrent.futures import ThreadPoolExecutor

    import psycopg
    from dbos import DBOS

    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS dbos_bench")
        conn.execute("CREATE DATABASE dbos_bench")
    url = base_url.rsplit("/", 1)[0] + "/dbos_bench"
    DBOS(config={"name": "plangate-bench", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def noop() -> bool:
        return True

    @DBOS.workflow()
    def ten() -> int:
        return sum(1 for _ in range(10) if noop())

    def one(_: int) -> None:
        assert ten() == 10

    DBOS.launch()
    took: list[float] = []
    try:
        for count in at_once:
            with ThreadPoolExecutor(count) as pool:
                list(pool.map(one, range(count)))  # warm: what DBOS keeps per process and thread
                started = time.perf_counter()
                list(pool.map(one, range(runs)))
                took.append(time.perf_counter() - started)
    finally:
        DBOS.destroy()
    return took


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--count-round-trips"]:  # the process ``_round_trips`` starts
        _count_round_trips(argv[1], int(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="100 runs, 5 kills and 2 pauses instead of 1,000, 20 and 5"
    )
    parser.add_argument(
        "--only",
        choices=("throughput", "takeover", "dbos"),
        action="append",
        help="run only this phase (repeatable; default: all three)",
    )
    options = parser.parse_args(argv)
    phases = set(options.only or ("throughput", "takeover", "dbos"))
    runs, kills, pauses = (100, 5, 2) if options.quick else (1000, 20, 5)
    services = _services()
    folder = Path(tempfile.mkdtemp(prefix="plangate-bench-workers-"))
    os.chmod(folder, 0o755)
    postgres = services.Postgres.start(folder / "pg")  # type: ignore[attr-defined]
    redis_server = services.Redis.start(folder / "redis")  # type: ignore[attr-defined]
    print(f"bench/workers.py: {runs} runs of 10 no-op tool steps; {_load()}", flush=True)
    print("(this machine has 2 cores, shared with other work: the figures are what it gave, not a ceiling)")
    try:
        if "throughput" in phases:
            _throughput(postgres.url, redis_server.url, runs, folder)
        if "takeover" in phases:
            _takeover(postgres.url, redis_server.url, kills, pauses, folder)
        if "dbos" in phases:
            _side_by_side(postgres.url, redis_server.url, runs, folder)
        print(_load())
    finally:
        redis_server.stop()
        postgres.stop()
    return 0


def _throughput(url: str, broker: str, runs: int, folder: Path) -> None:
    took = in_process(_fresh_schema(url, "inproc"), runs)
    print(
        f"in-process (8 at once):  {runs / took:7.1f} runs/s, {took / (runs * 10) * 1000:6.2f} ms a step",
        flush=True,
    )
    for count in (1, 2, 4):
        took = through_workers(_fresh_schema(url, f"w{count}"), broker, runs, count, folder)
        print(
            f"{count} Celery worker(s):      {runs / took:7.1f} runs/s, "
            f"{took / (runs * 10) * 1000:6.2f} ms a step (wall time / steps)",
            flush=True,
        )


def _takeover(url: str, broker: str, kills: int, pauses: int, folder: Path) -> None:
    killed, paused = takeover(_fresh_schema(url, "takeover"), broker, kills, pauses, folder)
    print(
        f"takeover after SIGKILL ({kills} kills, workers on this machine, lease ttl 10 s, reaper every 2 s): "
        f"median {statistics.median(killed):.2f} s, max {max(killed):.2f} s"
    )
    print(
        f"takeover after SIGSTOP ({pauses} pauses: a worker that looks alive, as one on another machine "
        "does): "
        f"median {statistics.median(paused):.2f} s, max {max(paused):.2f} s",
        flush=True,
    )


def _side_by_side(url: str, broker: str, runs: int, folder: Path) -> None:
    """plangate in-process and DBOS on the same PostgreSQL server, the same 10-step workflow, one at a
    time and 8 at once, and plangate 8 at once on 2 Celery workers: the time per step of each, and their
    ratio; then plangate's round trips per step."""
    dbos_runs_n = max(runs // 2, 50)
    ours = [in_process(_fresh_schema(url, f"side{n}"), dbos_runs_n, n) for n in (1, 8)]
    celery = through_workers(_fresh_schema(url, "side-celery"), broker, dbos_runs_n, 2, folder, concurrency=4)
    theirs = dbos_runs(url, dbos_runs_n, (1, 8))
    print(f"side by side with DBOS {_version('dbos')} ({dbos_runs_n} workflows of 10 no-op steps each):")
    steps = dbos_runs_n * 10
    for label, mine, peer, target in (
        ("1 at once", ours[0], theirs[0], 0.5),
        ("8 at once", ours[1], theirs[1], 0.5),
        ("8 at once on 2 Celery workers", celery, theirs[1], 1.0),
    ):
        step, peer_step = mine / steps, peer / steps
        ratio = step / peer_step
        print(
            f"  {label}: plangate {step * 1000:6.2f} ms a step, DBOS {peer_step * 1000:6.2f} ms a step; "
            f"plangate / DBOS per-step overhead {ratio:.2f} (target <= {target:.2f}: "
            f"{'met' if ratio <= target else 'MISSED'})",
            flush=True,
        )
    trips = _round_trips(_fresh_schema(url, "side-trips"))
    print(f"  round trips to PostgreSQL per step (plangate in-process, one run at a time): {trips:.2f}")


def _round_trips(url: str, runs: int = 20) -> float:
    """Round trips per step of ``runs`` runs of ``ten`` in this process's runner, counted in a process of
    its own (libpq's Python binding, which can be watched): each query sent outside a pipeline, and each
    pipeline's sync, is one wait for the server."""
    out = subprocess.run(
        [sys.executable, __file__, "--count-round-trips", url, str(runs)],
        env={**os.environ, "PSYCOPG_IMPL": "python"},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def watch_round_trips() -> list[int]:
    """Count, from now on in this process, each wait for PostgreSQL: each query sent outside a pipeline,
    and each pipeline's sync. The set-up of a new connection, by a store opened from now on, is not
    counted: its pool does that in threads of its own, at moments no step waits for. Only with libpq's
    Python binding (``PSYCOPG_IMPL=python``), which can be watched. Returns the count, a list of one item
    that the sends update (the tests read it too)."""
    from psycopg.pq import pq_ctypes

    from plangate.store.postgres import PostgresStore

    counted = [0]
    setting_up = threading.local()
    configure = PostgresStore._configure

    def configuring(store: PostgresStore, conn: Any) -> None:
        setting_up.now = True
        try:
            configure(store, conn)
        finally:
            setting_up.now = False

    PostgresStore._configure = configuring  # type: ignore[method-assign]

    def counting(name: str, always: bool = False) -> None:
        sent = getattr(pq_ctypes.PGconn, name)

        def send(conn: Any, *args: Any, **kwargs: Any) -> Any:
            # a query in a pipeline waits for its sync
            if (always or conn.pipeline_status == 0) and not getattr(setting_up, "now", False):
                counted[0] += 1
            return sent(conn, *args, **kwargs)

        setattr(pq_ctypes.PGconn, name, send)

    for name in ("send_query", "send_query_params", "send_query_prepared", "send_prepare"):
        counting(name)
    counting("pipeline_sync", always=True)
    return counted


def _count_round_trips(url: str, runs: int) -> None:
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools

    counted = watch_round_trips()
    store = open_store(url)
    runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
    plan = runner.plan("ten")

    async def all_runs() -> None:
        for _ in range(runs):
            result = await runner.start(plan)
            assert result.status == "completed", result.reason

    asyncio.run(runner.start(plan))  # warm: the pool's connections, the statements psycopg prepares
    counted[0] = 0
    asyncio.run(all_runs())
    store.close()
    print(counted[0] / (runs * 10))


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    raise SystemExit(main())
