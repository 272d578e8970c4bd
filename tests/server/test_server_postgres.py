"""The server on a PostgreSQL store: a run created, streamed over SSE and resolved; and streams that follow,
at once, the commits that another server or another process makes (``LISTEN/NOTIFY``), not at the next
heartbeat.

The heartbeat of the streaming server is set far above the time each test allows, so that only a commit
notice can bring another process's events in time.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import httpx
import pytest
from server_helpers import (
    EXAMPLES,
    AsgiStream,
    Message,
    SSEParser,
    bearer,
    example_tools,
    lifespan,
    live_server,
    make_token,
)

from plangate.server import create_app
from plangate.store.postgres import PostgresStore

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("workdir")]  # the example tools write in the cwd

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "3.1.4"}}
NEVER = 600.0  # a heartbeat no test waits for


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    yield store
    store.close()


def _messages(response: httpx.Response) -> Iterator[Message]:
    parser = SSEParser()
    for line in response.iter_lines():
        message = parser.feed(line)
        if message is not None:
            yield message


def _follow_and_approve(stream_with: httpx.Client, act_with: httpx.Client, run_id: str) -> list[Message]:
    seen: list[Message] = []
    with stream_with.stream("GET", f"/v1/runs/{run_id}/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for message in _messages(response):
            seen.append(message)
            if message.event == "interaction_opened":
                answer = act_with.post(
                    f"/v1/interactions/{message.json()['interaction_id']}", json={"kind": "approve"}
                )
                assert answer.status_code == 200
            if message.event == "end":
                break
    return seen


def _assert_whole(seen: list[Message], store: PostgresStore, run_id: str) -> None:
    ids = [int(m.id) for m in seen if m.id is not None]
    assert ids == list(range(1, len(ids) + 1))
    assert ids[-1] == store.last_seq(run_id)
    types = [m.event for m in seen]
    assert types.index("interaction_opened") < types.index("interaction_resolved")
    assert seen[-1].event == "end" and seen[-1].json()["status"] == "completed"
    assert store.get_run(run_id).status == "completed"


def test_a_release_is_created_streamed_and_approved_on_a_postgres_store(pg: PostgresStore) -> None:
    token = make_token(pg, "ops")
    app = create_app(pg, example_tools(), search_paths=[EXAMPLES])
    with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:
        run_id = http.post("/v1/runs", json=RELEASE).json()["run"]["id"]
        seen = _follow_and_approve(http, http, run_id)
    _assert_whole(seen, pg, run_id)


def test_a_server_streams_at_once_the_run_another_server_executes(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as watching, PostgresStore(postgres_url) as working:
        token = make_token(working, "ops")
        watcher = create_app(watching, example_tools(), search_paths=[EXAMPLES], heartbeat=NEVER)
        worker = create_app(working, example_tools(), search_paths=[EXAMPLES])
        with (
            live_server(watcher) as watcher_url,
            live_server(worker) as worker_url,
            # A read that waits 15 s for the next message fails: only a commit notice is that quick.
            httpx.Client(base_url=watcher_url, headers=bearer(token), timeout=15) as watch,
            httpx.Client(base_url=worker_url, headers=bearer(token), timeout=15) as work,
        ):
            run_id = work.post("/v1/runs", json=RELEASE).json()["run"]["id"]
            seen = _follow_and_approve(watch, work, run_id)
        _assert_whole(seen, watching, run_id)


_WRITER = textwrap.dedent(
    """
    import sys
    from plangate.events import SpeakEvent, StatusEvent
    from plangate.store import open_store

    store = open_store(sys.argv[1])
    for index in range(5):
        with store.transaction(sys.argv[2]) as tx:
            tx.append(SpeakEvent(text=f"from another process {index}"))
    with store.transaction(sys.argv[2]) as tx:
        tx.append(StatusEvent(stage="run", code="completed"))
        tx.set_status("completed")
    store.close()
    """
)


def test_commits_of_another_process_reach_the_stream_before_any_heartbeat(
    pg: PostgresStore, postgres_url: str
) -> None:
    run = pg.create_run("agent", "elsewhere", {})
    app = create_app(pg, example_tools(), auth=False, heartbeat=NEVER)

    async def scenario() -> list[Message]:
        async with lifespan(app):
            async with AsgiStream(app, f"/v1/runs/{run.id}/events") as stream:
                writer = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", _WRITER, postgres_url, run.id, stderr=subprocess.PIPE
                )
                _, err = await writer.communicate()
                assert writer.returncode == 0, err.decode()
                return await stream.until("end", within=15)

    messages = asyncio.run(scenario())
    texts = [m.json()["text"] for m in messages if m.event == "speak"]
    assert texts == [f"from another process {index}" for index in range(5)]
    assert [int(m.id) for m in messages if m.id is not None] == list(range(1, 7))
    assert messages[-1].json()["status"] == "completed"
