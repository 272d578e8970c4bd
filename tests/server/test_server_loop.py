"""The server never blocks its event loop on the store: another process holding SQLite's write lock for 3 s
delays neither the heartbeats of other runs' streams nor the requests that only read, nor do the writes the
server makes meanwhile (a run's commit, the renewal of a run's lease, a person's resolution), which wait for
the lock as they must.

Real parts only: a uvicorn server on 127.0.0.1, SSE clients reading live streams, and a second process that
takes the write lock with ``BEGIN IMMEDIATE`` while one of the server's runs has a commit to make (which
then waits for the lock, as it must). What is measured is the gap between two heartbeats a client receives (as
the server stamped them), against the heartbeat interval; on the code that committed on the event loop the
gap was the whole 3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import Message, SSEParser, bearer, live_server, make_token, wait_until

from plangate.models import ScriptedModel
from plangate.server import create_app
from plangate.store import Store
from plangate.tools import ToolRegistry, tool

pytestmark = pytest.mark.slow

HEARTBEAT = 0.25
LOCK_SECONDS = 3.0
# What "not delayed" allows beyond the heartbeat interval (the bound).
ALLOWED_DELAY = 0.1
# A lease this short is renewed every 2 s: at least once while the lock is held, and never lost meanwhile.
LEASE_TTL = 6.0

LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN IMMEDIATE")
print(time.time(), flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
print(time.time(), flush=True)
"""


class Listener:
    """Reads one SSE stream in a thread."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.messages: list[tuple[float, Message]] = []  # (when it arrived, monotonic clock; the message)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()

    def _read(self, url: str, headers: dict[str, str]) -> None:
        parser = SSEParser()
        with httpx.Client(timeout=30) as http, http.stream("GET", url, headers=headers) as response:
            try:
                for line in response.iter_lines():
                    message = parser.feed(line)
                    if message is not None:
                        self.messages.append((time.monotonic(), message))
                    if self._stop.is_set():
                        return
            except httpx.HTTPError:
                return  # the server stopped first (a failed test): what was read is what counts

    def heartbeats(self) -> list[float]:
        """When the server sent each heartbeat (its own clock, ``time.time()``: no client-side jitter)."""
        return [float(message.json()["at"]) for _, message in self.messages if message.event == "heartbeat"]

    def close(self) -> None:
        """Stop reading (at the next message: a heartbeat comes every ``HEARTBEAT`` seconds)."""
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT * 8)
        assert not self._thread.is_alive(), "the stream did not stop"


def _tools(release: threading.Event, started: list[float]) -> ToolRegistry:
    @tool
    async def survey() -> str:
        """Survey every room (until the test lets it finish)."""
        started.append(time.monotonic())
        while not release.is_set():  # noqa: ASYNC110  (set from the test's thread)
            await asyncio.sleep(0.005)
        return "surveyed"

    @tool(effect="write")
    def book(room: str) -> str:
        """Book a room."""
        return f"booked {room}"

    return ToolRegistry([survey, book])


def _call(name: str, **arguments: str) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


def _model() -> ScriptedModel:
    def answer(request: Any) -> str:
        prompt = "\n".join(message.content for message in request.messages)
        if request.purpose == "deliver":
            return "Done."
        if "surveyed" in prompt:
            return json.dumps({"action": "done", "speak": "Surveyed."})
        if "reserve-room-a" in prompt:
            return _call("book", room="A")
        return _call("survey")

    return ScriptedModel(answer)


@contextlib.contextmanager
def write_lock(store_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A second process that holds the store's write lock for ``LOCK_SECONDS`` (it prints when it takes the
    lock and when it lets go, as ``time.time()``)."""
    process = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(store_path), str(LOCK_SECONDS)], stdout=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()


def _max_gap(times: list[float], start: float, end: float) -> float:
    """The longest wait between two heartbeats (or the window's edges) around ``[start, end]``."""
    inside = [at for at in times if start - HEARTBEAT <= at <= end + HEARTBEAT]
    points = [start, *inside, end] if inside else [start, end]
    points.sort()
    return max(b - a for a, b in itertools.pairwise(points))


