"""Webhooks (``runs/webhooks``) on a real SQLite store (the outbox on PostgreSQL as well), the HTTP faked
at the transport: the outbox owes an owner's endpoints the events of its runs (and only its own), written
with the change that makes them; an endpoint on a private, loopback or link-local address is refused at
registration and at each attempt (a name that resolves elsewhere later included) unless the operator allows
it; an attempt is signed as Standard Webhooks says (checked with the ``standardwebhooks`` library), retried
with backoff under the same ``webhook-id`` until a 2xx, given up after its horizon; of two deliverers
racing, one makes each attempt."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from plangate.errors import ConfigError
from plangate.runs import Outcome
from plangate.runs.webhooks import Webhooks, checked_url
from plangate.runs.webhooks.deliver import Deliverer, DeliverySettings
from plangate.store import SQLiteStore, Store, open_store

PUBLIC = "http://93.184.216.34/hooks"  # a literal public address: nothing resolves it, the transport fakes it
FAST = DeliverySettings(timeout=2.0, backoff=0.01, max_backoff=0.02, give_up_after=3600.0, every=0.01)


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Store:
    return SQLiteStore(tmp_path / "hooks.db", clock=clock)


def _end(store: Store, run_id: str, status: str = "completed") -> None:
    outcome = Outcome(
        status=status,  # type: ignore[arg-type]
        stage="run",
        code="done",
        user_message="Done.",
        internal_reason="a path /srv/secret that clients never see",
    )
    with store.transaction(run_id) as tx:
        tx.set_status(status, outcome=outcome.stored())  # type: ignore[arg-type]


def test_an_owners_endpoints_are_owed_its_runs_events_once_each(store_url: str) -> None:
    # on both backends: the outbox's one statement an event picks the endpoints in SQL of each dialect
    store = open_store(store_url)
    webhooks = Webhooks(store)
    ended, _ = webhooks.add("ana", PUBLIC, ["run.ended", "turn.ended"])
    waiting, _ = webhooks.add("ana", PUBLIC + "/wait", ["run.waiting"])
    others, _ = webhooks.add("bo", PUBLIC, ["run.ended", "run.waiting"])
    root = store.create_run("formula", "release", {}, owner="ana").id
    child = store.create_run("agent", "step", {}, owner="ana", parent_run_id=root).id
    with store.transaction(child) as tx:
        asked = tx.open_interaction("confirm", "Publish?")
        tx.set_status("waiting")
    _end(store, child)  # a sub-run's end is no event: its root's is
    _end(store, root)
    turn = store.create_run("ask", "q", {"turn_id": "turn_1", "conversation_id": "conv_1"}, owner="ana").id
    _end(store, turn, "failed")

    [waited] = webhooks.deliveries(waiting.id)
    assert (waited.event, waited.state, waited.attempts) == ("run.waiting", "pending", 0)
    data = waited.payload["data"]
    assert isinstance(data, dict) and data["run_id"] == root and data["asking_run_id"] == child
    assert data["interaction"] == {
        "id": asked.id,
        "kind": "confirm",
        "prompt": "Publish?",
        "tool": None,
        "step_id": None,
    }
    owed = {(d.event, d.payload["data"]["run_id"]) for d in webhooks.deliveries(ended.id)}  # type: ignore[index]
    assert owed == {("run.ended", root), ("run.ended", turn), ("turn.ended", turn)}
    [turned] = [d for d in webhooks.deliveries(ended.id) if d.event == "turn.ended"]
    assert turned.payload["data"] == {
        "turn_id": "turn_1",
        "conversation_id": "conv_1",
        "run_id": turn,
        "status": "done",
        "answer": "Done.",
    }
    assert webhooks.deliveries(others.id) == []  # another owner's endpoint hears nothing of ana's runs
    stored = json.dumps([d.payload for d in webhooks.deliveries(ended.id)])
    assert "internal_reason" not in stored and "/srv/secret" not in stored
    assert len({d.id for d in webhooks.deliveries(ended.id)}) == 3
    assert all(d.id.startswith("msg_") for d in webhooks.deliveries(ended.id))
    store.close()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://93.184.216.34/x", "expected an http:// or https:// URL"),
        ("http:///nohost", "expected a host name or address"),
        ("http://user:pw@93.184.216.34/x", "credentials in the URL are refused"),
        ("http://127.0.0.1:8000/x", "127.0.0.1, a private, loopback or link-local address"),
        ("http://localhost/x", "a private, loopback or link-local address"),
        ("http://10.1.2.3/x", "10.1.2.3, a private"),
        ("http://169.254.169.254/latest", "169.254.169.254, a private"),
        ("http://[::1]/x", "::1, a private"),
        ("http://[::ffff:127.0.0.1]/x", "a private, loopback or link-local address"),
        ("http://100.64.0.1/x", "100.64.0.1, a private"),
    ],
)
def test_an_endpoint_must_be_a_public_http_url(store: Store, url: str, why: str) -> None:
    with pytest.raises(ConfigError, match="url: .*" + why.replace("(", r"\(").replace(")", r"\)")):
        Webhooks(store).add("ana", url, ["run.ended"])
    assert Webhooks(store).listed() == []


def test_the_operator_may_allow_private_addresses_and_events_are_checked(store: Store) -> None:
    assert checked_url("http://127.0.0.1:9/x", allow_private=True) == "http://127.0.0.1:9/x"
    endpoint, secret = Webhooks(store).add("ana", "http://127.0.0.1:9/x", ["run.ended"], allow_private=True)
    assert secret.startswith("whsec_") and secret not in endpoint.model_dump_json()
    with pytest.raises(ConfigError, match=r"unknown event 'run\.started'"):
        Webhooks(store).add("ana", PUBLIC, ["run.started"])
    with pytest.raises(ConfigError, match="expected one or more of"):
        Webhooks(store).add("ana", PUBLIC, [])


class Receiver:
    """A fake receiver at the transport: answers ``statuses`` in turn (then 204), records each request."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[httpx.Request] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request)
            status = self.statuses.pop(0) if self.statuses else 204
        if status == 302:
            return httpx.Response(302, headers={"location": "http://127.0.0.1/elsewhere"})
        return httpx.Response(status)


