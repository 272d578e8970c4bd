"""Against a real uvicorn server on 127.0.0.1, with a real SSE client reading live streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import (
    EXAMPLES,
    HOLD_FORMULA,
    Message,
    SSEParser,
    bearer,
    example_tools,
    hold_tools,
    live_server,
    make_token,
    wait_until,
    write_formula,
)

from plangate.server import create_app
from plangate.store import SQLiteStore, Store

pytestmark = pytest.mark.slow

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "3.1.4"}}


def _messages(response: httpx.Response) -> Iterator[Message]:
    parser = SSEParser()
    for line in response.iter_lines():
        message = parser.feed(line)
        if message is not None:
            yield message


def test_a_release_streams_live_is_approved_over_http_and_ends(store: Store) -> None:
    token = make_token(store, "ops")
    app = create_app(store, example_tools(), search_paths=[EXAMPLES])
    with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:
        run_id = http.post("/v1/runs", json=RELEASE).json()["run"]["id"]
        seen: list[Message] = []
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for message in _messages(response):
                seen.append(message)
                if message.event == "interaction_opened":
                    answer = http.post(
                        f"/v1/interactions/{message.json()['interaction_id']}", json={"kind": "approve"}
                    )
                    assert answer.status_code == 200
                if message.event == "end":
                    break
    ids = [int(m.id) for m in seen if m.id is not None]
    assert ids == list(range(1, len(ids) + 1))
    assert ids[-1] == store.last_seq(run_id)
    types = [m.event for m in seen]
    assert types.index("interaction_opened") < types.index("interaction_resolved")
    assert seen[-1].json()["status"] == "completed"
    assert store.get_run(run_id).status == "completed"


def test_last_event_id_resumes_with_exactly_the_missing_events(store: Store) -> None:
    token = make_token(store, "ops")
    app = create_app(store, example_tools(), search_paths=[EXAMPLES])
    with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:
        run_id = http.post("/v1/runs", json=RELEASE).json()["run"]["id"]
        first: list[Message] = []
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            for message in _messages(response):
                first.append(message)
                if message.event == "interaction_opened":
                    interaction_id = message.json()["interaction_id"]
                    break
        # Disconnected: the run moves on while nobody listens.
        http.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"})
        wait_until(lambda: store.get_run(run_id).status == "completed", what="the run to complete")
        last_id = first[-1].id
        assert last_id is not None
        with http.stream("GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": last_id}) as response:
            rest = list(_messages(response))
    stored = store.events(run_id)
    assert [m.id for m in first] == [str(e.seq) for e in stored[: len(first)]]
    assert [m.id for m in rest[:-1]] == [str(e.seq) for e in stored[len(first) :]]
    assert rest[-1].event == "end"


def test_a_running_run_continues_after_the_server_restarts(store_path: Path, workdir: Path) -> None:
    write_formula(workdir / "formulas", "slow", HOLD_FORMULA)
    hold = hold_tools()
    first_store = SQLiteStore(store_path)
    token = make_token(first_store, "ops")
    try:
        app = create_app(first_store, hold.registry)
        with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:
            run_id = http.post("/v1/runs", json={"kind": "formula", "formula": "slow"}).json()["run"]["id"]
            wait_until(lambda: len(hold.started) == 1, what="the hold step to start")
        assert first_store.get_run(run_id).status == "running"
    finally:
        first_store.close()

    hold.release.set()
    second_store = SQLiteStore(store_path)
    try:
        app = create_app(second_store, hold.registry)
        with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:
            with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
                messages = list(_messages(response))
    finally:
        second_store.close()
    assert messages[-1].json()["status"] == "completed"
    codes = [m.json().get("code") for m in messages if m.event == "status"]
    assert codes == ["started", "resumed", "completed"]
    assert len(hold.started) == 2  # interrupted by the stop, run again after the restart
