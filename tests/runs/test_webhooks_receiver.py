"""Webhooks delivered at least once to a real receiver process that refuses the first attempts of each
message and is SIGKILLed mid-way (one delivery recorded, never answered), then started again: two
deliverers on one PostgreSQL store (as two servers or workers would) deliver every event, every signature
verifies with the ``standardwebhooks`` library in the receiver, and a delivery the receiver saw twice came
both times under the same ``webhook-id``. Short backoff settings keep it within seconds."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from plangate.runs import Outcome
from plangate.runs.webhooks import Webhooks
from plangate.runs.webhooks.deliver import Deliverer, DeliverySettings
from plangate.store import open_store

pytestmark = pytest.mark.slow

RECEIVER = Path(__file__).parent / "webhook_receiver.py"
EVENTS = 30
SETTINGS = DeliverySettings(
    timeout=2.0, backoff=0.2, max_backoff=1.0, give_up_after=600.0, allow_private=True, every=0.05
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _receiver(port: int, secret: str, log: Path, hang_at: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, str(RECEIVER), str(port), secret, str(log), "2", str(hang_at)]
    return subprocess.Popen(args)


def _until(check: object, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {within:g} s waiting for {what}"
        time.sleep(0.05)


@pytest.mark.timeout(180)
def test_every_event_reaches_a_receiver_that_fails_and_dies(postgres_url: str, tmp_path: Path) -> None:
    stores = [open_store(postgres_url) for _ in range(3)]
    store = stores[0]
    port, log = free_port(), tmp_path / "received.jsonl"
    endpoint, secret = Webhooks(store).add(
        "hooked", f"http://127.0.0.1:{port}/in", ["run.ended"], allow_private=True
    )
    ended = Outcome(status="completed", stage="run", code="done", user_message="Done.").stored()
    run_ids = []
    for n in range(EVENTS):
        run_id = store.create_run("formula", f"r{n}", {}, owner="hooked").id
        with store.transaction(run_id) as tx:
            tx.set_status("completed", outcome=ended)
        run_ids.append(run_id)

    receiver = _receiver(port, secret, log, hang_at=EVENTS // 2)
    stop = threading.Event()
    deliverers = [Deliverer(other, SETTINGS) for other in stores[1:]]
    threads = [threading.Thread(target=d.forever, args=(stop,)) for d in deliverers]
    for thread in threads:
        thread.start()
    try:
        _until(lambda: Path(f"{log}.hung").exists(), 60, "the receiver to hang mid-way")
        receiver.send_signal(signal.SIGKILL)
        receiver.wait(timeout=10)
        time.sleep(1.0)  # attempts meanwhile find nobody listening
        receiver = _receiver(port, secret, log, hang_at=0)

        def all_delivered() -> bool:
            listed = Webhooks(store).deliveries(endpoint.id, state="delivered", limit=100)
            return len(listed) == EVENTS

        _until(all_delivered, 90, "every delivery to be made")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        for deliverer in deliverers:
            deliverer.close()
        receiver.kill()
        receiver.wait(timeout=10)

    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(item["valid"] for item in received), "a signature did not verify"
    assert {item["run_id"] for item in received} == set(run_ids)
    deliveries = Webhooks(store).deliveries(endpoint.id, limit=100)
    by_id = {delivery.id: delivery for delivery in deliveries}
    assert {item["id"] for item in received} == set(by_id)
    for item in received:  # a delivery is one event: the same id always carries the same run's event
        assert by_id[item["id"]].payload["data"]["run_id"] == item["run_id"]  # type: ignore[index]
    seen = Counter(item["id"] for item in received)
    hung = Path(f"{log}.hung").read_text()
    assert seen[hung] == 2, "the delivery the receiver died on was not made again under its id"
    assert all(delivery.attempts >= 3 for delivery in deliveries)  # two refused, then received
    for opened in stores:
        opened.close()
