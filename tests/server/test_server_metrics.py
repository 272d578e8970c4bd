"""GET /metrics: Prometheus counts of the runs this process advanced, behind the API's token; JSON log lines
that name their run."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from server_helpers import EXAMPLES, bearer, example_tools, idle, live_server, make_token, wait_until

from plangate.agent import Agent
from plangate.models import ScriptedModel
from plangate.runs.telemetry.logs import JsonFormatter
from plangate.server import create_app
from plangate.store import SQLiteStore, Store
from plangate.tools import ToolRegistry, tool


@tool
def rooms() -> list[str]:
    """The rooms there are."""
    return ["Blue", "Red"]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _scrape(client: TestClient, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


def test_metrics_count_an_agent_runs_start_end_rounds_tools_and_tokens(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    call = json.dumps({"action": "continue", "tool_call": {"name": "rooms", "arguments": {}}})
    done = json.dumps({"action": "done", "speak": "Two rooms."})
    model = ScriptedModel([call, done, "There are two rooms."])
    app = make_app(tools=ToolRegistry([rooms]), model=model)
    token = make_token(store, "alice")
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 401  # the API's token, as every route but the probes
        before = _scrape(client, **bearer(token))
        response = client.post(
            "/v1/runs", json={"kind": "agent", "prompt": "rooms?", "mode": "react"}, headers=bearer(token)
        )
        assert response.status_code == 201, response.text
        idle(client, response.json()["run"]["id"])
        after = _scrape(client, **bearer(token))

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("plangate_runs_started_total", kind="agent") == 1
    assert delta("plangate_runs_ended_total", kind="agent", status="completed", code="done") == 1
    assert delta("plangate_rounds_total", kind="agent") == 2
    assert delta("plangate_tool_calls_total", tool="rooms", status="done") == 1
    assert delta("plangate_model_seconds_count", model="scripted", purpose="execute") == 2
    assert delta("plangate_model_seconds_count", model="scripted", purpose="deliver") == 1
    prompt = sum(sum(-(-len(m.content) // 4) for m in request.messages) for request in model.requests)
    assert delta("plangate_model_tokens_total", model="scripted", type="input") == prompt
    assert ("plangate_sse_subscribers", ()) in after


def test_json_log_lines_name_the_run_they_are_about() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("plangate")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        call = json.dumps({"action": "continue", "tool_call": {"name": "rooms", "arguments": {}}})
        agent = Agent(
            ScriptedModel([call, call]), ToolRegistry([rooms]), SQLiteStore(":memory:"), max_tokens=1
        )
        result = agent.run("rooms?")
        logging.getLogger("plangate.elsewhere").info("outside any run")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    ended = [line for line in lines if "ended exhausted" in line["message"]]
    assert ended and ended[0]["run_id"] == result.run_id and ended[0]["level"] == "info"
    assert lines[-1]["message"] == "outside any run" and lines[-1]["run_id"] is None


def test_metrics_count_a_persons_answer_and_the_time_it_took(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    app = make_app()
    token = make_token(store, "alice")
    release = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}
    with TestClient(app) as client:
        before = _scrape(client, **bearer(token))
        response = client.post("/v1/runs", json=release, headers=bearer(token))
        assert response.status_code == 201, response.text
        run_id = response.json()["run"]["id"]
        idle(client, run_id)
        interaction = client.get(f"/v1/runs/{run_id}", headers=bearer(token)).json()["interaction"]
        assert interaction is not None
        answered = client.post(
            f"/v1/interactions/{interaction['id']}", json={"kind": "approve"}, headers=bearer(token)
        )
        assert answered.status_code == 200, answered.text
        idle(client, run_id)
        after = _scrape(client, **bearer(token))

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    kind = interaction["kind"]
    assert delta("plangate_consents_total", kind=kind, resolution="approve") == 1
    assert delta("plangate_wait_seconds_count", kind=kind) == 1
    assert delta("plangate_wait_seconds_sum", kind=kind) > 0
    assert delta("plangate_runs_ended_total", kind="formula", status="completed", code="done") == 1


def test_a_server_with_workers_serves_the_queue_depth(
    make_app: Callable[..., FastAPI], store: Store, redis_url: str
) -> None:
    import redis

    client_of_redis = redis.Redis.from_url(redis_url)
    client_of_redis.flushdb()  # no message of an earlier test
    client_of_redis.close()
    app = make_app(broker=redis_url)
    token = make_token(store, "alice")
    release = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}
    with TestClient(app) as client:
        assert _scrape(client, **bearer(token))[("plangate_queue_depth", ())] == 0
        for _ in range(2):  # no worker runs: both stay in the queue
            response = client.post("/v1/runs", json=release, headers=bearer(token))
            assert response.status_code == 201, response.text
        assert _scrape(client, **bearer(token))[("plangate_queue_depth", ())] == 2


def test_the_open_event_streams_are_counted_on_a_live_server(store: Store) -> None:
    token = make_token(store, "ops")
    app = create_app(store, example_tools(), search_paths=[EXAMPLES])
    release = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}
    with live_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http:

        def subscribers() -> float:
            return _samples(http.get("/metrics").text)[("plangate_sse_subscribers", ())]

        run_id = http.post("/v1/runs", json=release).json()["run"]["id"]
        assert subscribers() == 0
        with httpx.Client(base_url=url, headers=bearer(token), timeout=30) as listener:
            with listener.stream("GET", f"/v1/runs/{run_id}/events") as response:
                lines = response.iter_lines()  # kept: a line iterator let go closes the stream
                assert next(lines) == "id: 1"  # the stream is open and sending
                assert subscribers() == 1
        wait_until(lambda: subscribers() == 0, what="the closed stream to be let go")
