"""A copilot turn through the API on a real uvicorn server: started, watched over SSE by a client that
leaves half way (the turn goes on without it), picked up again from its last event; on both store backends
(SQLite, and the PostgreSQL fixture of ``tests/services_plugin.py``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ask_helpers import ANSWER, QUESTION, CopilotScript
from server_helpers import Message, SSEParser, example_tools, live_server

from plangate.copilot._conversations import Conversations
from plangate.server import create_app
from plangate.store import open_store

pytestmark = pytest.mark.slow


def _messages(response: httpx.Response) -> Iterator[Message]:
    parser = SSEParser()
    for line in response.iter_lines():
        message = parser.feed(line)
        if message is not None:
            yield message


def test_a_turn_on_a_live_server_survives_its_watcher_leaving(store_url: str, tmp_path: Path) -> None:
    hold = threading.Event()
    script = CopilotScript(hold=hold)
    store = open_store(store_url)
    try:
        app = create_app(
            store, example_tools(), auth=False, model=script.model, heartbeat=0.5, data_dirs=[tmp_path]
        )
        with live_server(app) as url, httpx.Client(base_url=url, timeout=20) as client:
            started = client.post("/v1/ask", json={"question": QUESTION})
            assert started.status_code == 202, started.text
            ids = started.json()
            # A page follows the turn's run, sees it start, and is closed while the model works.
            first: list[Message] = []
            with client.stream("GET", ids["events"]) as response:
                for message in _messages(response):
                    first.append(message)
                    if message.event == "status" and message.json().get("code") == "attempt":
                        break
            assert script.entered.wait(20)
            hold.set()

            # Later, another page picks the stream up from the last event it had, and reads to the end.
            last = max(int(m.id) for m in first if m.id)
            rest: list[Message] = []
            with client.stream("GET", ids["events"], headers={"Last-Event-ID": str(last)}) as response:
                for message in _messages(response):
                    rest.append(message)
                    if message.event == "end":
                        break
            seqs = [int(m.id) for m in first + rest if m.id]
            assert seqs == list(range(1, len(seqs) + 1))  # nothing lost, nothing twice
            kinds = [m.event for m in rest]
            assert "op" in kinds and "review" in kinds and kinds[-2:] == ["outcome", "end"]
            assert rest[-1].json()["status"] == "completed"
            ops = [m.json()["op"]["op"] for m in rest if m.event == "op"]
            assert ops == ["plan", "add_step", "add_step", "done", "final"]

            turn = client.get(ids["turn"]).json()["turn"]
            assert (turn["status"], turn["answer"], turn["running"]) == ("done", ANSWER, False)
            assert [row[0] for row in turn["result"]["rows"]] == ["East", "West", "South"]
            conversations = client.get("/v1/conversations").json()["items"]
            assert [c["id"] for c in conversations] == [ids["conversation_id"]]
            shown = client.get(f"/v1/conversations/{ids['conversation_id']}").json()
            assert [t["status"] for t in shown["turns"]] == ["done"]
        assert Conversations(store).get_turn(ids["turn_id"]).status == "done"
    finally:
        store.close()


def test_a_turn_in_flight_when_the_server_stops_is_stored_whole(store_url: str, tmp_path: Path) -> None:
    hold = threading.Event()
    script = CopilotScript(hold=hold)
    store = open_store(store_url)
    try:
        app = create_app(store, example_tools(), auth=False, model=script.model, data_dirs=[tmp_path])
        with live_server(app) as url, httpx.Client(base_url=url, timeout=20) as client:
            ids = client.post("/v1/ask", json={"question": QUESTION}).json()
            assert script.entered.wait(20)
            threading.Timer(1.0, hold.set).start()  # the held model call returns once the server stops
        turn = Conversations(store).get_turn(ids["turn_id"])
        assert turn.status == "cancelled" and turn.attempts[-1].status == "cancelled"
        assert store.get_run(ids["run_id"]).status == "cancelled"
    finally:
        store.close()
