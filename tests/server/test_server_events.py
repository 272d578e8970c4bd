"""``GET /v1/runs/{id}/events``: SSE replay and cursors, JSON pages, and live streams that lose nothing.

The live tests drive the app in process (``AsgiStream``) and commit events straight into the store, so they
control exactly when each commit happens relative to the stream.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import AsgiStream, Message, idle, lifespan, parse_sse

from plangate.events import SpeakEvent, StatusEvent
from plangate.server.broadcast import Broadcaster, WireEvent, sse_frame
from plangate.store import Store

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coroutine)


def _speak(store: Store, run_id: str, *texts: str, status: Any = None) -> None:
    with store.transaction(run_id) as tx:
        for text in texts:
            tx.append(SpeakEvent(text=text))
        if status is not None:
            tx.set_status(status)


def _texts(messages: list[Message]) -> list[str]:
    return [message.json()["text"] for message in messages if message.event == "speak"]


def _finished_release(client: TestClient) -> str:
    run_id: str = client.post("/v1/runs", json=RELEASE).json()["run"]["id"]
    idle(client, run_id)
    interaction = client.get(f"/v1/runs/{run_id}").json()["interaction"]
    client.post(f"/v1/interactions/{interaction['id']}", json={"kind": "approve"})
    idle(client, run_id)
    return run_id


def test_a_finished_run_replays_every_event_with_its_seq_type_and_json_then_ends(
    client: TestClient, store: Store
) -> None:
    run_id = _finished_release(client)

    response = client.get(f"/v1/runs/{run_id}/events")

    assert response.headers["content-type"].startswith("text/event-stream")
    messages = parse_sse(response.text)
    stored = store.events(run_id)
    assert [(m.id, m.event) for m in messages[:-1]] == [(str(e.seq), e.type) for e in stored]
    # as stored, but an outcome's internal_reason stays in the store (SPEC §7)
    assert [m.json() for m in messages[:-1]] == [
        json.loads(e.model_dump_json(exclude={"internal_reason"} if e.type == "outcome" else None))
        for e in stored
    ]
    assert (messages[-1].event, messages[-1].id) == ("end", None)
    # one shape for every run's end (SPEC §7): the agent's outcome fields, internal_reason left out
    assert messages[-2].event == "outcome"
    assert messages[-1].json() == {
        "type": "end",
        "run_id": run_id,
        "status": "completed",
        "outcome": {
            "status": "completed",
            "stage": "run",
            "code": "done",
            "user_message": "all 4 steps finished",
        },
    }


def test_replay_starts_after_the_cursor_and_last_event_id_wins_over_after(
    client: TestClient, store: Store
) -> None:
    run_id = _finished_release(client)
    last = store.last_seq(run_id)

    after = parse_sse(client.get(f"/v1/runs/{run_id}/events", params={"after": 5}).text)
    resumed = parse_sse(
        client.get(f"/v1/runs/{run_id}/events", params={"after": 1}, headers={"Last-Event-ID": "9"}).text
    )
    at_end = parse_sse(client.get(f"/v1/runs/{run_id}/events", params={"after": last}).text)

    assert [m.id for m in after[:-1]] == [str(seq) for seq in range(6, last + 1)]
    assert [m.id for m in resumed[:-1]] == [str(seq) for seq in range(10, last + 1)]
    assert [m.event for m in at_end] == ["end"]


@pytest.mark.parametrize("cursor", ["abc", "-1", "1.5", "99999", "１２"])
def test_an_invalid_cursor_is_a_400(client: TestClient, cursor: str) -> None:
    run_id = _finished_release(client)

    by_query = client.get(f"/v1/runs/{run_id}/events", params={"after": cursor})
    by_header = client.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": cursor.encode()})

    for response in (by_query, by_header):
        assert response.status_code == 400
        assert response.json()["type"] == "urn:plangate:problem:invalid-cursor"


def test_the_json_format_is_a_plain_page(client: TestClient, store: Store) -> None:
    run_id = _finished_release(client)

    page = client.get(f"/v1/runs/{run_id}/events", params={"format": "json", "after": 2, "limit": 3}).json()

    assert [item["seq"] for item in page["items"]] == [3, 4, 5]
    assert page["items"][0] == json.loads(store.events(run_id, after=2, limit=1)[0].model_dump_json())
    assert page["last_seq"] == store.last_seq(run_id)


def test_a_subscriber_that_connects_mid_stream_gets_every_event_once_in_order(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    run = store.create_run("agent", "chatty", {})
    app = make_app(auth=False)
    total = 300

    async def scenario() -> None:
        async with lifespan(app):
            # A producer in another thread commits one event per transaction while the stream connects.
            started = threading.Event()

            def produce() -> None:
                for n in range(total):
                    _speak(store, run.id, str(n))
                    if n == 20:
                        started.set()
                _speak(store, run.id, status="completed")

            producer = threading.Thread(target=produce)
            producer.start()
            await asyncio.to_thread(started.wait)
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                messages = await stream.until("end")
            await asyncio.to_thread(producer.join)
        assert _texts(messages) == [str(n) for n in range(total)]
        ids = [int(m.id) for m in messages if m.id is not None]
        assert ids == list(range(1, total + 1))

    _run(scenario())


def test_commits_announced_out_of_order_are_sent_in_order_once(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    run = store.create_run("agent", "racing", {})
    _speak(store, run.id, "first")
    app = make_app(auth=False)

    async def scenario() -> None:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                assert _texts([await stream.next_message()]) == ["first"]
                # Committed from another thread, this one is announced through the loop's queue, later...
                committer = threading.Thread(target=_speak, args=(store, run.id, "second"))
                committer.start()
                committer.join()
                # ...than this one, committed on the loop's thread and announced at once.
                _speak(store, run.id, "third", status="completed")
                messages = await stream.until("end")
        assert _texts(messages) == ["second", "third"]
        assert [m.id for m in messages if m.id] == ["2", "3"]

    _run(scenario())


def test_a_subscriber_too_far_behind_catches_up_from_the_store_without_loss(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    run = store.create_run("agent", "flood", {})
    # A heartbeat far away: the catch-up must not wait for it.
    app = make_app(auth=False, heartbeat=60)
    services = app.state.services
    services.broadcaster = Broadcaster(store, heartbeat=60, max_pending=3)

    async def scenario() -> None:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                assert await stream.started() == 200
                assert services.broadcaster.subscriber_count(run.id) == 1
                # 48 commits before the stream gets a chance to read: its queue overflows every fourth one,
                # the last (the run's end) included.
                for n in range(47):
                    _speak(store, run.id, str(n))
                _speak(store, run.id, status="completed")
                messages = await stream.until("end")
        assert _texts(messages) == [str(n) for n in range(47)]
        assert [m.event for m in messages].count("heartbeat") == 0

    _run(scenario())


def test_a_waiting_run_keeps_its_stream_open_with_heartbeats_until_it_ends(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    run = store.create_run("agent", "patient", {})
    _speak(store, run.id, "asking", status="waiting")
    app = make_app(auth=False, heartbeat=0.02)

    async def scenario() -> None:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                first = await stream.until("heartbeat")
                beat = first[-1]
                _speak(store, run.id, "answered", status="completed")
                rest = await stream.until("end")
        assert _texts(first) == ["asking"]
        assert beat.id is None
        # typed like every event, and without a seq: a heartbeat is not part of the run's log
        assert beat.json()["type"] == "heartbeat" and "seq" not in beat.json()
        assert beat.json()["run_id"] == run.id and beat.json()["last_seq"] == 1
        assert _texts(rest) == ["answered"]
        assert rest[-1].json()["status"] == "completed"

    _run(scenario())


def test_commits_made_by_another_process_reach_the_stream_at_the_next_heartbeat(
    make_app: Callable[..., FastAPI], store: Store, store_path: Any
) -> None:
    from plangate.store import SQLiteStore

    run = store.create_run("agent", "elsewhere", {})
    _speak(store, run.id, "here", status="running")
    app = make_app(auth=False, heartbeat=0.02)

    async def scenario() -> None:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                await stream.next_message()
                # Another store object on the same file stands for another process: no announcement.
                other = SQLiteStore(store_path)
                try:
                    _speak(other, run.id, "there")
                    with other.transaction(run.id) as tx:
                        tx.append(StatusEvent(stage="run", code="completed"))
                        tx.set_status("completed")
                finally:
                    other.close()
                rest = await stream.until("end")
        assert _texts(rest) == ["there"]
        assert rest[-1].json()["status"] == "completed"

    _run(scenario())


def test_the_subscription_is_released_when_the_client_leaves(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    run = store.create_run("agent", "left", {})
    _speak(store, run.id, "hello", status="waiting")
    app = make_app(auth=False)
    broadcaster = app.state.services.broadcaster

    async def scenario() -> None:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                await stream.next_message()
                assert broadcaster.subscriber_count(run.id) == 1
            assert broadcaster.subscriber_count(run.id) == 0

    _run(scenario())


def test_the_frames_are_byte_for_byte_what_clients_parse() -> None:
    event = SpeakEvent(run_id="run_1", seq=7, at=1.5, text="héllo\nworld")
    assert WireEvent.of(event).frame == (
        'id: 7\nevent: speak\n'
        'data: {"run_id":"run_1","seq":7,"at":1.5,"type":"speak","text":"héllo\\nworld"}\n\n'
    ).encode()
    assert sse_frame("end", '{"type":"end","status":"completed"}') == (
        b'event: end\ndata: {"type":"end","status":"completed"}\n\n'
    )
