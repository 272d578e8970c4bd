"""Schedules fired by two real ``plangate serve`` processes on one PostgreSQL store, a 1-second schedule
each: exactly one run per slot while both run; both SIGKILLed and one restarted more than the grace later,
the slots missed meanwhile (older than the grace) follow each schedule's policy (``skip``: none of them
runs; ``catch_up``: one run stands for them all, said in its input), the later ones run."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from server_helpers import free_port

from plangate.runs.scheduler import GRACE
from plangate.store import open_store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "formulas"
PLANGATE = str(Path(sys.executable).parent / "plangate")


def _plangate(url: str, cwd: Path, *args: str) -> None:
    subprocess.run([PLANGATE, *args, "--store", url], cwd=cwd, check=True, capture_output=True, timeout=60)


@contextmanager
def _servers(url: str, cwd: Path, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` servers on the store at ``url``, started together; yields once every one is ready."""
    ports = [free_port() for _ in range(count)]
    servers = []
    for port in ports:
        args = [PLANGATE, "serve", "--store", url, "--no-auth", "--port", str(port), "--log-level", "warning"]
        args += ["--tools", f"{EXAMPLES / 'tools.py'}:registry", "--path", str(HERE / "schedules")]
        servers.append(subprocess.Popen(args, cwd=cwd, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 90
        for port, server in zip(ports, servers, strict=True):
            while True:
                assert server.poll() is None, "a server stopped during start-up"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the servers did not start within 90 s"
                time.sleep(0.1)
        yield servers
    finally:
        for server in servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)


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


@pytest.mark.timeout(240)
def test_two_servers_fire_each_slot_once_and_a_restart_follows_the_policy(
    postgres_url: str, tmp_path: Path
) -> None:
    for name, policy in (("skipper", "skip"), ("catcher", "catch_up")):
        _plangate(
            postgres_url,
            tmp_path,
            "schedule",
            "add",
            "nightly",
            "--every",
            "1s",
            "--name",
            name,
            "--missed",
            policy,
            "--overlap",
            "allow",
        )
    with _servers(postgres_url, tmp_path, 2) as servers:
        time.sleep(10)
        for server in servers:
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=10)
    before = _slots(postgres_url)
    time.sleep(GRACE + 2)  # every slot of the pause is missed by the time a server looks again
    with _servers(postgres_url, tmp_path, 1):
        time.sleep(4)
    after = _slots(postgres_url)

    for name in ("skipper", "catcher"):
        slots = [slot for slot, _ in before[name]]
        assert len(slots) == len(set(slots)), f"{name}: a slot ran twice"
        assert len(slots) >= 5, f"{name}: {slots}"
        # while both servers ran, every slot ran once: no gap
        assert slots == [slots[0] + n for n in range(len(slots))], f"{name}: {slots}"
        later = [slot for slot, _ in after[name]]
        assert len(later) == len(set(later)), f"{name}: a slot ran twice after the restart"
    last_skipper = before["skipper"][-1][0]
    resumed = [slot for slot, _ in after["skipper"] if slot > last_skipper]
    assert resumed and all(missed == 0 for _, missed in after["skipper"]), after["skipper"]
    assert resumed[0] - last_skipper >= 2, f"the skipper ran every missed slot: {after['skipper']}"
    last_catcher = before["catcher"][-1][0]
    # (the first pass of all may catch up too: the schedule was added before the servers started)
    caught = [(slot, missed) for slot, missed in after["catcher"] if missed and slot > last_catcher]
    assert len(caught) == 1, after["catcher"]
    slot, missed = caught[0]
    assert slot > last_catcher and 1 <= missed <= slot - last_catcher, (caught, last_catcher)
    resumed = [s for s, _ in after["catcher"] if s > last_catcher]
    assert resumed == [slot + n for n in range(len(resumed))], f"catcher: {after['catcher']}"
