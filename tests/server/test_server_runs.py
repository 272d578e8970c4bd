"""``/v1/runs``: formula runs started in the background, refused when check fails, listed, cancelled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import HOLD_FORMULA, hold_tools, idle, parse_sse, wait_until, write_formula

from plangate.store import Store

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}


def _start(client: TestClient, body: dict[str, object] = RELEASE) -> str:
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["run"]["id"]
    return run_id


def test_a_formula_run_starts_in_the_background_and_waits_on_its_person(client: TestClient) -> None:
    response = client.post("/v1/runs", json=RELEASE)

    assert response.status_code == 201
    run = response.json()["run"]
    assert (run["kind"], run["name"], run["owner"]) == ("formula", "release", "local")
    assert run["input"] == {
        "formula": "release",
        "vars": {"version": "1.2.0", "channel": "stable", "owner": "release-team"},
    }
    idle(client, run["id"])
    shown = client.get(f"/v1/runs/{run['id']}").json()
    assert shown["run"]["status"] == "waiting"
    assert shown["active"] is False
    assert shown["interaction"]["kind"] == "approval"
    assert shown["interaction"]["prompt"].startswith("Ship 1.2.0 to stable?")
    steps = {step["id"]: step for step in shown["steps"]}
    assert [steps[s]["status"] for s in ("run-tests", "build", "approve", "publish")] == [
        "complete",
        "complete",
        "waiting",
        "pending",
    ]
    assert steps["approve"]["reason"].startswith("waiting for a person")
    assert steps["publish"]["needs"] == ["approve"]
    assert steps["run-tests"]["executor"] == "tool"


def test_a_formula_that_fails_check_is_a_422_listing_the_issues_and_nothing_is_stored(
    client: TestClient, store: Store
) -> None:
    response = client.post(
        "/v1/runs", json={"kind": "formula", "formula": "release", "vars": {"version": "x"}}
    )

    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == "urn:plangate:problem:formula-check-failed"
    assert "does not pass check" in problem["detail"]
    assert [issue["code"] for issue in problem["issues"]] == ["var-pattern"]
    assert store.list_runs().items == []


def test_an_unknown_formula_is_a_422_with_its_load_error(client: TestClient, store: Store) -> None:
    response = client.post("/v1/runs", json={"kind": "formula", "formula": "relase", "vars": {}})

    assert response.status_code == 422
    issues = response.json()["issues"]
    assert [issue["code"] for issue in issues] == ["load-error"]
    assert "did you mean 'release'" in issues[0]["message"]
    assert store.list_runs().items == []


@pytest.mark.parametrize("name", ["../examples/formulas/release", "release.formula.toml", "/etc/passwd", ""])
def test_a_formula_is_named_never_given_as_a_path(client: TestClient, store: Store, name: str) -> None:
    response = client.post("/v1/runs", json={"kind": "formula", "formula": name})

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body.formula"
    assert store.list_runs().items == []


def test_runs_are_listed_newest_first_filtered_and_paged_with_a_cursor(client: TestClient) -> None:
    released = [_start(client) for _ in range(3)]
    for run_id in released:
        idle(client, run_id)
    finished = _start(client, {"kind": "formula", "formula": "base-release", "vars": {"version": "2.0.0"}})
    idle(client, finished)

    everything = client.get("/v1/runs").json()
    assert [run["id"] for run in everything["items"]] == [finished, *released[::-1]]
    assert everything["next_cursor"] is None

    first = client.get("/v1/runs", params={"limit": 2, "status": "waiting"}).json()
    assert [run["id"] for run in first["items"]] == released[::-1][:2]
    second = client.get("/v1/runs", params={"limit": 2, "status": "waiting", "cursor": first["next_cursor"]})
    assert [run["id"] for run in second.json()["items"]] == released[:1]
    assert second.json()["next_cursor"] is None
    assert [run["id"] for run in client.get("/v1/runs", params={"status": "completed"}).json()["items"]] == [
        finished
    ]
    assert client.get("/v1/runs", params={"kind": "agent"}).json()["items"] == []


def test_sub_runs_are_left_out_of_the_top_level_list_and_listed_by_parent(client: TestClient) -> None:
    release = client.post("/v1/runs", json=RELEASE).json()["run"]["id"]
    fanout = client.post("/v1/runs", json={"kind": "formula", "formula": "fanout"}).json()["run"]["id"]
    idle(client, fanout)
    idle(client, release)

    everything = client.get("/v1/runs").json()["items"]
    assert len(everything) == 5  # the two runs and the fan-out's three sub-runs
    top = client.get("/v1/runs", params={"top_level": "true"}).json()["items"]
    assert [run["id"] for run in top] == [fanout, release]
    assert [run["has_sub_runs"] for run in top] == [True, False]
    children = client.get("/v1/runs", params={"parent": fanout}).json()["items"]
    assert len(children) == 3
    assert {run["parent_run_id"] for run in children} == {fanout}
    assert [run["has_sub_runs"] for run in children] == [False] * 3

    shown = client.get(f"/v1/runs/{fanout}").json()
    assert sorted(sub["id"] for sub in shown["sub_runs"]) == sorted(run["id"] for run in children)
    assert {sub["name"] for sub in shown["sub_runs"]} == {"deploy-region"}
    assert shown["sub_runs_more"] is False
    assert client.get(f"/v1/runs/{release}").json()["sub_runs"] == []


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"cursor": "not-a-cursor"}, 400),
        ({"limit": 0}, 422),
        ({"limit": 1001}, 422),
        ({"status": "sleeping"}, 422),
        ({"kind": "robot"}, 422),
    ],
)
def test_bad_listing_parameters_are_client_errors(
    client: TestClient, params: dict[str, object], status: int
) -> None:
    response = client.get("/v1/runs", params=params)

    assert response.status_code == status
    assert response.json()["status"] == status


def test_an_unknown_run_is_a_404_problem(client: TestClient) -> None:
    for response in (
        client.get("/v1/runs/run_nope"),
        client.post("/v1/runs/run_nope/cancel"),
        client.get("/v1/runs/run_nope/events"),
    ):
        assert response.status_code == 404
        assert response.json()["type"] == "urn:plangate:problem:not-found"


def test_cancelling_a_waiting_run_expires_its_interaction_and_ends_its_stream(
    client: TestClient, store: Store
) -> None:
    run_id = _start(client)
    idle(client, run_id)
    interaction = client.get(f"/v1/runs/{run_id}").json()["interaction"]

    response = client.post(f"/v1/runs/{run_id}/cancel", json={"reason": "wrong version"})

    assert response.status_code == 200
    assert response.json()["run"]["status"] == "cancelled"
    assert store.get_interaction(interaction["id"]).status == "expired"
    messages = parse_sse(client.get(f"/v1/runs/{run_id}/events").text)
    assert messages[-1].event == "end"
    assert messages[-1].json()["status"] == "cancelled"
    again = client.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert "already ended" in again.json()["detail"]


def test_cancelling_a_running_run_stops_its_task(
    make_app: Callable[..., FastAPI], store: Store, workdir: Path
) -> None:
    hold = hold_tools()
    write_formula(workdir / "formulas", "slow", HOLD_FORMULA)
    try:
        with TestClient(make_app(auth=False, tools=hold.registry)) as client:
            run_id = _start(client, {"kind": "formula", "formula": "slow"})
            wait_until(lambda: bool(hold.started), what="the hold step")
            assert client.get(f"/v1/runs/{run_id}").json()["active"] is True

            response = client.post(f"/v1/runs/{run_id}/cancel")

            assert response.json()["run"]["status"] == "cancelled"
            shown = client.get(f"/v1/runs/{run_id}").json()
            assert shown["active"] is False
            assert {step["id"]: step["status"] for step in shown["steps"]} == {
                "hold": "cancelled",
                "after": "cancelled",
            }
    finally:
        hold.release.set()


def test_an_unknown_field_in_the_body_is_refused_by_name(client: TestClient, store: Store) -> None:
    response = client.post("/v1/runs", json={**RELEASE, "priority": "high"})

    assert response.status_code == 422
    assert response.json()["detail"] == "body.priority: unknown field"
    assert store.list_runs().items == []


def test_a_body_without_a_kind_names_the_field(client: TestClient) -> None:
    response = client.post("/v1/runs", json={"formula": "release"})

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"].startswith("body")
    assert "kind" in response.json()["detail"]
