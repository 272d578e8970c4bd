"""Agent runs through the API: started in the background, consent answered over HTTP, recovered on restart."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import idle, parse_sse, wait_until

from plangate.agent import _execute
from plangate.config import BudgetConfig, ModelPrice
from plangate.events import StatusEvent
from plangate.models import ModelRequest, ModelUnavailableError, ScriptedModel
from plangate.store import Store
from plangate.tools import ToolRegistry, tool


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


def _done(speak: str) -> str:
    return json.dumps({"action": "done", "speak": speak})


class Rooms:
    """A ``book`` write tool and a ``rooms`` read tool, recording what was booked."""

    def __init__(self) -> None:
        self.booked: list[str] = []

        @tool(effect="write")
        def book(room: str) -> str:
            """Book a meeting room."""
            self.booked.append(room)
            return f"booked {room}"

        @tool
        def rooms() -> list[str]:
            """The rooms there are."""
            return ["Blue", "Red"]

        self.registry = ToolRegistry([book, rooms])


def _app(make_app: Callable[..., FastAPI], rooms: Rooms, script: list[str], **options: Any) -> FastAPI:
    return make_app(auth=False, tools=rooms.registry, model=ScriptedModel(script), **options)


def _agent_run(client: TestClient, **fields: Any) -> str:
    body = {"kind": "agent", "prompt": "Book the Blue room", "mode": "react", **fields}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["run"]["id"]
    idle(client, run_id)
    return run_id


def test_an_agent_write_waits_for_consent_and_approval_over_http_runs_it(
    make_app: Callable[..., FastAPI],
) -> None:
    rooms = Rooms()
    script = [_call("book", room="Blue"), _done("Booked."), "The Blue room is booked."]
    with TestClient(_app(make_app, rooms, script)) as client:
        run_id = _agent_run(client)
        shown = client.get(f"/v1/runs/{run_id}").json()
        assert shown["run"]["status"] == "waiting"
        assert "steps" not in shown
        interaction = shown["interaction"]
        assert interaction["kind"] == "confirm"
        assert (interaction["tool"]["name"], interaction["tool"]["arguments"]) == ("book", {"room": "Blue"})
        assert rooms.booked == []

        response = client.post(f"/v1/interactions/{interaction['id']}", json={"kind": "approve"})

        assert response.status_code == 200
        idle(client, run_id)
        run = client.get(f"/v1/runs/{run_id}").json()["run"]
        messages = parse_sse(client.get(f"/v1/runs/{run_id}/events").text)
    assert rooms.booked == ["Blue"]
    assert run["status"] == "completed"
    assert run["outcome"]["status"] == "completed"
    types = [message.event for message in messages]
    assert (
        types.index("interaction_opened") < types.index("interaction_resolved") < types.index("tool_result")
    )
    assert (types[-2], types[-1]) == ("outcome", "end")


def test_a_run_shows_its_usage_and_cost_and_a_budget_from_the_request_ends_it(
    make_app: Callable[..., FastAPI],
) -> None:
    rooms = Rooms()
    script = [_call("rooms"), _call("rooms"), _call("rooms"), _done("Seen."), "Seen."]
    prices = {"scripted": ModelPrice(input=3.0, output=15.0)}
    budget = BudgetConfig(max_tokens=100_000)
    with TestClient(_app(make_app, rooms, script, prices=prices, budget=budget)) as client:
        run_id = _agent_run(client, max_tokens=1)
        run = client.get(f"/v1/runs/{run_id}").json()["run"]
    assert run["status"] == "exhausted"
    outcome = run["outcome"]
    assert outcome["code"] == "budget_exhausted" and "max_tokens 1" in outcome["user_message"]
    usage = outcome["usage"]
    assert usage["calls"] == 1 and usage["models"]["scripted"]["calls"] == 1
    expected = (usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)
    assert "internal_reason" not in outcome


def test_max_cost_without_a_price_is_a_422(make_app: Callable[..., FastAPI], store: Store) -> None:
    with TestClient(_app(make_app, Rooms(), [])) as client:
        response = client.post("/v1/runs", json={"kind": "agent", "prompt": "x", "max_cost": 1.0})
    assert response.status_code == 422
    assert "max_cost: the model 'scripted' has no price" in response.json()["detail"]
    assert store.list_runs().items == []


def test_an_edit_runs_the_edited_call_and_a_bad_edit_is_a_422(make_app: Callable[..., FastAPI]) -> None:
    rooms = Rooms()
    script = [_call("book", room="Blue"), _done("Booked."), "The Red room is booked."]
    with TestClient(_app(make_app, rooms, script)) as client:
        run_id = _agent_run(client)
        interaction_id = client.get(f"/v1/runs/{run_id}").json()["interaction"]["id"]

        bad = client.post(
            f"/v1/interactions/{interaction_id}", json={"kind": "edit", "arguments": {"floor": 3}}
        )
        answer = client.post(f"/v1/interactions/{interaction_id}", json={"kind": "answer", "text": "yes"})
        good = client.post(
            f"/v1/interactions/{interaction_id}", json={"kind": "edit", "arguments": {"room": "Red"}}
        )

        assert bad.status_code == 422 and "do not fit its parameters" in bad.json()["detail"]
        assert answer.status_code == 422 and "found answer" in answer.json()["detail"]
        assert good.status_code == 200
        idle(client, run_id)
    assert rooms.booked == ["Red"]


def test_a_rejection_runs_nothing(make_app: Callable[..., FastAPI], store: Store) -> None:
    rooms = Rooms()
    script = [_call("book", room="Blue"), _done("Not booked."), "Nothing was booked."]
    with TestClient(_app(make_app, rooms, script)) as client:
        run_id = _agent_run(client)
        interaction_id = client.get(f"/v1/runs/{run_id}").json()["interaction"]["id"]

        client.post(f"/v1/interactions/{interaction_id}", json={"kind": "reject", "reason": "too big"})
        idle(client, run_id)

    assert rooms.booked == []
    assert store.get_run(run_id).status == "completed"
    assert store.get_interaction(interaction_id).resolution == {"kind": "reject", "reason": "too big"}


def test_a_run_gets_only_the_tools_its_request_names(make_app: Callable[..., FastAPI], store: Store) -> None:
    rooms = Rooms()
    script = [_call("book", room="Blue"), _done("Could not."), "I could not book it."]
    with TestClient(_app(make_app, rooms, script)) as client:
        run_id = _agent_run(client, tools=["rooms"], max_rounds=5)
    assert store.get_run(run_id).input["agent"]["tools"] == ["rooms"]  # type: ignore[index]
    assert rooms.booked == []


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"tools": ["rooms", "teleport"]}, "unknown tool 'teleport'"),
        ({"model": "nowhere:model-x"}, "unknown model provider 'nowhere'"),
    ],
)
def test_an_agent_run_that_cannot_start_is_a_422_and_nothing_is_stored(
    make_app: Callable[..., FastAPI], store: Store, fields: dict[str, Any], detail: str
) -> None:
    with TestClient(_app(make_app, Rooms(), [])) as client:
        response = client.post("/v1/runs", json={"kind": "agent", "prompt": "hello", **fields})

    assert response.status_code == 422
    assert detail in response.json()["detail"]
    assert store.list_runs().items == []


def test_a_request_never_names_a_model_file_on_the_server(
    make_app: Callable[..., FastAPI], store: Store, tmp_path: Path
) -> None:
    # Before, a run started on the file a request named, and for a file that was no model the 422 said what
    # the server read there, or that nothing was there: a client could read and probe the server's disk.
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps([_done("Read.")]), encoding="utf-8")
    files = [
        f"scripted:{responses}",
        "scripted:responses.json",
        " Scripted : /etc/passwd",
        f"local:{tmp_path / 'weights.gguf'}",
        "local:weights.gguf",
        "local:../weights",
    ]
    with TestClient(_app(make_app, Rooms(), [])) as client:
        for spec in files:
            for path, body in [
                ("/v1/runs", {"kind": "agent", "prompt": "hello", "model": spec}),
                ("/v1/ask", {"question": "Which region sold most?", "model": spec}),
                ("/v1/runs/run_nowhere/fork", {"at_round": 1, "model": spec}),
            ]:
                response = client.post(path, json=body)
                assert response.status_code == 422, (path, spec, response.text)
                detail = response.json()["detail"]
                assert "cannot name a model file on the server" in detail, detail
                assert str(tmp_path) not in detail and "passwd" not in detail, detail
    assert store.list_runs().items == []


def test_an_agent_runs_done_when_is_proven_by_its_receipt_over_http(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    # The script has no "done": only the runtime, checking the condition after the receipt, ends the rounds.
    script = [_call("rooms"), "There are the Blue and Red rooms."]
    with TestClient(_app(make_app, Rooms(), script)) as client:
        run_id = _agent_run(client, done_when="receipts.any(tool == 'rooms' and success)")
        run = client.get(f"/v1/runs/{run_id}").json()["run"]
    assert store.get_run(run_id).input["agent"]["done_when"] == "receipts.any(tool == 'rooms' and success)"  # type: ignore[index]
    assert run["status"] == "completed", run
    codes = [event.code for event in store.events(run_id) if isinstance(event, StatusEvent)]
    assert "proven" in codes


@pytest.mark.parametrize(
    ("done_when", "column", "says"),
    [
        ("receipts.any(tool == )", 22, "expected"),
        ("1 == 1", 1, "receipts"),
        ("receipts.any(colour == 'red')", 14, "colour"),
    ],
)
def test_a_bad_done_when_is_a_422_naming_the_field_and_the_column_and_nothing_is_stored(
    make_app: Callable[..., FastAPI], store: Store, done_when: str, column: int, says: str
) -> None:
    with TestClient(_app(make_app, Rooms(), [])) as client:
        response = client.post("/v1/runs", json={"kind": "agent", "prompt": "hello", "done_when": done_when})

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["detail"].startswith("done_when: ")
    assert says in problem["detail"]
    assert problem["errors"] == [{"field": "done_when", "message": problem["detail"][11:], "column": column}]
    assert store.list_runs().items == []


def test_cancelling_a_waiting_agent_run_expires_its_consent_request(make_app: Callable[..., FastAPI]) -> None:
    rooms = Rooms()
    with TestClient(_app(make_app, rooms, [_call("book", room="Blue")])) as client:
        run_id = _agent_run(client)
        interaction_id = client.get(f"/v1/runs/{run_id}").json()["interaction"]["id"]

        response = client.post(f"/v1/runs/{run_id}/cancel", json={"reason": "changed my mind"})
        late = client.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"})

    assert response.json()["run"]["status"] == "cancelled"
    assert late.status_code == 409
    assert rooms.booked == []


def test_the_end_of_an_agent_runs_stream_has_the_same_outcome_shape_as_a_formula_runs(
    make_app: Callable[..., FastAPI],
) -> None:
    rooms = Rooms()
    with TestClient(_app(make_app, rooms, [_call("book", room="Blue")])) as client:
        run_id = _agent_run(client)
        client.post(f"/v1/runs/{run_id}/cancel", json={"reason": "changed my mind"})
        messages = parse_sse(client.get(f"/v1/runs/{run_id}/events").text)

    end = messages[-1].json()
    assert (messages[-2].event, messages[-1].event) == ("outcome", "end")
    usage = end["outcome"].pop("usage")  # what it spent before it was cancelled, as a formula run's has
    assert usage["calls"] == 1
    assert end["outcome"] == {
        "status": "cancelled",
        "stage": "execute",
        "code": "cancelled",
        "user_message": "changed my mind",
    }


def test_a_running_agent_run_is_recovered_by_the_next_server(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    release = threading.Event()
    starts: list[int] = []

    @tool
    async def survey() -> str:
        """Look at every room (slow)."""
        starts.append(1)
        while not release.is_set():  # noqa: ASYNC110  (set by the test's thread; see hold_tools)
            await asyncio.sleep(0.005)
        return "surveyed all rooms"

    def script(request: ModelRequest) -> str:
        if request.purpose == "deliver":
            return "Survey finished."
        seen = "\n".join(message.content for message in request.messages)
        return _done("Done.") if "surveyed all rooms" in seen else _call("survey")

    model = ScriptedModel(script)
    registry = ToolRegistry([survey])
    try:
        with TestClient(make_app(auth=False, tools=registry, model=model)) as first:
            run_id = first.post(
                "/v1/runs", json={"kind": "agent", "prompt": "survey", "mode": "react"}
            ).json()["run"]["id"]
            wait_until(lambda: len(starts) == 1, what="the survey to start")
        # The first server stopped mid-tool: the run is left running.
        assert store.get_run(run_id).status == "running"
        release.set()
        with TestClient(make_app(auth=False, tools=registry, model=model)) as second:
            idle(second, run_id)
    finally:
        release.set()
    run = store.get_run(run_id)
    assert run.status == "completed"
    assert len(starts) == 2


def test_a_recovered_run_whose_phase_raises_ends_aborted_and_its_stream_ends(
    make_app: Callable[..., FastAPI], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    starts: list[int] = []

    @tool
    async def survey() -> str:
        """Look at every room (slow)."""
        starts.append(1)
        while not release.is_set():  # noqa: ASYNC110  (set by the test's thread; see hold_tools)
            await asyncio.sleep(0.005)
        return "surveyed all rooms"

    registry = ToolRegistry([survey])
    try:
        app = make_app(auth=False, tools=registry, model=ScriptedModel([_call("survey")]))
        with TestClient(app) as first:
            run_id = first.post(
                "/v1/runs", json={"kind": "agent", "prompt": "survey", "mode": "react"}
            ).json()["run"]["id"]
            wait_until(lambda: len(starts) == 1, what="the survey to start")
        assert store.get_run(run_id).status == "running"
        release.set()

        def explode(text: str, wire: str) -> object:
            raise RecursionError("maximum recursion depth exceeded in /opt/models/decoder.py")

        # The recovered run's next round fails inside the runtime, as a decoder bug would.
        monkeypatch.setattr(_execute, "read_decision", explode)
        model = ScriptedModel([_done("Done.")] * 3)
        with TestClient(make_app(auth=False, tools=registry, model=model)) as second:
            idle(second, run_id)
            shown = second.get(f"/v1/runs/{run_id}").json()["run"]
            messages = parse_sse(second.get(f"/v1/runs/{run_id}/events").text)
    finally:
        release.set()
    assert shown["status"] == "aborted"
    assert (shown["outcome"]["code"], shown["outcome"]["stage"]) == ("internal_error", "execute")
    assert "internal_reason" not in shown["outcome"] and "/opt/models" not in json.dumps(shown)
    assert (messages[-2].event, messages[-1].event) == ("outcome", "end")
    assert all("/opt/models" not in message.data for message in messages)
    assert store.get_run(run_id).outcome["internal_reason"].startswith("RecursionError")  # type: ignore[index]


def test_a_model_servers_own_error_stays_in_the_store_and_the_log(
    make_app: Callable[..., FastAPI], store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = "openai:qwen: HTTP 500, the provider is unavailable: cannot mmap /srv/models/qwen-7b.gguf"
    failures = [ModelUnavailableError(upstream, provider="openai:qwen", status=500)] * 2
    with caplog.at_level(logging.INFO), TestClient(_app(make_app, Rooms(), failures)) as client:
        run_id = client.post("/v1/runs", json={"kind": "agent", "prompt": "Book it"}).json()["run"]["id"]
        idle(client, run_id)
        shown = json.dumps(client.get(f"/v1/runs/{run_id}").json())
        listed = json.dumps(client.get("/v1/runs").json())
        page = json.dumps(client.get(f"/v1/runs/{run_id}/events", params={"format": "json"}).json())
        stream = client.get(f"/v1/runs/{run_id}/events").text

    run = store.get_run(run_id)
    assert run.status == "aborted" and run.outcome is not None and run.outcome["code"] == "model_error"
    assert "/srv/models/qwen-7b.gguf" in str(run.outcome["internal_reason"])  # kept where it belongs
    assert "/srv/models/qwen-7b.gguf" in caplog.text
    for text in (shown, listed, page, stream):
        assert "/srv/models" not in text and "cannot mmap" not in text and "internal_reason" not in text
    assert '"code":"model_error"' in stream.replace(" ", "")


def test_a_formula_runs_budget_comes_from_the_request_and_is_refused_without_a_price(
    make_app: Callable[..., FastAPI], store: Store, tmp_path: Path
) -> None:
    (tmp_path / "two.formula.toml").write_text(
        'formula = "two"\n[[steps]]\nid = "a"\nllm = { prompt = "Say A." }\n'
        '[[steps]]\nid = "b"\nneeds = ["a"]\nllm = { prompt = "Say B." }\n'
    )
    prices = {"scripted": ModelPrice(input=3.0, output=15.0)}
    options: dict[str, Any] = {"search_paths": [tmp_path], "budget": BudgetConfig(max_tokens=100_000)}
    with TestClient(_app(make_app, Rooms(), ["A.", "B."], prices=prices, **options)) as client:
        response = client.post("/v1/runs", json={"kind": "formula", "formula": "two", "max_tokens": 1})
        assert response.status_code == 201, response.text
        run_id = response.json()["run"]["id"]
        idle(client, run_id)
        shown = client.get(f"/v1/runs/{run_id}").json()
    run = shown["run"]
    assert run["status"] == "exhausted"  # a's call was made (nothing was spent), b's would pass max_tokens 1
    assert run["outcome"]["code"] == "budget_exhausted" and "max_tokens 1;" in run["outcome"]["user_message"]
    assert run["outcome"]["usage"]["calls"] == 1 and run["outcome"]["usage"]["cost"] > 0
    assert [step["status"] for step in shown["steps"]] == ["complete", "failed"]
    with TestClient(_app(make_app, Rooms(), [], **options)) as client:
        refused = client.post("/v1/runs", json={"kind": "formula", "formula": "two", "max_cost": 1.0})
    assert refused.status_code == 422
    assert "formula max_cost: the model 'scripted' has no price" in refused.json()["detail"]
    assert len(store.list_runs().items) == 1
