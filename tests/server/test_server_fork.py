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
        assert client.get(f"/v1/runs/{retried}").json()["run"]["status"] == "completed"
    assert calls == ["fetch", "build", "build"]
