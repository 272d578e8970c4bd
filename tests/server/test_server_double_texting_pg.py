"""A second message to a conversation whose turn still runs, sent to another server on the same PostgreSQL
store ("double texting"): with ``reject`` it is a 409 and nothing is stored; with ``queue`` it waits
(``queued``) and its turn starts only once the first ended; with ``cancel`` the first turn (running on the
other server) ends cancelled and the new one runs after it. Never do two turns write the conversation at
once: each turn's time between its start and its outcome, read from its run's events, overlaps no other's.
Two real server processes; each turn's answer step takes 1.5 s."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import free_port

from plangate.events import OutcomeEvent, StatusEvent
from plangate.store import Store, open_store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
QUESTION = "How many orders are there?"


@contextmanager
def _servers(url: str, count: int) -> Iterator[list[str]]:
    ports = [free_port() for _ in range(count)]
    procs = [
        subprocess.Popen([sys.executable, str(HERE / "texting_server.py"), url, str(port)], cwd=HERE)
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        deadline = time.monotonic() + 60
        for base, proc in zip(bases, procs, strict=True):
            while True:
                assert proc.poll() is None, "a server stopped during start-up"
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the servers did not start within 60 s"
                time.sleep(0.1)
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


def _ask(base: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{base}/v1/ask", json={"question": QUESTION, **body}, timeout=30)


def _turn(base: str, turn_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        turn: dict[str, Any] = httpx.get(f"{base}/v1/turns/{turn_id}", timeout=10).json()["turn"]
        if not turn["running"]:
            return turn
        assert time.monotonic() < deadline, f"turn {turn_id} did not end within 60 s"
        time.sleep(0.1)


def _span(store: Store, run_id: str) -> tuple[float, float]:
    """When the turn's run started writing and when it ended (its ``started`` and ``outcome`` events)."""
    events = store.events(run_id)
    started = [e.at for e in events if isinstance(e, StatusEvent) and e.code == "started"]
    ended = [e.at for e in events if isinstance(e, OutcomeEvent)]
    return (started[0] if started else ended[0]), ended[0]


def _apart(store: Store, *run_ids: str) -> None:
    spans = sorted(_span(store, run_id) for run_id in run_ids)
    for before, after in itertools.pairwise(spans):
        assert after[0] >= before[1], f"two turns wrote the conversation at once: {spans}"


@pytest.mark.timeout(240)
def test_a_second_message_is_refused_queued_or_cancels_across_servers(postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        with _servers(postgres_url, 2) as (one, two):
            first = _ask(one).json()
            conversation = first["conversation_id"]
            refused = _ask(two, conversation_id=conversation, double_texting="reject")
            assert refused.status_code == 409, refused.text
            assert "has a turn that has not ended" in refused.json()["detail"]
            assert _turn(one, first["turn_id"])["status"] == "done"
            assert len(store.list_runs(kind="ask", limit=100).items) == 1  # the refused one stored nothing

            ahead = _ask(one, conversation_id=conversation).json()
            queued = _ask(two, conversation_id=conversation, double_texting="queue")
            assert queued.status_code == 202 and queued.json()["status"] == "queued"
            behind = queued.json()
            waiting = httpx.get(f"{two}/v1/turns/{behind['turn_id']}", timeout=10).json()["turn"]
            assert (waiting["status"], waiting["running"]) == ("queued", True)  # readable while it waits
            assert _turn(one, ahead["turn_id"])["status"] == "done"
            assert _turn(two, behind["turn_id"])["status"] == "done"
            said = [e for e in store.events(behind["run_id"]) if isinstance(e, StatusEvent)]
            assert said[0].code == "queued" and ahead["run_id"] in said[0].text

            running = _ask(one, conversation_id=conversation).json()
            time.sleep(0.5)  # under way on the first server
            cancelling = _ask(two, conversation_id=conversation, double_texting="cancel").json()
            assert _turn(one, running["turn_id"])["status"] == "cancelled"
            assert _turn(two, cancelling["turn_id"])["status"] == "done"

            turns = [first, ahead, behind, running, cancelling]
            _apart(store, *(turn["run_id"] for turn in turns))
            stored = httpx.get(f"{one}/v1/conversations/{conversation}", timeout=10).json()["turns"]
            assert [turn["status"] for turn in stored] == ["done", "done", "done", "cancelled", "done"]
    finally:
        store.close()
