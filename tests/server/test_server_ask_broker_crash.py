"""A copilot turn on a server that hands its runs to workers is leased like every run, and a server SIGKILLed
mid-turn leaves it to the next start, which ends it with an outcome — never left ``running`` (real server
processes, real PostgreSQL store, real Redis broker; no worker takes it)."""

from __future__ import annotations

import os
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

from plangate.copilot._conversations import Conversations
from plangate.events import OutcomeEvent
from plangate.store import TERMINAL_STATUSES, open_store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


@contextmanager
def serving(
    store_url: str, broker: str, marker: Path, *, hang: bool
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, str(HERE / "ask_server.py"), store_url, broker, str(port), str(marker)]
    server = subprocess.Popen([*args, *(["hang"] if hang else [])], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, "the server stopped during start-up"
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start within 60 s"
            time.sleep(0.1)
        yield base, server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def test_a_turn_cut_off_by_a_killed_server_with_workers_ends_at_its_next_start(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "answering"
    store = open_store(postgres_url)
    try:
        with serving(postgres_url, redis_url, marker, hang=True) as (base, server):
            question = {"question": "How many orders are there?"}
            started = httpx.post(f"{base}/v1/ask", json=question, timeout=30)
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert time.monotonic() < deadline, "the turn never reached its answer step"
                time.sleep(0.05)
            run = store.get_run(run_id)
            assert run.status == "running"
            assert run.lease_owner is not None and run.lease_expires_at is not None  # held, like every run
            assert run.lease_expires_at > time.time()
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)
        assert store.get_run(run_id).status == "running"  # cut off: nothing ended it

        with serving(postgres_url, redis_url, marker, hang=False):
            deadline = time.monotonic() + 30
            while store.get_run(run_id).status not in TERMINAL_STATUSES:
                assert time.monotonic() < deadline, "the next start did not end the turn within 30 s"
                time.sleep(0.1)

        ended = store.get_run(run_id)
        assert ended.status == "failed" and ended.outcome is not None
        assert isinstance(store.events(run_id)[-1], OutcomeEvent)
        turn = Conversations(store).find_turn(run_id)
        assert turn is not None and turn.status == "failed"
        assert turn.reason == "the turn was interrupted: its process stopped before it finished"
        for child in store.list_runs(parent_run_id=run_id).items:
            assert child.status in TERMINAL_STATUSES  # its formula run ended with it
    finally:
        store.close()