def _deliver_all(deliverer: Deliverer, clock: Clock, rounds: int = 20) -> None:
    for _ in range(rounds):
        clock.now += 1.0  # past any backoff of these settings
        deliverer.run_pass()


def test_attempts_are_signed_retried_under_one_id_and_recorded(store: Store, clock: Clock) -> None:
    endpoint, secret = Webhooks(store).add("ana", PUBLIC, ["run.ended"])
    run_id = store.create_run("formula", "release", {}, owner="ana").id
    _end(store, run_id)
    receiver = Receiver([500, 302])
    deliverer = Deliverer(store, FAST, transport=httpx.MockTransport(receiver))
    try:
        deliverer.run_pass()
        [failed] = Webhooks(store).deliveries(endpoint.id)
        assert (failed.state, failed.attempts, failed.last_status, failed.last_error) == (
            "pending",
            1,
            500,
            "HTTP 500",
        )
        assert failed.next_at > clock.now  # the backoff
        _deliver_all(deliverer, clock)
    finally:
        deliverer.close()
    [done] = Webhooks(store).deliveries(endpoint.id)
    assert (done.state, done.attempts, done.last_status) == ("delivered", 3, 204)
    assert len(receiver.requests) == 3  # a redirect is an answer that is not a 2xx, never followed
    ids = {request.headers["webhook-id"] for request in receiver.requests}
    assert ids == {done.id}
    for request in receiver.requests:
        headers = dict(request.headers)
        # the library checks the timestamp against the real clock: the store's is a fixed one here
        signed = Webhook(secret).sign(done.id, _when(headers["webhook-timestamp"]), request.content)
        assert headers["webhook-signature"] == signed
        assert headers["content-type"] == "application/json"
        assert json.loads(request.content)["type"] == "run.ended"
        assert headers["host"] == "93.184.216.34"


def _when(stamp: str) -> Any:
    import datetime as dt

    return dt.datetime.fromtimestamp(int(stamp), dt.UTC)


