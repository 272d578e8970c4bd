"""``POST /v1/runs/{id}/fork``: a fork through the API asks again for a write at or after its point, in the
new run; another owner's run is a 404; a point the run does not have is a 409, a bad body a 422."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, idle, make_token

from plangate.models import ScriptedModel
from plangate.store import Store
from plangate.tools import ToolRegistry, tool


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


def _done(speak: str) -> str:
    return json.dumps({"action": "done", "speak": speak})


def _approve_all(client: TestClient, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    while True:
        idle(client, run_id)
        shown: dict[str, Any] = client.get(f"/v1/runs/{run_id}", headers=headers).json()
        if shown["interaction"] is None:
            return shown
        response = client.post(
            f"/v1/interactions/{shown['interaction']['id']}", json={"kind": "approve"}, headers=headers
        )
        assert response.status_code == 200, response.text


def test_a_fork_through_the_api_asks_again_and_only_its_owner_may_fork(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    booked: list[str] = []

    @tool(effect="write")
    def book(room: str) -> str:
        """Book a meeting room."""
        booked.append(room)
        return f"booked {room}"

    script = [_call("book", room="Blue"), _done("Booked."), "Blue is booked."]
    script += [_call("book", room="Red"), _done("Booked Red."), "Red is booked."]
    app = make_app(tools=ToolRegistry([book]), model=ScriptedModel(script))
    alice, bob = bearer(make_token(store, "alice")), bearer(make_token(store, "bob"))
    with TestClient(app) as client:
        started = client.post(
            "/v1/runs", json={"kind": "agent", "prompt": "Book a room", "mode": "react"}, headers=alice
        )
        origin = started.json()["run"]["id"]
        assert _approve_all(client, origin, alice)["run"]["status"] == "completed"
        assert booked == ["Blue"]

        refused = client.post(f"/v1/runs/{origin}/fork", json={"at_round": 1}, headers=bob)
        assert refused.status_code == 404
        no_round = client.post(f"/v1/runs/{origin}/fork", json={"at_round": 9}, headers=alice)
        assert no_round.status_code == 409 and "has no round 9" in no_round.json()["detail"]
        unknown = client.post(f"/v1/runs/{origin}/fork", json={"at": 1}, headers=alice)
        assert unknown.status_code == 422

        response = client.post(
            f"/v1/runs/{origin}/fork", json={"at_round": 1, "instruction": "the Red room"}, headers=alice
        )
        assert response.status_code == 201, response.text
        fork = response.json()["run"]
        assert fork["owner"] == "alice" and fork["id"] != origin
        idle(client, fork["id"])
        shown = client.get(f"/v1/runs/{fork['id']}", headers=alice).json()
        assert shown["interaction"]["run_id"] == fork["id"]  # consent asked in the new run
        assert booked == ["Blue"]
        assert _approve_all(client, fork["id"], alice)["run"]["status"] == "completed"
    assert booked == ["Blue", "Red"]
    assert store.get_run(fork["id"]).input["forked_from"]["run_id"] == origin


def test_a_formula_run_is_retried_from_a_step_through_the_same_route(
    make_app: Callable[..., FastAPI], tmp_path: Path
) -> None:
    calls: list[str] = []

    @tool
    def fetch() -> dict[str, Any]:
        """Fetch."""
        calls.append("fetch")
        return {"ok": True}

    @tool
    def build() -> dict[str, Any]:
        """Build."""
        calls.append("build")
        return {"artifact": "a.tar.gz"}

    folder = tmp_path
    (folder / "two.formula.toml").write_text(
        'formula = "two"\n[[steps]]\nid = "fetch"\ntool = { name = "fetch", args = {} }\n'
        '[[steps]]\nid = "build"\nneeds = ["fetch"]\ntool = { name = "build", args = {} }\n',
        encoding="utf-8",
    )
    app = make_app(auth=False, tools=ToolRegistry([fetch, build]), search_paths=[folder])
    with TestClient(app) as client:
        origin = client.post("/v1/runs", json={"kind": "formula", "formula": "two"}).json()["run"]["id"]
        idle(client, origin)
        assert calls == ["fetch", "build"]
        wrong = client.post(f"/v1/runs/{origin}/fork", json={"at_round": 1})
        assert wrong.status_code == 422 and "at_round" in wrong.json()["detail"]
        response = client.post(f"/v1/runs/{origin}/fork", json={"from_step": "build"})
        assert response.status_code == 201, response.text
        retried = response.json()["run"]["id"]
        idle(client, retried)
        shown = client.get(f"/v1/runs/{retried}").json()
        assert shown["run"]["status"] == "completed"
        assert shown["origin"] == {"run_id": origin, "relation": "retry", "at": "from step build"}
        page = client.get(f"/v1/runs/{origin}").json()
        assert [(r["id"], r["at"]) for r in page["retries"]] == [(retried, "from step build")]
        assert page["forks"] == []
        diff = client.get(f"/v1/runs/{origin}/diff/{retried}").json()
        assert (diff["unit"], diff["first_divergence"]) == ("step", None)
    assert calls == ["fetch", "build", "build"]


def test_a_runs_page_shows_its_parentage_both_ways_and_only_its_owners_runs(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    @tool
    def look(topic: str) -> str:
        """Look a topic up."""
        return f"found {topic}"

    script = [_call("look", topic="rooms"), _done("Found."), "Rooms found."]
    script += [_call("look", topic="desks"), _done("Found desks."), "Desks found."]
    app = make_app(tools=ToolRegistry([look]), model=ScriptedModel(script))
    alice, bob = bearer(make_token(store, "alice")), bearer(make_token(store, "bob"))
    with TestClient(app) as client:
        body = {"kind": "agent", "prompt": "Look it up", "mode": "react"}
        origin = client.post("/v1/runs", json=body, headers=alice).json()["run"]["id"]
        idle(client, origin)
        fork = client.post(f"/v1/runs/{origin}/fork", json={"at_round": 1}, headers=alice).json()["run"]["id"]
        idle(client, fork)
        # a run of another owner naming alice's run as its origin (made in the store: the API never makes one)
        stray = store.create_run("agent", "bob's", {}, owner="bob", origin_run_id=origin).id

        page = client.get(f"/v1/runs/{origin}", headers=alice).json()
        assert page["origin"] is None and page["retries"] == [] and page["derived_more"] is False
        assert [(f["id"], f["at"], f["status"]) for f in page["forks"]] == [
            (fork, "before round 1", "completed")
        ]
        shown = client.get(f"/v1/runs/{fork}", headers=alice).json()
        assert shown["origin"] == {"run_id": origin, "relation": "fork", "at": "before round 1"}
        assert shown["run"]["origin_run_id"] == origin and "origin_run_id" not in page["run"]

        listed = client.get("/v1/runs", params={"origin": origin}, headers=alice).json()
        assert [item["id"] for item in listed["items"]] == [fork]
        assert client.get("/v1/runs", params={"origin": origin}, headers=bob).json()["items"] == [
            client.get(f"/v1/runs/{stray}", headers=bob).json()["run"] | {"has_sub_runs": False}
        ]

        diff = client.get(f"/v1/runs/{origin}/diff/{fork}", headers=alice)
        assert diff.status_code == 200, diff.text
        found = diff.json()
        assert (found["unit"], found["first_divergence"]) == ("round", "1")
        assert found["why"] == 'arguments: {"topic":"rooms"} vs {"topic":"desks"}'
        assert [row["key"] for row in found["rows"]] == ["1", "2", "outcome"]
        assert client.get(f"/v1/runs/{origin}/diff/{fork}", headers=bob).status_code == 404
        assert client.get(f"/v1/runs/{origin}/diff/{stray}", headers=alice).status_code == 404
        assert client.get(f"/v1/runs/{origin}/diff/run_nope", headers=alice).status_code == 404


def test_another_owners_formula_run_is_never_retried(
    make_app: Callable[..., FastAPI], store: Store, tmp_path: Path
) -> None:
    @tool
    def fetch() -> dict[str, Any]:
        """Fetch."""
        return {"ok": True}

    (tmp_path / "one.formula.toml").write_text(
        'formula = "one"\n[[steps]]\nid = "fetch"\ntool = { name = "fetch", args = {} }\n', encoding="utf-8"
    )
    app = make_app(tools=ToolRegistry([fetch]), search_paths=[tmp_path])
    alice, bob = bearer(make_token(store, "alice")), bearer(make_token(store, "bob"))
    with TestClient(app) as client:
        origin = client.post("/v1/runs", json={"kind": "formula", "formula": "one"}, headers=alice)
        run_id = origin.json()["run"]["id"]
        idle(client, run_id)
        refused = client.post(f"/v1/runs/{run_id}/fork", json={"from_step": "fetch"}, headers=bob)
        assert refused.status_code == 404
        assert client.get(f"/v1/runs/{run_id}", headers=bob).status_code == 404
    assert [run.id for run in store.list_runs(limit=10).items] == [run_id]  # nothing stored
