"""Schedules fired by every process on the store, none special: two ``plangate serve --broker`` and two
``plangate worker`` processes on one PostgreSQL store, two 1-second schedules for 20 s, one server
SIGKILLed and started again halfway: exactly one run per slot and no gap. Then every process is SIGKILLed
and, more than the grace later, a worker alone is started: it fires the schedules, and the slots missed
meanwhile follow each one's policy (``skip``: none of them runs; ``catch_up``: one run stands for them all,
said in its input)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from plangate.runs.scheduler import GRACE
from plangate.store import open_store

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]
TOOLS = f"{REPO / 'examples' / 'formulas' / 'tools.py'}:registry"
FORMULAS = REPO / "tests" / "server" / "schedules"
PLANGATE = str(Path(sys.executable).parent / "plangate")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Fleet:
    """Servers and workers on one store and broker, each a process group logging to a file of its own."""

    def __init__(self, store: str, broker: str, folder: Path) -> None:
        self.store, self.broker, self.folder = store, broker, folder
        self.procs: list[subprocess.Popen[bytes]] = []

    def _start(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        args += ["--store", self.store, "--broker", self.broker, "--tools", TOOLS, "--path", str(FORMULAS)]
        with open(self.folder / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                args, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append(proc)
        return proc

    def server(self) -> str:
        port = _free_port()
        args = [PLANGATE, "serve", "--no-auth", "--port", str(port), "--log-level", "warning"]
        proc = self._start(args, f"server-{port}")
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "a server stopped during start-up"
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "a server did not start within 90 s"
            time.sleep(0.1)

    def worker(self, name: str) -> None:
        proc = self._start([PLANGATE, "worker", "--concurrency", "1", "--loglevel", "info"], name)
        deadline = time.monotonic() + 90
        while b" ready." not in (self.folder / f"{name}.log").read_bytes():
            assert proc.poll() is None, "a worker stopped during start-up"
            assert time.monotonic() < deadline, "a worker did not start within 90 s"
            time.sleep(0.1)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def kill_all(self) -> None:
        for proc in self.procs:
            self.kill(proc)


def _slots(url: str) -> dict[str, list[tuple[float, int]]]:
    """Each schedule's runs as (slot, missed), by schedule name, oldest first."""
    store = open_store(url)
    try:
        found: dict[str, list[tuple[float, int]]] = {}
        for run in store.list_runs(limit=1000).items:
            origin = run.input["schedule"]
            assert isinstance(origin, dict)
            slot = dt.datetime.fromisoformat(str(origin["slot"])).timestamp()
            found.setdefault(str(origin["name"]), []).append((slot, int(str(origin["missed"]))))
    finally:
        store.close()
    return {name: sorted(runs) for name, runs in found.items()}


@pytest.mark.timeout(300)
def test_servers_and_workers_fire_each_slot_once_and_missed_slots_follow_the_policy(
    postgres_url: str, broker: str, tmp_path: Path
) -> None:
    for name, policy in (("skipper", "skip"), ("catcher", "catch_up")):
        args = [PLANGATE, "schedule", "add", "nightly", "--every", "1s", "--name", name]
        args += ["--missed", policy, "--overlap", "allow", "--store", postgres_url]
        subprocess.run(args, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    fleet = Fleet(postgres_url, broker, tmp_path)
    try:
        fleet.server()
        fleet.server()
        fleet.worker("worker-1")
        fleet.worker("worker-2")
        time.sleep(10)
        fleet.kill(fleet.procs[0])  # a server dies and is started again; the others go on
        fleet.server()
        time.sleep(10)
        fleet.kill_all()
        before = _slots(postgres_url)
        time.sleep(GRACE + 2)  # every slot of the pause is missed by the time a process looks again
        fleet.worker("worker-3")  # a worker alone fires them
        time.sleep(4)
    finally:
        fleet.kill_all()
    after = _slots(postgres_url)

    for name in ("skipper", "catcher"):
        slots = [slot for slot, _ in before[name]]
        assert len(slots) == len(set(slots)), f"{name}: a slot ran twice"
        assert len(slots) >= 15, f"{name}: {slots}"
        # while the servers and workers ran, one of them dying included, every slot ran once: no gap
        assert slots == [slots[0] + n for n in range(len(slots))], f"{name}: {slots}"
        later = [slot for slot, _ in after[name]]
        assert len(later) == len(set(later)), f"{name}: a slot ran twice after the restart"
    last_skipper = before["skipper"][-1][0]
    resumed = [slot for slot, _ in after["skipper"] if slot > last_skipper]
    assert resumed and all(missed == 0 for _, missed in after["skipper"]), after["skipper"]
    assert resumed[0] - last_skipper >= 2, f"the skipper ran every missed slot: {after['skipper']}"
    last_catcher = before["catcher"][-1][0]
    # (the first pass of all may catch up too: the schedules were added before anything started)
    caught = [(slot, missed) for slot, missed in after["catcher"] if missed and slot > last_catcher]
    assert len(caught) == 1, after["catcher"]
    slot, missed = caught[0]
    assert slot > last_catcher and 1 <= missed <= slot - last_catcher, (caught, last_catcher)
    resumed = [s for s, _ in after["catcher"] if s > last_catcher]
    assert resumed == [slot + n for n in range(len(resumed))], f"catcher: {after['catcher']}"
