"""Per-owner quotas through the HTTP API, one server on a SQLite store: past ``runs_at_once`` a new run waits
``queued`` in order (``queue_position``) and starts once a run of its owner ends, another owner unaffected;
an owner past its daily budget gets a 429 ``daily-budget`` with ``Retry-After`` and nothing is stored;
``GET /v1/limits`` says an owner's limits, today's spending and its runs going and waiting."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, make_token, wait_until

from plangate.runs.quotas import Limits, LimitSettings
from plangate.store import Store

RELEASE = {"kind": "formula", "formula": "release", "vars": {"version": "1.2.0"}}  # waits for an approval


def test_runs_past_the_limit_wait_in_order_and_start_as_slots_free(
    store: Store, make_app: Callable[..., FastAPI]
) -> None:
    ana, bo = bearer(make_token(store, "ana")), bearer(make_token(store, "bo"))
    app = make_app(
        limits=LimitSettings(Limits(runs_at_once=1), {"bo": {"runs_at_once": 3}}), schedule_tick=0.1
    )
    with TestClient(app) as client:
        made = [client.post("/v1/runs", json=RELEASE, headers=ana).json() for _ in range(3)]
        ids = [item["run"]["id"] for item in made]
        assert [item["queue_position"] for item in made] == [None, 0, 1]
        assert [item["run"]["status"] for item in made[1:]] == ["queued", "queued"]
        wait_until(lambda: store.get_run(ids[0]).status == "waiting", what="the first run to wait")
        assert client.get(f"/v1/runs/{ids[2]}", headers=ana).json()["queue_position"] == 1
        seen = client.get("/v1/limits", headers=ana).json()
        assert seen["limits"]["runs_at_once"] == 1
        assert seen["runs"] == {"going": 1, "waiting": ids[1:]}
        # bo's limit is its own: its runs start while ana's wait
        bos = [client.post("/v1/runs", json=RELEASE, headers=bo).json() for _ in range(2)]
        assert [item["queue_position"] for item in bos] == [None, None]

        assert client.post(f"/v1/runs/{ids[0]}/cancel", headers=ana).status_code == 200
        wait_until(lambda: store.get_run(ids[1]).status == "waiting", what="the second run to start")
        assert store.get_run(ids[2]).status == "queued"
        assert client.get(f"/v1/runs/{ids[2]}", headers=ana).json()["queue_position"] == 0
        assert client.post(f"/v1/runs/{ids[1]}/cancel", headers=ana).status_code == 200
        wait_until(lambda: store.get_run(ids[2]).status == "waiting", what="the third run to start")
        assert client.get("/v1/limits", headers=ana).json()["runs"] == {"going": 1, "waiting": []}


def test_past_its_daily_budget_an_owner_starts_nothing_until_the_next_day(
    store: Store, make_app: Callable[..., FastAPI]
) -> None:
    ana, bo = bearer(make_token(store, "ana")), bearer(make_token(store, "bo"))
    app = make_app(limits=LimitSettings(Limits(daily_tokens=100)), schedules=False)
    spent = store.create_run("agent", "earlier", {}, owner="ana").id
    with store.transaction(spent) as tx:
        usage = {"input_tokens": 90, "output_tokens": 30, "calls": 2, "models": {}}
        tx.set_status("completed", outcome={"status": "completed", "code": "done", "usage": usage})
    with TestClient(app) as client:
        refused = client.post("/v1/runs", json=RELEASE, headers=ana)
        assert refused.status_code == 429, refused.text
        problem = refused.json()
        assert problem["type"].endswith(":daily-budget")
        assert (problem["budget"], problem["limit"], problem["spent"]) == ("daily_tokens", 100, 120)
        assert 0 < int(refused.headers["retry-after"]) <= 86_400
        asked = client.post("/v1/ask", json={"question": "How many orders?"}, headers=ana)
        assert asked.status_code == 429 and asked.json()["type"].endswith(":daily-budget")
        assert [run.id for run in store.list_runs(owner="ana").items] == [spent]  # nothing stored
        assert client.post("/v1/runs", json=RELEASE, headers=bo).status_code == 201
        today = client.get("/v1/limits", headers=ana).json()["today"]
        assert (today["runs"], today["tokens"]) == (1, 120)
