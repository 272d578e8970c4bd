"""What the worker tests share: real worker processes (started, killed, paused), runs handed to them, and
answers given the way a server gives them (committed here, then the run enqueued again).

Every worker is a process group of its own (Celery's main process and its pool), so a SIGKILL takes the
whole worker down at once, as a machine that dies would. Everything waits with a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import fault_model
import fault_tools

from plangate.agent import Agent
from plangate.errors import RunLeased, StaleInteraction
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.store import TERMINAL_STATUSES, LeaseBook, Store
from plangate.workers import RunQueue

HERE = Path(__file__).resolve().parent
FORMULAS = HERE / "formulas"
PROC = HERE / "worker_proc.py"


class Workers:
    """Worker processes on one store and one broker; each logs to its own file under ``folder``."""

    def __init__(self, store: str, broker: str, folder: Path, **options: object) -> None:
        self.store = store
        self.broker = broker
        self.folder = folder
        self.options = options
        self.procs: list[subprocess.Popen[bytes]] = []
        self._count = 0

    def start(self, **options: object) -> subprocess.Popen[bytes]:
        self._count += 1
        settings = {**self.options, **options, "name": f"w{self._count}@%h"}
        args = [sys.executable, str(PROC), self.store, self.broker]
        args += [f"{key}={value}" for key, value in settings.items()]
        log = open(self.folder / f"worker-{self._count}.log", "wb")
        env = {**os.environ, "FAULT_DB": self.store}
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        number = self.procs.index(proc) + 1
        return (self.folder / f"worker-{number}.log").read_text(errors="replace")

    def tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of every worker's log, each under its process id."""
        return "\n".join(
            f"--- worker {proc.pid} (exit {proc.returncode}), the last {lines} lines of its log:\n"
            + "\n".join(self.log(proc).splitlines()[-lines:])
            for proc in self.procs
        )

    def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
        until(lambda: " ready." in self.log(proc), timeout, f"worker {proc.pid} to start")

    def kill(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            proc.wait(timeout=30)

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc in self.procs if proc.poll() is None]

    def stop_all(self) -> None:
        for proc in self.alive():
            self.kill(proc, signal.SIGCONT)
            self.kill(proc)


def until(check: Callable[[], bool], timeout: float, what: str, every: float = 0.1) -> None:
    """Wait until ``check()`` is true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def runner(store: Store) -> FormulaRunner:
    return FormulaRunner(store, fault_tools.registry, search_paths=[FORMULAS])


def agent(store: Store) -> Agent:
    model = fault_model.model()
    return Agent(model=model, tools=fault_tools.registry, store=store, mode="react", leases=LeaseBook(store))


def submit_formula(store: Store, queue: RunQueue, name: str, **vars: object) -> str:
    run_id = runner(store).submit(name, vars)
    queue.enqueue(run_id)
    return run_id


def submit_agent(store: Store, queue: RunQueue, label: str) -> str:
    run_id = agent(store).submit(f"Please record the label {label} .")
    queue.enqueue(run_id)
    return run_id


def approve_open(store: Store, queue: RunQueue) -> int:
    """Approve every open interaction as a server with workers does; returns how many were approved."""
    import asyncio

    from plangate.engines import build
    from plangate.runs import Runs

    engines = build(store, fault_tools.registry, model=fault_model.model(), search_paths=[FORMULAS])
    runs = Runs(store, engines.registry, queue)  # answers committed here, the runs enqueued for workers
    approved = 0
    for interaction in store.list_interactions(status="open"):
        try:
            asyncio.run(runs.answer(interaction.id, Approve(), by="test"))
        except (StaleInteraction, RunLeased):
            continue  # answered meanwhile, or a worker is on the run: the next round tries again
        approved += 1
    return approved


def unfinished(store: Store, run_ids: list[str]) -> list[str]:
    return [run_id for run_id in run_ids if store.get_run(run_id).status not in TERMINAL_STATUSES]