def test_a_held_write_lock_delays_no_heartbeat_and_no_read(store: Store, store_path: Path) -> None:
    release = threading.Event()
    started: list[float] = []
    token = make_token(store, "ana")
    app = create_app(store, _tools(release, started), model=_model(), heartbeat=HEARTBEAT)
    headers = bearer(token)
    listeners: list[Listener] = []
    try:
        with live_server(app) as url, httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            waiting = []
            for _ in range(2):
                body = {"kind": "agent", "prompt": "reserve-room-a", "mode": "react"}
                created = http.post("/v1/runs", json=body)
                waiting.append(created.json()["run"]["id"])
            for run_id in waiting:
                wait_until(lambda run_id=run_id: store.get_run(run_id).status == "waiting", what="consent")
            listeners = [Listener(f"{url}/v1/runs/{run_id}/events", headers) for run_id in waiting]
            wait_until(lambda: all(len(item.heartbeats()) >= 2 for item in listeners), what="heartbeats")
            # Started last, so that it ends well before its lease's first renewal (another test's subject).
            busy = http.post("/v1/runs", json={"kind": "agent", "prompt": "Survey", "mode": "react"})
            busy_id = busy.json()["run"]["id"]
            wait_until(lambda: bool(started), what="the survey to start")

            # The second process takes the write lock; then the busy run's tool ends and its commit must wait.
            with write_lock(store_path) as locker:
                assert locker.stdout is not None
                locked_at = float(locker.stdout.readline())
                lock_start = time.monotonic()
                release.set()
                reads = []
                while time.monotonic() - lock_start < LOCK_SECONDS - 0.5:
                    asked = time.monotonic()
                    response = http.get("/v1/runs", params={"status": "waiting"})  # the token lookup too
                    reads.append(time.monotonic() - asked)
                    assert response.status_code == 200 and len(response.json()["items"]) == 2
                    time.sleep(0.2)
                unlocked_at = float(locker.stdout.readline())
            wait_until(lambda: store.get_run(busy_id).status == "completed", what="the busy run to finish")
            time.sleep(HEARTBEAT * 3)
            for item in listeners:
                item.close()
    finally:
        release.set()

    # The lock was real and the busy run's commit waited for it: its tool's result is stored after the lock.
    results = [event for event in store.events(busy_id) if event.type == "tool_result"]
    assert results and results[0].at >= unlocked_at - 0.05
    assert unlocked_at - locked_at >= LOCK_SECONDS - 0.05
    for item in listeners:
        gap = _max_gap(item.heartbeats(), locked_at, unlocked_at)
        assert gap <= HEARTBEAT + ALLOWED_DELAY, f"a heartbeat came {gap:.3f} s after the previous one"
    assert max(reads) < LOCK_SECONDS / 3, f"a read took {max(reads):.3f} s while the lock was held"


def _waiting_runs(http: httpx.Client, store: Store, count: int) -> list[str]:
    """``count`` agent runs waiting for consent to their write."""
    waiting = []
    for _ in range(count):
        created = http.post("/v1/runs", json={"kind": "agent", "prompt": "reserve-room-a", "mode": "react"})
        waiting.append(created.json()["run"]["id"])
    for run_id in waiting:
        wait_until(lambda run_id=run_id: store.get_run(run_id).status == "waiting", what="consent")
    return waiting


def _booked(store: Store, run_id: str) -> bool:
    return any(event.type == "tool_result" for event in store.events(run_id))


def _renewed_at(store: Store, run_id: str) -> float:
    lease = store.get_lease(run_id)
    return 0.0 if lease is None else lease.expires_at - LEASE_TTL