def test_a_live_signature_verifies_with_the_library(store: Store, tmp_path: Path) -> None:
    live = SQLiteStore(tmp_path / "live.db")  # the real clock: the library checks the timestamp's age
    endpoint, secret = Webhooks(live).add("ana", PUBLIC, ["run.ended"])
    run_id = live.create_run("formula", "release", {}, owner="ana").id
    _end(live, run_id)
    receiver = Receiver()
    deliverer = Deliverer(live, FAST, transport=httpx.MockTransport(receiver))
    try:
        deliverer.run_pass()
    finally:
        deliverer.close()
    [request] = receiver.requests
    body = Webhook(secret).verify(request.content, dict(request.headers))
    assert body["data"]["run_id"] == run_id
    assert Webhooks(live).deliveries(endpoint.id)[0].state == "delivered"
    live.close()


def test_a_delivery_is_given_up_past_its_horizon(store: Store, clock: Clock) -> None:
    endpoint, _ = Webhooks(store).add("ana", PUBLIC, ["run.ended"])
    _end(store, store.create_run("formula", "release", {}, owner="ana").id)
    settings = DeliverySettings(timeout=2.0, backoff=10.0, max_backoff=10.0, give_up_after=25.0)
    deliverer = Deliverer(store, settings, transport=httpx.MockTransport(Receiver([503] * 100)))
    try:
        for _ in range(10):
            deliverer.run_pass()
            clock.now += 10.0
    finally:
        deliverer.close()
    [gone] = Webhooks(store).deliveries(endpoint.id)
    assert gone.state == "failed" and 2 <= gone.attempts <= 4
    assert gone.last_error.startswith(f"gave up after {gone.attempts} attempt(s): HTTP 503")


def test_a_name_that_resolves_to_a_private_address_at_delivery_is_refused_then(
    store: Store, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = {"hooks.example": "93.184.216.34"}
    real = socket.getaddrinfo

    def resolve(host: str, port: object, *args: object, **kwargs: object) -> Any:
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    endpoint, _ = Webhooks(store).add("ana", "https://hooks.example/in", ["run.ended"])
    _end(store, store.create_run("formula", "release", {}, owner="ana").id)
    answers["hooks.example"] = "127.0.0.1"  # the name now points inside (DNS rebinding)
    receiver = Receiver()
    deliverer = Deliverer(store, FAST, transport=httpx.MockTransport(receiver))
    try:
        deliverer.run_pass()
        [refused] = Webhooks(store).deliveries(endpoint.id)
        assert refused.state == "pending" and "127.0.0.1, a private, loopback" in refused.last_error
        assert receiver.requests == []
        answers["hooks.example"] = "93.184.216.34"
        _deliver_all(deliverer, clock, rounds=3)
    finally:
        deliverer.close()
    [request] = receiver.requests
    assert request.url.host == "93.184.216.34" and request.headers["host"] == "hooks.example"
    assert request.extensions["sni_hostname"] == "hooks.example"  # TLS checks the name, not the address


def test_two_deliverers_make_each_attempt_once(store: Store, clock: Clock) -> None:
    endpoint, _ = Webhooks(store).add("ana", PUBLIC, ["run.ended"])
    for n in range(40):
        _end(store, store.create_run("formula", f"r{n}", {}, owner="ana").id)
    receiver = Receiver()
    one, two = (Deliverer(store, FAST, transport=httpx.MockTransport(receiver)) for _ in range(2))
    try:
        threads = [threading.Thread(target=d.run_pass) for d in (one, two, one, two)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        one.close()
        two.close()
    delivered = Webhooks(store).deliveries(endpoint.id, state="delivered", limit=100)
    assert len(delivered) == 40 and all(d.attempts == 1 for d in delivered)
    assert sorted(r.headers["webhook-id"] for r in receiver.requests) == sorted(d.id for d in delivered)


def test_a_pruned_runs_deliveries_go_with_it(store: Store, clock: Clock) -> None:
    from plangate.store import retention

    endpoint, _ = Webhooks(store).add("ana", PUBLIC, ["run.ended"])
    old = store.create_run("formula", "old", {}, owner="ana").id
    _end(store, old)
    clock.now += 40 * 86_400
    new = store.create_run("formula", "new", {}, owner="ana").id
    _end(store, new)
    report = retention.prune(store, 30 * 86_400)
    assert (report.runs, report.rows["webhook_deliveries"]) == (1, 1)
    assert [d.run_id for d in Webhooks(store).deliveries(endpoint.id)] == [new]
