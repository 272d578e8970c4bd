"""``/v1/interactions``: listing the caller's, and resolving one (the run continues in the background)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import idle, parse_sse, write_formula

from plangate.interactions import Reject, resolution_dict
from plangate.store import Store

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}


def _waiting_release(client: TestClient, version: str = "1.2.0") -> tuple[str, str]:
    body = {**RELEASE, "vars": {"version": version}}
    run_id = client.post("/v1/runs", json=body).json()["run"]["id"]
    idle(client, run_id)
    interaction_id: str = client.get(f"/v1/runs/{run_id}").json()["interaction"]["id"]
    return run_id, interaction_id


def test_open_interactions_are_listed_and_shown(client: TestClient) -> None:
    run_id, interaction_id = _waiting_release(client)

    listed = client.get("/v1/interactions", params={"status": "open"}).json()["items"]

    assert [(item["id"], item["run_id"], item["status"]) for item in listed] == [
        (interaction_id, run_id, "open")
    ]
    assert client.get("/v1/interactions", params={"status": "resolved"}).json()["items"] == []
    assert client.get(f"/v1/interactions/{interaction_id}").json()["interaction"]["kind"] == "approval"
    assert client.get("/v1/interactions", params={"status": "maybe"}).status_code == 422


def test_approving_resolves_the_interaction_and_the_run_completes(client: TestClient) -> None:
    run_id, interaction_id = _waiting_release(client)

    response = client.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"})

    assert response.status_code == 200
    body = response.json()
    assert (body["interaction"]["status"], body["interaction"]["resolved_by"]) == ("resolved", "local")
    assert body["interaction"]["resolution"] == {"kind": "approve"}
    assert body["run"]["id"] == run_id
    idle(client, run_id)
    messages = parse_sse(client.get(f"/v1/runs/{run_id}/events").text)
    types = [message.event for message in messages]
    assert types.index("interaction_resolved") > types.index("interaction_opened")
    assert messages[-1].json()["status"] == "completed"
    steps = {step["id"]: step["status"] for step in client.get(f"/v1/runs/{run_id}").json()["steps"]}
    assert steps == {
        "run-tests": "complete",
        "build": "complete",
        "approve": "complete",
        "publish": "complete",
    }


def test_rejecting_fails_the_step_with_the_reason_and_the_run_fails(client: TestClient) -> None:
    run_id, interaction_id = _waiting_release(client)

    response = client.post(
        f"/v1/interactions/{interaction_id}", json={"kind": "reject", "reason": "not today"}
    )

    assert response.status_code == 200
    idle(client, run_id)
    shown = client.get(f"/v1/runs/{run_id}").json()
    assert shown["run"]["status"] == "failed"
    steps = {step["id"]: step for step in shown["steps"]}
    assert steps["approve"]["reason"] == "rejected: not today"
    assert steps["publish"]["status"] == "skipped"


def test_an_answer_becomes_the_steps_output(client: TestClient, workdir: Path) -> None:
    write_formula(
        workdir / "formulas",
        "ask",
        'formula = "ask"\n[[steps]]\nid = "name"\nhuman = { prompt = "Your name?", kind = "input" }\n',
    )
    run_id = client.post("/v1/runs", json={"kind": "formula", "formula": "ask"}).json()["run"]["id"]
    idle(client, run_id)
    interaction = client.get(f"/v1/runs/{run_id}").json()["interaction"]
    assert interaction["kind"] == "ask_user"

    client.post(f"/v1/interactions/{interaction['id']}", json={"kind": "answer", "text": "Ada"})

    idle(client, run_id)
    shown = client.get(f"/v1/runs/{run_id}").json()
    assert shown["run"]["status"] == "completed"
    assert shown["steps"][0]["output"] == {"answer": "Ada"}


def test_resolving_twice_is_a_409_with_the_stale_reason_and_changes_nothing(
    client: TestClient, store: Store
) -> None:
    run_id, interaction_id = _waiting_release(client)
    client.post(f"/v1/interactions/{interaction_id}", json={"kind": "approve"})
    idle(client, run_id)
    last_seq = store.last_seq(run_id)

    again = client.post(f"/v1/interactions/{interaction_id}", json={"kind": "reject", "reason": "late"})

    assert again.status_code == 409
    assert again.json()["reason"] == "stale_interaction"
    assert again.json()["type"] == "urn:plangate:problem:stale-interaction"
    assert store.last_seq(run_id) == last_seq
    assert store.get_interaction(interaction_id).resolution == {"kind": "approve"}


def test_concurrent_resolutions_one_wins_the_other_is_a_409(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    with TestClient(make_app(auth=False)) as client:
        run_id, interaction_id = _waiting_release(client)
        services = client.app.state.services  # type: ignore[attr-defined]
        from plangate.interactions import Approve, Reject

        async def race() -> list[object]:
            runs = services.runs
            return await asyncio.gather(
                runs.answer(interaction_id, Approve(), "local"),
                runs.answer(interaction_id, Reject(reason="no"), "local"),
                return_exceptions=True,
            )

        outcomes = client.portal.call(race)
        idle(client, run_id)

    winners = [outcome for outcome in outcomes if outcome == run_id]
    losers = [type(outcome).__name__ for outcome in outcomes if outcome != run_id]
    assert (len(winners), losers) == (1, ["StaleInteraction"])
    assert store.get_run(run_id).status in {"completed", "failed"}
    resolved = [e for e in store.events(run_id) if e.type == "interaction_resolved"]
    assert len(resolved) == 1


def test_concurrent_http_resolutions_give_one_200_and_one_409(client: TestClient) -> None:
    run_id, interaction_id = _waiting_release(client)
    codes: list[int] = []
    start = threading.Barrier(2)

    def resolve(action: str) -> None:
        start.wait()
        codes.append(client.post(f"/v1/interactions/{interaction_id}", json={"kind": action}).status_code)

    threads = [threading.Thread(target=resolve, args=(action,)) for action in ("approve", "approve")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(codes) == [200, 409]
    idle(client, run_id)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"kind": "answer"}, "'answer' needs the field 'text'"),
        ({"kind": "edit"}, "'edit' needs the field 'arguments'"),
        ({"kind": "approve", "reason": "x"}, "'approve' takes no 'reason'"),
        ({"kind": "reject", "text": "x"}, "'reject' takes no 'text'"),
        ({"kind": "shrug"}, "body.kind"),
        ({"action": "approve"}, "body.kind: required field is missing"),
        ({"kind": "approve", "why": "x"}, "body.why: unknown field"),
    ],
)
def test_a_resolution_that_does_not_fit_its_action_is_a_422(
    client: TestClient, store: Store, body: dict[str, object], detail: str
) -> None:
    _, interaction_id = _waiting_release(client)

    response = client.post(f"/v1/interactions/{interaction_id}", json=body)

    assert response.status_code == 422
    assert detail in response.json()["detail"]
    assert store.get_interaction(interaction_id).status == "open"


def test_edit_does_not_apply_to_a_formula_step(client: TestClient, store: Store) -> None:
    _, interaction_id = _waiting_release(client)

    response = client.post(
        f"/v1/interactions/{interaction_id}", json={"kind": "edit", "arguments": {"a": 1}}
    )

    assert response.status_code == 422
    assert "edit applies to a tool call's consent" in response.json()["detail"]
    assert store.get_interaction(interaction_id).status == "open"


def test_a_resolution_is_its_kind_as_in_python(
    client: TestClient, store: Store
) -> None:
    # one word for one thing: the API's body is the JSON form of the Python resolution
    run_id, interaction_id = _waiting_release(client)
    body = resolution_dict(Reject(reason="not this week"))
    assert body == {"kind": "reject", "reason": "not this week"}
    assert client.post(f"/v1/interactions/{interaction_id}", json=body).status_code == 200
    resolved = store.get_interaction(interaction_id)
    assert resolved.resolution == body
    idle(client, run_id)


def test_an_unknown_interaction_is_a_404(client: TestClient) -> None:
    assert client.post("/v1/interactions/int_nope", json={"kind": "approve"}).status_code == 404
    assert client.get("/v1/interactions/int_nope").status_code == 404


def test_a_sub_runs_question_resumes_the_root_run(client: TestClient, workdir: Path) -> None:
    folder = workdir / "formulas"
    write_formula(folder, "child", 'formula = "child"\n[[steps]]\nid = "ok"\nhuman = { prompt = "Fine?" }\n')
    write_formula(
        folder,
        "parent",
        'formula = "parent"\n[[steps]]\nid = "sub"\nformula = { name = "child" }\n'
        '[[steps]]\nid = "last"\nneeds = ["sub"]\ntool = { name = "notify", args = { message = "done" } }\n',
    )
    run_id = client.post("/v1/runs", json={"kind": "formula", "formula": "parent"}).json()["run"]["id"]
    idle(client, run_id)
    interaction = client.get(f"/v1/runs/{run_id}").json()["interaction"]
    assert interaction is not None and interaction["run_id"] != run_id

    assert client.post(f"/v1/interactions/{interaction['id']}", json={"kind": "approve"}).status_code == 200

    idle(client, run_id)
    shown = client.get(f"/v1/runs/{run_id}").json()
    assert shown["run"]["status"] == "completed"
    assert client.get(f"/v1/runs/{interaction['run_id']}").json()["run"]["status"] == "completed"
