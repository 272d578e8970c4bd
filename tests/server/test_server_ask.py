"""Copilot turns through the HTTP API: ``POST /v1/ask`` as a server-side job, turns, retries, conversations,
data sources, owner isolation and bad input, on the scripted model (the turn's logic is tested in
``tests/copilot``; here, what the API makes of it)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from ask_helpers import (
    ANSWER,
    GENRES_ANSWER,
    GENRES_LOOK,
    GENRES_OPS,
    QUESTION,
    CopilotScript,
    data_dir,
)
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, make_token

from plangate.config import BudgetConfig, ModelPrice
from plangate.copilot._conversations import Conversations
from plangate.events import OpEvent, OutcomeEvent, ReviewEvent
from plangate.models import PROVIDERS, ScriptedModel
from plangate.server._asks import chart_of
from plangate.store import Store


def _wait_turn(client: TestClient, turn_id: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = client.get(f"/v1/turns/{turn_id}", headers=headers or {})
        assert response.status_code == 200, response.text
        turn: dict[str, Any] = response.json()["turn"]
        if not turn["running"]:
            return turn
        time.sleep(0.05)
    pytest.fail(f"turn {turn_id} did not end within 30 s")


@pytest.fixture
def script() -> CopilotScript:
    return CopilotScript()


@pytest.fixture
def ask_app(
    make_app: Callable[..., FastAPI], script: CopilotScript, tmp_path: Path
) -> Callable[..., FastAPI]:
    def make(**options: Any) -> FastAPI:
        options.setdefault("model", script.model)
        options.setdefault("data_dirs", [data_dir(tmp_path)])
        return make_app(**options)

    return make


@pytest.fixture
def client(ask_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(ask_app(auth=False)) as opened:
        yield opened


# -- a turn ------------------------------------------------------------------------------------------------


def test_ask_answers_at_once_and_the_turn_ends_on_the_server(client: TestClient, store: Store) -> None:
    response = client.post("/v1/ask", json={"question": QUESTION})
    assert response.status_code == 202, response.text
    started = response.json()
    assert started["status"] == "running" and started["source"] == "shop"
    assert started["turn_id"].startswith("turn_") and started["run_id"].startswith("run_")
    assert started["events"] == f"/v1/runs/{started['run_id']}/events"
    # The run exists as soon as the answer is in: a client can follow it at once.
    assert client.get(f"/v1/runs/{started['run_id']}").json()["run"]["kind"] == "ask"

    turn = _wait_turn(client, started["turn_id"])  # nobody followed the events: the turn went on anyway
    assert (turn["status"], turn["answer"], turn["reason"]) == ("done", ANSWER, "answered from the data")
    assert turn["result"]["columns"] == ["name", "revenue"]
    assert [row[0] for row in turn["result"]["rows"]] == ["East", "West", "South"]
    assert turn["chart"] == {"kind": "bar", "x": "name", "y": ["revenue"]}
    assert [step["id"] for step in turn["formula"]["steps"]] == ["revenue", "answer"]
    [attempt] = turn["attempts"]
    assert attempt["review"]["severity"] == "ok" and attempt["run_id"] == turn["runs"][0]
    assert turn["conversation_id"] == started["conversation_id"] and "owner" not in turn
    assert Conversations(store).get_turn(started["turn_id"]).status == "done"

    events = client.get(f"/v1/runs/{started['run_id']}/events?format=json").json()["items"]
    kinds = [event["type"] for event in events]
    assert "op" in kinds and "review" in kinds and kinds[-1] == "outcome"
    ops = [event["op"]["op"] for event in events if event["type"] == "op"]
    assert ops[:4] == ["plan", "add_step", "add_step", "done"] and ops[-1] == "final"


def test_the_turns_events_stream_over_sse_and_end(client: TestClient) -> None:
    started = client.post("/v1/ask", json={"question": QUESTION}).json()
    with client.stream("GET", f"/v1/runs/{started['run_id']}/events") as response:
        body = "".join(response.iter_text())
    assert "event: op\n" in body and "event: review\n" in body and "event: outcome\n" in body
    assert body.rstrip().splitlines()[-1].startswith("data: ") and "event: end\n" in body
    assert '"status":"completed"' in body.split("event: end\n", 1)[1]


def test_a_follow_up_joins_the_conversation_and_sees_its_history(
    client: TestClient, script: CopilotScript
) -> None:
    first = client.post("/v1/ask", json={"question": QUESTION}).json()
    _wait_turn(client, first["turn_id"])
    second = client.post(
        "/v1/ask",
        json={"question": "And the top 3 in 2025 again?", "conversation_id": first["conversation_id"]},
    ).json()
    assert second["conversation_id"] == first["conversation_id"]
    _wait_turn(client, second["turn_id"])
    copilot_requests = [r for r in script.model.requests if r.purpose == "copilot"]
    assert ANSWER in "\n".join(m.content for m in copilot_requests[-1].messages)  # the history rode along

    listed = client.get("/v1/conversations").json()
    assert [item["id"] for item in listed["items"]] == [first["conversation_id"]]
    assert listed["items"][0]["turns"] == 2 and listed["next_cursor"] is None
    shown = client.get(f"/v1/conversations/{first['conversation_id']}").json()
    assert shown["conversation"]["title"] == QUESTION
    assert [turn["id"] for turn in shown["turns"]] == [first["turn_id"], second["turn_id"]]
    # ``conversation`` is accepted for ``conversation_id`` (the Python and CLI name)
    third = client.post("/v1/ask", json={"question": "Once more?", "conversation": first["conversation_id"]})
    assert third.status_code == 202 and third.json()["conversation_id"] == first["conversation_id"]
    _wait_turn(client, third.json()["turn_id"])


def test_a_running_turn_is_shown_running_and_the_server_stays_responsive(
    ask_app: Callable[..., FastAPI], tmp_path: Path
) -> None:
    hold = threading.Event()
    script = CopilotScript(hold=hold)
    with TestClient(ask_app(auth=False, model=script.model)) as client:
        started = client.post("/v1/ask", json={"question": QUESTION}).json()
        assert script.entered.wait(20)
        # The model holds the turn's thread (and its event loop): the server's own loop is free.
        assert client.get("/healthz").status_code == 200
        turn = client.get(f"/v1/turns/{started['turn_id']}").json()["turn"]
        assert (turn["status"], turn["running"], turn["question"]) == ("running", True, QUESTION)
        shown = client.get(f"/v1/conversations/{started['conversation_id']}").json()
        assert [t["status"] for t in shown["turns"]] == ["running"]
        retry = client.post(f"/v1/turns/{started['turn_id']}/retry")
        assert retry.status_code == 409 and "still running" in retry.json()["detail"]
        hold.set()
        assert _wait_turn(client, started["turn_id"])["status"] == "done"


def test_cancelling_the_turns_run_stores_the_turn_cancelled(
    ask_app: Callable[..., FastAPI], store: Store
) -> None:
    hold = threading.Event()
    script = CopilotScript(hold=hold)
    with TestClient(ask_app(auth=False, model=script.model)) as client:
        started = client.post("/v1/ask", json={"question": QUESTION}).json()
        assert script.entered.wait(20)
        threading.Timer(0.5, hold.set).start()  # the held request returns once the cancel has begun
        response = client.post(f"/v1/runs/{started['run_id']}/cancel")
        assert response.status_code == 200, response.text
        turn = _wait_turn(client, started["turn_id"])
    assert turn["status"] == "cancelled" and turn["attempts"][-1]["status"] == "cancelled"
    assert store.get_run(started["run_id"]).status == "cancelled"
    outcomes = [e for e in store.events(started["run_id"]) if isinstance(e, OutcomeEvent)]
    assert len(outcomes) == 1


def test_retry_asks_the_same_question_again_in_the_same_conversation(client: TestClient) -> None:
    first = client.post("/v1/ask", json={"question": QUESTION}).json()
    _wait_turn(client, first["turn_id"])
    response = client.post(f"/v1/turns/{first['turn_id']}/retry")
    assert response.status_code == 202, response.text
    again = response.json()
    assert again["retry_of"] == first["turn_id"] and again["turn_id"] != first["turn_id"]
    assert again["conversation_id"] == first["conversation_id"] and again["source"] == "shop"
    turn = _wait_turn(client, again["turn_id"])
    assert (turn["question"], turn["status"]) == (QUESTION, "done")
    assert client.post("/v1/turns/turn_nope/retry").status_code == 404


def test_retry_asks_with_the_model_the_turn_was_asked_with(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, a retry ran on the server's own model, whatever the turn had named.
    other = CopilotScript()
    monkeypatch.setitem(
        PROVIDERS, "other", lambda model_id: ScriptedModel(other._respond, name=f"other:{model_id}")
    )
    first = client.post("/v1/ask", json={"question": QUESTION, "model": "other:m"}).json()
    assert _wait_turn(client, first["turn_id"])["model"] == "other:m"

    again = client.post(f"/v1/turns/{first['turn_id']}/retry").json()

    turn = _wait_turn(client, again["turn_id"])
    assert (turn["model"], turn["status"]) == ("other:m", "done")


# -- data sources ------------------------------------------------------------------------------------------


def test_a_registered_sqlite_file_is_listed_and_asked_about(ask_app: Callable[..., FastAPI]) -> None:
    script = CopilotScript(ops=GENRES_OPS, answer=GENRES_ANSWER, first=GENRES_LOOK)
    with TestClient(ask_app(auth=False, model=script.model)) as client:
        created = client.post("/v1/sources", json={"data": "chinook.sqlite"})
        assert created.status_code == 201, created.text
        source = created.json()["source"]
        assert source == {
            "name": "chinook",
            "kind": "sqlite",
            "location": "chinook.sqlite",
            "tables": 11,
            "builtin": False,
            "declared": False,
            "description": "",
            "created_at": source["created_at"],
        }
        names = [item["name"] for item in client.get("/v1/sources").json()["items"]]
        assert names == ["shop", "chinook"]
        started = client.post(
            "/v1/ask", json={"question": "Which 3 genres have the most tracks?", "source": "chinook"}
        )
        assert started.status_code == 202, started.text
        turn = _wait_turn(client, started.json()["turn_id"])
        assert (turn["status"], turn["source"]) == ("done", "chinook"), turn["reason"]
        assert turn["result"]["rows"] == [["Rock", 1297], ["Latin", 579], ["Metal", 374]]
        ops = [
            e["op"]["op"]
            for e in client.get(f"/v1/runs/{turn['run_id']}/events?format=json").json()["items"]
            if e["type"] == "op"
        ]
        assert ops[0] == "look"
        assert client.delete("/v1/sources/chinook").status_code == 204
        assert client.post("/v1/ask", json={"question": "Again?", "source": "chinook"}).status_code == 404
        assert client.delete("/v1/sources/chinook").status_code == 404


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [
        ("notes.db", 422, "cannot open notes.db: file is not a database"),
        ("missing.db", 422, "no file 'missing.db' in the server's data directories"),
        (".private/secret.sqlite", 403, "hidden folder"),
        ("../server.db", 403, "outside the server's data directories"),
        ("/etc/hostname", 403, "outside the server's data directories"),
        ("mysql://db/sales", 422, "expected a SQLite file or a postgresql:// URL"),
    ],
)
def test_a_source_that_cannot_be_registered_is_a_problem_naming_why(
    client: TestClient, data: str, status: int, says: str, tmp_path: Path
) -> None:
    response = client.post("/v1/sources", json={"data": data})
    assert response.status_code == status, response.text
    problem = response.json()
    assert response.headers["content-type"] == "application/problem+json"
    assert says in problem["detail"]
    assert str(tmp_path) not in response.text and "Traceback" not in response.text
    assert [item["name"] for item in client.get("/v1/sources").json()["items"]] == ["shop"]


def test_the_servers_own_store_or_any_plangate_store_is_never_a_source(
    ask_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    with (
        closing(sqlite3.connect(workdir / "server.db")) as source,
        closing(sqlite3.connect(workdir / "copy.db")) as copy,
    ):
        source.backup(copy)  # a whole copy, what the WAL still held included
    with TestClient(ask_app(auth=False, data_dirs=[workdir])) as client:
        own = client.post("/v1/sources", json={"data": "server.db"})
        assert own.status_code == 403 and "the server's own store" in own.json()["detail"]
        copy = client.post("/v1/sources", json={"data": "copy.db"})
        assert copy.status_code == 403 and "copy.db is a plangate store" in copy.json()["detail"]


def test_a_postgresql_url_that_does_not_connect_names_why_and_never_the_password(
    ask_app: Callable[..., FastAPI],
) -> None:
    url = "postgresql://reader:s3cret-pw@127.0.0.1:9/sales"  # port 9 (discard): nothing listens there
    app = ask_app(auth=False, allow_client_urls=True, allowed_hosts=["127.0.0.1"])
    with TestClient(app) as client:
        response = client.post("/v1/sources", json={"data": url, "name": "sales"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("cannot open postgresql://reader:***@127.0.0.1:9/sales: ")
    assert "s3cret-pw" not in response.text


def test_a_source_name_is_one_per_owner(client: TestClient) -> None:
    assert client.post("/v1/sources", json={"data": "chinook.sqlite", "name": "music"}).status_code == 201
    again = client.post("/v1/sources", json={"data": "chinook.sqlite", "name": "music"})
    assert again.status_code == 409 and "exists already" in again.json()["detail"]
    assert client.post("/v1/sources", json={"data": "chinook.sqlite", "name": "shop"}).status_code == 409
    bad = client.post("/v1/sources", json={"data": "chinook.sqlite", "name": "no spaces"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "body.name"


# -- bad input -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"question": ""}, "body.question"),
        ({}, "body.question"),
        ({"question": "x" * 4001}, "body.question"),
        ({"question": QUESTION, "data": "/etc/passwd"}, "body.data"),
        ({"question": QUESTION, "source": "../shop"}, "body.source"),
    ],
)
def test_a_bad_ask_is_a_422_naming_the_field_and_stores_nothing(
    client: TestClient, store: Store, body: dict[str, object], field: str
) -> None:
    response = client.post("/v1/ask", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field
    assert store.list_runs(kind="ask").items == [] and Conversations(store).list_conversations().items == []


def test_an_unknown_source_conversation_or_model_stores_nothing(client: TestClient, store: Store) -> None:
    unknown = client.post("/v1/ask", json={"question": QUESTION, "source": "sales"})
    assert unknown.status_code == 404 and "this owner's sources: shop" in unknown.json()["detail"]
    lost = client.post("/v1/ask", json={"question": QUESTION, "conversation_id": "conv_nope"})
    assert lost.status_code == 404 and "conv_nope" in lost.json()["detail"]
    model = client.post("/v1/ask", json={"question": QUESTION, "model": "nosuch:model"})
    assert model.status_code == 422 and "unknown model provider" in model.json()["detail"]
    blank = client.post("/v1/ask", json={"question": "   "})
    assert blank.status_code == 422 and "empty" in blank.json()["detail"]
    assert store.list_runs(kind="ask").items == []
    assert client.get("/v1/turns/turn_nope").status_code == 404
    assert client.get("/v1/conversations/conv_nope").status_code == 404
    assert client.get("/v1/conversations?cursor=nope").status_code == 400


def test_a_body_over_the_limit_is_refused(ask_app: Callable[..., FastAPI]) -> None:
    with TestClient(ask_app(auth=False, max_body=2000)) as client:
        response = client.post("/v1/ask", json={"question": "x" * 3000})
        assert response.status_code == 413
        assert client.post("/v1/sources", json={"data": "y" * 3000}).status_code == 413


# -- owners --------------------------------------------------------------------------------------------------


def test_another_owner_sees_none_of_it(ask_app: Callable[..., FastAPI], store: Store) -> None:
    with TestClient(ask_app()) as client:
        ana, bob = bearer(make_token(store, "ana")), bearer(make_token(store, "bob"))
        assert client.post("/v1/ask", json={"question": QUESTION}).status_code == 401
        assert client.post("/v1/sources", headers=ana, json={"data": "chinook.sqlite"}).status_code == 201
        started = client.post("/v1/ask", headers=ana, json={"question": QUESTION}).json()
        turn = _wait_turn(client, started["turn_id"], ana)
        assert turn["status"] == "done"

        for path in (
            f"/v1/turns/{started['turn_id']}",
            f"/v1/conversations/{started['conversation_id']}",
            f"/v1/runs/{started['run_id']}",
            f"/v1/runs/{started['run_id']}/events?format=json",
        ):
            assert client.get(path, headers=bob).status_code == 404, path
        assert client.post(f"/v1/turns/{started['turn_id']}/retry", headers=bob).status_code == 404
        assert client.get("/v1/conversations", headers=bob).json()["items"] == []
        assert [s["name"] for s in client.get("/v1/sources", headers=bob).json()["items"]] == ["shop"]
        joined = client.post(
            "/v1/ask", headers=bob, json={"question": QUESTION, "conversation_id": started["conversation_id"]}
        )
        assert joined.status_code == 404
        assert (
            client.post("/v1/ask", headers=bob, json={"question": QUESTION, "source": "chinook"}).status_code
            == 404
        )
        assert client.delete("/v1/sources/chinook", headers=bob).status_code == 404
        # bob may register a source of the same name: names are per owner
        assert client.post("/v1/sources", headers=bob, json={"data": "chinook.sqlite"}).status_code == 201
        assert [c["id"] for c in client.get("/v1/conversations", headers=ana).json()["items"]] == [
            started["conversation_id"]
        ]


# -- documented --------------------------------------------------------------------------------------------


def test_the_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in (
        ("/v1/ask", "post"),
        ("/v1/turns/{turn_id}", "get"),
        ("/v1/turns/{turn_id}/retry", "post"),
        ("/v1/conversations", "get"),
        ("/v1/conversations/{conversation_id}", "get"),
        ("/v1/sources", "get"),
        ("/v1/sources", "post"),
        ("/v1/sources/{name}", "delete"),
    ):
        assert method in paths[path], (path, method)
        assert paths[path][method]["summary"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["AskRequest"]
    assert set(schema["properties"]) >= {"question", "source", "conversation_id", "model"}


# -- charts --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "chart"),
    [
        (
            {"columns": ["name", "revenue"], "rows": [["East", 1.5], ["West", 2]]},
            {"kind": "bar", "x": "name", "y": ["revenue"]},
        ),
        (
            {"columns": ["month", "orders"], "rows": [["2025-01", 3], ["2025-02", 4]]},
            {"kind": "line", "x": "month", "y": ["orders"]},
        ),
        (
            {"columns": ["year", "n", "m"], "rows": [[2024, 3, 1.0], [2025, 4, 2.0]]},
            {"kind": "line", "x": "year", "y": ["n", "m"]},
        ),
        ({"columns": ["n"], "rows": [[3], [4]]}, None),
        ({"columns": ["name", "revenue"], "rows": [["East", 1.5]]}, None),
        ({"columns": ["a", "b"], "rows": [["x", "y"], ["z", "w"]]}, None),
        ({"columns": ["year", "n"], "rows": [[2025, 3], [2024, 4]]}, None),
        ({"columns": [], "rows": []}, None),
    ],
)
def test_a_result_is_charted_only_when_it_is_a_series(
    result: dict[str, Any], chart: dict[str, Any] | None
) -> None:
    assert chart_of(result) == chart


def test_the_turns_events_are_typed_in_the_store(client: TestClient, store: Store) -> None:
    started = client.post("/v1/ask", json={"question": QUESTION}).json()
    _wait_turn(client, started["turn_id"])
    events = store.events(started["run_id"])
    assert any(isinstance(e, OpEvent) for e in events) and any(isinstance(e, ReviewEvent) for e in events)


def test_a_turn_shows_its_usage_and_cost_and_a_budget_from_the_request_ends_it(
    ask_app: Callable[..., FastAPI],
    make_app: Callable[..., FastAPI],
    script: CopilotScript,
    store: Store,
    tmp_path: Path,
) -> None:
    prices = {"scripted": ModelPrice(input=1.0, output=2.0)}
    with TestClient(ask_app(auth=False, prices=prices, budget=BudgetConfig(max_tokens=100_000))) as client:
        turn = _wait_turn(client, client.post("/v1/ask", json={"question": QUESTION}).json()["turn_id"])
        assert turn["status"] == "done"
        usage = turn["usage"]  # the generation's call and the answer step's, with their cost
        assert usage["calls"] == 2 and usage["cost"] > 0
        assert usage == store.get_run(turn["run_id"]).outcome["usage"]  # type: ignore[index]

        # the request's budget wins over [budget]: the generation's call reaches it, no formula run starts
        started = client.post("/v1/ask", json={"question": QUESTION, "max_tokens": 1}).json()
        turn = _wait_turn(client, started["turn_id"])
        assert turn["status"] == "failed" and turn["reason"].startswith(
            "The turn reached its budget (max_tokens 1;"
        )
        assert turn["usage"]["calls"] == 1 and turn["runs"] == []
        run = client.get(f"/v1/runs/{started['run_id']}").json()["run"]
        assert run["status"] == "exhausted" and run["outcome"]["code"] == "budget_exhausted"

        refused = client.post("/v1/ask", json={"question": QUESTION, "max_tokens": 0})
        assert refused.status_code == 422 and "max_tokens" in refused.text
    no_prices = make_app(auth=False, model=script.model, data_dirs=[tmp_path / "data"])
    with TestClient(no_prices) as client:  # no [prices]: a max_cost cannot be held to
        refused = client.post("/v1/ask", json={"question": QUESTION, "max_cost": 1.0})
        assert refused.status_code == 422
        assert "ask max_cost: the model 'scripted' has no price" in refused.json()["detail"]
    assert len(store.list_runs(kind="ask").items) == 2  # the refused requests stored nothing