def test_a_lease_renewal_during_a_held_write_lock_delays_no_heartbeat(store: Store, store_path: Path) -> None:
    release = threading.Event()
    started: list[float] = []
    token = make_token(store, "ana")
    app = create_app(store, _tools(release, started), model=_model(), heartbeat=HEARTBEAT)
    app.state.services.engines.leases.ttl = LEASE_TTL  # the book of every run this server advances
    headers = bearer(token)
    listener: Listener | None = None
    try:
        with live_server(app) as url, httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            (waiting,) = _waiting_runs(http, store, 1)
            listener = Listener(f"{url}/v1/runs/{waiting}/events", headers)
            wait_until(lambda: len(listener.heartbeats()) >= 2, what="heartbeats")
            busy = http.post("/v1/runs", json={"kind": "agent", "prompt": "Survey", "mode": "react"})
            busy_id = busy.json()["run"]["id"]
            wait_until(lambda: bool(started), what="the survey to start")

            # The busy run's tool is held for the whole lock: the only write its run makes meanwhile is the
            # renewal of its lease, due every LEASE_TTL / 3 seconds, so at least once inside the lock.
            with write_lock(store_path) as locker:
                assert locker.stdout is not None
                locked_at = float(locker.stdout.readline())
                unlocked_at = float(locker.stdout.readline())
            # The renewal that fell due waited for the lock and was written as soon as it was let go.
            wait_until(lambda: _renewed_at(store, busy_id) >= unlocked_at - 0.05, within=1.0, what="renewal")
            release.set()
            wait_until(lambda: store.get_run(busy_id).status == "completed", what="the busy run to finish")
            time.sleep(HEARTBEAT * 3)
            listener.close()
    finally:
        release.set()

    assert unlocked_at - locked_at >= LOCK_SECONDS - 0.05
    gap = _max_gap(listener.heartbeats(), locked_at, unlocked_at)
    assert gap <= HEARTBEAT + ALLOWED_DELAY, f"a heartbeat came {gap:.3f} s after the previous one"


def test_a_resolution_during_a_held_write_lock_delays_no_heartbeat(store: Store, store_path: Path) -> None:
    token = make_token(store, "ana")
    app = create_app(store, _tools(threading.Event(), []), model=_model(), heartbeat=HEARTBEAT)
    headers = bearer(token)
    listeners: list[Listener] = []
    answered: list[tuple[float, int]] = []  # (when the response came, time.time(); its status)
    with live_server(app) as url, httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        resolved, watched = _waiting_runs(http, store, 2)
        interaction = http.get(f"/v1/runs/{resolved}").json()["interaction"]["id"]
        listeners = [Listener(f"{url}/v1/runs/{run_id}/events", headers) for run_id in (resolved, watched)]
        wait_until(lambda: all(len(item.heartbeats()) >= 2 for item in listeners), what="heartbeats")

        def approve() -> None:
            with httpx.Client(base_url=url, headers=headers, timeout=30) as other:
                response = other.post(f"/v1/interactions/{interaction}", json={"kind": "approve"})
                answered.append((time.time(), response.status_code))

        with write_lock(store_path) as locker:
            assert locker.stdout is not None
            locked_at = float(locker.stdout.readline())
            approving = threading.Thread(target=approve)
            approving.start()  # its lease and its commit wait for the lock; nothing else may
            unlocked_at = float(locker.stdout.readline())
        approving.join(timeout=20)
        # The approved call ran; the scripted model then asks to book again, so the run waits once more.
        wait_until(lambda: _booked(store, resolved), what="the approved call")
        time.sleep(HEARTBEAT * 3)
        for item in listeners:
            item.close()

    assert unlocked_at - locked_at >= LOCK_SECONDS - 0.05
    ((answered_at, status),) = answered
    assert status == 200 and answered_at >= unlocked_at - 0.05  # committed once the lock was let go
    assert store.get_run(watched).status == "waiting"
    for item in listeners:
        gap = _max_gap(item.heartbeats(), locked_at, unlocked_at)
        assert gap <= HEARTBEAT + ALLOWED_DELAY, f"a heartbeat came {gap:.3f} s after the previous one"
