"""Scale-out figures: formula runs through Celery workers on PostgreSQL, takeover after SIGKILL, and DBOS.

What it measures, on throwaway PostgreSQL and Redis servers it starts itself (``scripts/services.py``):

1. Throughput of N formula runs of 10 no-op tool steps (``workers_data/ten.formula.toml``), in-process
   (one ``FormulaRunner``, up to 8 runs at once, as the server's supervisor runs them) vs 1, 2 and 4
   ``plangate worker`` processes (concurrency 1 each): runs/s and the wall time per step.
2. Takeover after SIGKILL: a worker holding a run is killed (its whole process group); the time until
   another worker holds the run's lease, median and max over K kills.
3. DBOS (``dbos``, on a database of the same PostgreSQL server): the same 10-step workflow, its time per
   step, and the ratio of plangate's (in-process) to DBOS's.

Usage: ``.venv/bin/python bench/workers.py`` (1,000 runs, 20 kills) or ``--quick`` (100 runs, 5 kills).
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
import time
from pathlib import Path

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


def in_process(url: str, runs: int) -> float:
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools

    store = open_store(url)
    runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
    plan = runner.plan("ten")

    async def all_runs() -> None:
        slots = asyncio.Semaphore(8)

        async def one() -> None:
            async with slots:
                result = await runner.start(plan)
                assert result.status == "completed", result.reason

        await asyncio.gather(*(one() for _ in range(runs)))

    started = time.perf_counter()
    asyncio.run(all_runs())
    took = time.perf_counter() - started
    store.close()
    return took


class Workers:
    def __init__(self, url: str, broker: str, folder: Path, ttl: float = 10) -> None:
        self.url, self.broker, self.folder, self.ttl = url, broker, folder, ttl
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        n = len(self.procs) + 1
        log = open(self.folder / f"worker-{n}.log", "wb")
        # fmt: off
        proc = subprocess.Popen(
            [PLANGATE, "worker", "--store", self.url, "--broker", self.broker, "--tools", TOOLS,
             "--path", str(DATA), "--concurrency", "1", "--lease-ttl", str(self.ttl)],
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

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.kill(proc)


def _flush(broker: str) -> None:
    import redis

    client = redis.Redis.from_url(broker)
    client.flushdb()
    client.close()


def through_workers(url: str, broker: str, runs: int, count: int, folder: Path) -> float:
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools
    from plangate.workers import RunQueue

    _flush(broker)
    store = open_store(url)
    workers = Workers(url, broker, folder)
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


def takeover(url: str, broker: str, kills: int, folder: Path) -> list[float]:
    from plangate.formulas.runtime import FormulaRunner
    from plangate.store import open_store
    from plangate.tools.specs import load_tools
    from plangate.workers import RunQueue

    _flush(broker)
    store = open_store(url)
    workers = Workers(url, broker, folder)
    queue = RunQueue(broker)
    runner = FormulaRunner(store, load_tools([TOOLS]), search_paths=[DATA])
    times: list[float] = []
    try:
        for proc in [workers.start(), workers.start()]:
            workers.ready(proc)
        for _ in range(kills):
            run_id = runner.submit("hold")
            queue.enqueue(run_id)
            while (lease := store.get_lease(run_id)) is None:
                time.sleep(0.02)
            holder_pid = int(lease.holder.rsplit(":", 3)[1])
            victim = next(p for p in workers.procs if p.poll() is None and _in_group(holder_pid, p.pid))
            workers.kill(victim)
            killed = time.perf_counter()
            while (now := store.get_lease(run_id)) is None or now.generation == lease.generation:
                time.sleep(0.02)
            times.append(time.perf_counter() - killed)
            workers.ready(workers.start())  # back to two workers
            runner.cancel(run_id, "measured")
    finally:
        workers.stop()
        queue.close()
        store.close()
    return times


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def dbos_per_step(base_url: str, runs: int) -> float:
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

    DBOS.launch()
    try:
        ten()  # warm: the first workflow creates what DBOS keeps per process
        started = time.perf_counter()
        for _ in range(runs):
            assert ten() == 10
        took = time.perf_counter() - started
    finally:
        DBOS.destroy()
    return took / (runs * 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 runs and 5 kills instead of 1,000 and 20")
    options = parser.parse_args(argv)
    runs, kills = (100, 5) if options.quick else (1000, 20)
    services = _services()
    folder = Path(tempfile.mkdtemp(prefix="plangate-bench-workers-"))
    os.chmod(folder, 0o755)
    postgres = services.Postgres.start(folder / "pg")  # type: ignore[attr-defined]
    redis_server = services.Redis.start(folder / "redis")  # type: ignore[attr-defined]
    print(f"bench/workers.py: {runs} runs of 10 no-op tool steps; {_load()}")
    print("(this machine has 2 cores, shared with other work: the figures are what it gave, not a ceiling)")
    try:
        took = in_process(_fresh_schema(postgres.url, "inproc"), runs)
        print(
            f"in-process (8 at once):  {runs / took:7.1f} runs/s, {took / (runs * 10) * 1000:6.2f} ms a step"
        )
        per_step = took / (runs * 10)
        for count in (1, 2, 4):
            url = _fresh_schema(postgres.url, f"w{count}")
            took = through_workers(url, redis_server.url, runs, count, folder)
            print(
                f"{count} Celery worker(s):      {runs / took:7.1f} runs/s, "
                f"{took / (runs * 10) * 1000:6.2f} ms a step (wall time / steps)"
            )
        times = takeover(_fresh_schema(postgres.url, "takeover"), redis_server.url, kills, folder)
        print(
            f"takeover after SIGKILL ({kills} kills, lease ttl 10 s, workers on one machine): median "
            f"{statistics.median(times):.2f} s, max {max(times):.2f} s"
        )
        dbos_step = dbos_per_step(postgres.url, max(runs // 10, 20))
        print(
            f"DBOS {_version('dbos')} (one process, workflows one after another): {dbos_step * 1000:.2f} ms "
            f"a step; plangate in-process / DBOS per-step overhead: {per_step / dbos_step:.2f}"
        )
        print(_load())
    finally:
        redis_server.stop()
        postgres.stop()
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    raise SystemExit(main())
