"""``/v1/webhooks`` on one server: an owner registers an endpoint (its secret in that answer only), sees it
and its deliveries (state, attempts, next try) — another owner sees none of it —, a private address is a 422
unless the server allows private addresses, and a run that ends owes the endpoint its event."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, make_token, wait_until

from plangate.runs.webhooks.deliver import DeliverySettings
from plangate.store import Store


def test_an_owner_registers_endpoints_and_reads_their_deliveries(
    store: Store, make_app: Callable[..., FastAPI]
) -> None:
    ana, bo = bearer(make_token(store, "ana")), bearer(make_token(store, "bo"))
    # nothing listens there: each attempt fails at once and is retried later
    hook = {"url": "http://127.0.0.1:9/hooks", "events": ["run.ended", "run.waiting"], "description": "ci"}
    with TestClient(make_app(schedules=False)) as client:
        refused = client.post("/v1/webhooks", json=hook, headers=ana)
        assert refused.status_code == 422 and "private, loopback or link-local" in refused.json()["detail"]
        bad = client.post("/v1/webhooks", json={**hook, "events": ["run.started"]}, headers=ana)
        assert bad.status_code == 422
    settings = DeliverySettings(allow_private=True, backoff=30.0, timeout=1.0)
    with TestClient(make_app(schedules=False, webhooks=settings)) as client:
        made = client.post("/v1/webhooks", json=hook, headers=ana)
        assert made.status_code == 201, made.text
        webhook, secret = made.json()["webhook"], made.json()["secret"]
        assert secret.startswith("whsec_") and webhook["events"] == ["run.ended", "run.waiting"]
        listed = client.get("/v1/webhooks", headers=ana)
        assert [item["id"] for item in listed.json()["items"]] == [webhook["id"]]
        assert secret not in listed.text and "secret" not in listed.json()["items"][0]
        assert client.get("/v1/webhooks", headers=bo).json()["items"] == []
        assert client.get(f"/v1/webhooks/{webhook['id']}", headers=bo).status_code == 404

        run = client.post(
            "/v1/runs",
            json={"kind": "formula", "formula": "release", "vars": {"version": "1.0.0"}},
            headers=ana,
        ).json()["run"]

        def tried() -> list[dict[str, object]]:
            found = client.get(f"/v1/webhooks/{webhook['id']}", headers=ana).json()["deliveries"]
            return [item for item in found if item["attempts"]]

        wait_until(lambda: bool(tried()), what="an attempt of the run.waiting delivery")
        [delivery] = tried()
        assert delivery["event"] == "run.waiting" and delivery["state"] == "pending"
        assert delivery["attempts"] == 1 and delivery["last_status"] is None
        assert isinstance(delivery["next_try_at"], float) and delivery["last_error"]
        assert str(delivery["id"]).startswith("msg_")
        assert client.post(f"/v1/runs/{run['id']}/cancel", headers=ana).status_code == 200
        wait_until(
            lambda: len(client.get(f"/v1/webhooks/{webhook['id']}", headers=ana).json()["deliveries"]) == 2
        )
        assert client.delete(f"/v1/webhooks/{webhook['id']}", headers=bo).status_code == 404
        assert client.delete(f"/v1/webhooks/{webhook['id']}", headers=ana).status_code == 204
        assert client.get("/v1/webhooks", headers=ana).json()["items"] == []
