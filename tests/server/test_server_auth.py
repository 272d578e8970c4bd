"""Owners and tokens: every request needs a live token, and one owner never sees another owner's runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, idle, make_token, parse_sse

from plangate.server.tokens import Tokens, hash_token, new_token
from plangate.store import Store

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}


@pytest.fixture
def secure(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app()) as opened:
        yield opened


@pytest.fixture
def alice(store: Store) -> dict[str, str]:
    return bearer(make_token(store, "alice", "laptop"))


@pytest.fixture
def bob(store: Store) -> dict[str, str]:
    return bearer(make_token(store, "bob"))


def _alices_waiting_run(client: TestClient, alice: dict[str, str]) -> tuple[str, str]:
    response = client.post("/v1/runs", json=RELEASE, headers=alice)
    assert response.status_code == 201
    run_id: str = response.json()["run"]["id"]
    assert response.json()["run"]["owner"] == "alice"
    idle(client, run_id)
    interaction_id: str = client.get(f"/v1/runs/{run_id}", headers=alice).json()["interaction"]["id"]
    return run_id, interaction_id


def test_another_owner_gets_404_for_the_run_its_events_and_its_interaction(
    secure: TestClient, store: Store, alice: dict[str, str], bob: dict[str, str]
) -> None:
    run_id, interaction_id = _alices_waiting_run(secure, alice)
    refused = {
        "run": secure.get(f"/v1/runs/{run_id}", headers=bob),
        "events": secure.get(f"/v1/runs/{run_id}/events", headers=bob),
        "events page": secure.get(f"/v1/runs/{run_id}/events", params={"format": "json"}, headers=bob),
        "interaction": secure.get(f"/v1/interactions/{interaction_id}", headers=bob),
        "resolve": secure.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"}, headers=bob),
        "cancel": secure.post(f"/v1/runs/{run_id}/cancel", headers=bob),
    }

    assert {name: response.status_code for name, response in refused.items()} == dict.fromkeys(refused, 404)
    for response in refused.values():
        # Nothing tells bob whose run it is, or where the server keeps it.
        assert "alice" not in response.text
        assert "server.db" not in response.text
    assert refused["run"].json()["detail"] == f"no run {run_id!r} for owner 'bob'"
    assert store.get_interaction(interaction_id).status == "open"
    assert store.get_run(run_id).status == "waiting"


def test_listings_show_only_the_callers_runs_and_interactions(
    secure: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    alice_run, alice_interaction = _alices_waiting_run(secure, alice)
    bob_run = secure.post("/v1/runs", json=RELEASE, headers=bob).json()["run"]["id"]
    idle(secure, bob_run)

    assert [r["id"] for r in secure.get("/v1/runs", headers=alice).json()["items"]] == [alice_run]
    assert [r["id"] for r in secure.get("/v1/runs", headers=bob).json()["items"]] == [bob_run]
    alices = secure.get("/v1/interactions", params={"status": "open"}, headers=alice).json()["items"]
    bobs = secure.get("/v1/interactions", params={"status": "open"}, headers=bob).json()["items"]
    assert [i["id"] for i in alices] == [alice_interaction]
    assert [i["run_id"] for i in bobs] == [bob_run]
    assert secure.get("/v1/interactions", params={"run_id": alice_run}, headers=bob).json()["items"] == []


def test_the_owner_resolves_and_streams_its_own_run(secure: TestClient, alice: dict[str, str]) -> None:
    run_id, interaction_id = _alices_waiting_run(secure, alice)

    resolved = secure.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"}, headers=alice)

    assert resolved.status_code == 200
    assert resolved.json()["interaction"]["resolved_by"] == "alice"
    idle(secure, run_id)
    messages = parse_sse(secure.get(f"/v1/runs/{run_id}/events", headers=alice).text)
    assert messages[-1].json()["status"] == "completed"


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, None),
        ({"Authorization": "Basic YWxpY2U6c2VjcmV0"}, "invalid_request"),
        ({"Authorization": "Bearer"}, "invalid_request"),
        ({"Authorization": "Bearer not-a-plangate-token"}, "invalid_token"),
        ({"Authorization": f"Bearer {new_token()}"}, "invalid_token"),
    ],
)
def test_missing_or_bad_tokens_are_401_with_a_bearer_challenge(
    secure: TestClient, headers: dict[str, str], error: str | None
) -> None:
    for response in (
        secure.get("/v1/runs", headers=headers),
        secure.post("/v1/runs", json=RELEASE, headers=headers),
        secure.get("/v1/runs/run_x/events", headers=headers),
    ):
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer")
        assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)
        assert response.json()["type"] == "urn:plangate:problem:unauthorized"


def test_a_revoked_token_is_refused_and_the_token_never_appears_in_the_answer(
    secure: TestClient, store: Store
) -> None:
    token = make_token(store, "alice")
    assert secure.get("/v1/runs", headers=bearer(token)).status_code == 200
    record = Tokens(store).listed(owner="alice")[0]

    Tokens(store).revoke(record.id)
    response = secure.get("/v1/runs", headers=bearer(token))

    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]
    assert token not in response.text


def test_a_token_hashed_with_another_pepper_does_not_work(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    token = new_token()
    Tokens(store).create("alice", hash_token(token, b"pepper-one"))
    with TestClient(make_app(pepper=b"pepper-two")) as client:
        assert client.get("/v1/runs", headers=bearer(token)).status_code == 401
    with TestClient(make_app(pepper=b"pepper-one")) as client:
        assert client.get("/v1/runs", headers=bearer(token)).status_code == 200


def test_health_and_readiness_need_no_token_and_docs_are_served(
    secure: TestClient, alice: dict[str, str]
) -> None:
    # probes (a load balancer's, Kubernetes') carry no token: neither route tells anything about runs
    assert secure.get("/healthz").json() == {"status": "ok"}
    assert secure.get("/readyz").json() == {"status": "ready"}
    assert secure.get("/readyz", headers=alice).json() == {"status": "ready"}
    schema = secure.get("/openapi.json").json()
    assert "/v1/runs/{run_id}/events" in schema["paths"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert secure.get("/docs").status_code == 200


def test_without_auth_every_request_is_the_local_owner(client: TestClient) -> None:
    response = client.post("/v1/runs", json=RELEASE)

    assert response.json()["run"]["owner"] == "local"
    idle(client, response.json()["run"]["id"])


def test_the_consoles_static_files_need_no_token_and_the_api_still_does(
    make_app: Callable[..., FastAPI], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plangate.server import app as app_module

    console = workdir / "console"
    console.mkdir()
    (console / "index.html").write_text("<!doctype html><title>console</title>", encoding="utf-8")
    (console / "app.js").write_text("export {};", encoding="utf-8")
    monkeypatch.setattr(app_module, "CONSOLE", console)

    with TestClient(make_app()) as client:
        page = client.get("/")
        script = client.get("/app.js")
        api = client.get("/v1/runs")
        unknown = client.get("/v1/nothing-here")

    assert (page.status_code, page.headers["content-type"].split(";")[0]) == (200, "text/html")
    assert "<title>console</title>" in page.text
    assert script.status_code == 200
    assert api.status_code == 401
    assert (unknown.status_code, unknown.json()["type"]) == (404, "urn:plangate:problem:not-found")
