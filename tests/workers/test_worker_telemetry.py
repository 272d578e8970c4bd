"""A run taken over by another worker after a SIGKILL is still one trace in Arize Phoenix, each span once;
the worker that took it over counts the takeover, and serves the queue's depth, on its ``/metrics``.

Real Celery workers on Redis and PostgreSQL, tracing over OTLP/HTTP to the session's Phoenix (through its
tee, which shows a span sent twice even with one id); bounded in time.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from worker_helpers import Workers, submit_formula, until

from phoenix_plugin import PhoenixServer, shape, tree
from plangate.runs import telemetry
from plangate.runs.telemetry._spans import derived_id
from plangate.store import Store
from plangate.workers import RunQueue

pytestmark = pytest.mark.slow

_OPTIONS = {"ttl": 3, "reap": 0.5, "grace": 4}


@pytest.fixture
def traced(phoenix: PhoenixServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[PhoenixServer]:
    """Every process started from here on traces to Phoenix (the workers copy this environment)."""
    for key, value in phoenix.env().items():
        if key.startswith("OTEL_"):
            monkeypatch.setenv(key, value)
    telemetry.reset()
    yield phoenix
    telemetry.reset()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.timeout(180)
def test_a_run_taken_over_after_a_sigkill_is_one_trace_each_span_once(
    traced: PhoenixServer, store: Store, queue: RunQueue, workers: Workers
) -> None:
    first = workers.start(**_OPTIONS)
    workers.wait_ready(first)
    run_id = submit_formula(store, queue, "slow", seconds=3, label="taken-over")
    # killed while its first step blocks: the step's start is committed, its end is not
    until(lambda: any(e.type == "step_state" for e in store.events(run_id)), 60, "the first step to start")
    workers.kill(first)
    port = _free_port()
    second = workers.start(metrics_port=port, **_OPTIONS)
    workers.wait_ready(second)
    until(lambda: store.get_run(run_id).status == "completed", 90, "the other worker to finish the run")

    trace = f"{derived_id(128, 'trace', run_id):032x}"
    expected = ["invoke_workflow slow", "plangate.step after", "plangate.step work", "plangate.step write"]
    deadline = time.monotonic() + 30
    while not set(expected) <= {str(span["name"]) for span in traced.sent(trace)}:
        assert time.monotonic() < deadline, "the spans never reached the tee"
        time.sleep(0.25)
    sent = traced.sent(trace)
    ids = [span["span_id"] for span in sent]
    assert len(ids) == len(set(ids)), f"a span was sent twice: {sorted(str(s['name']) for s in sent)}"
    spans = traced.spans(trace, len(sent))
    assert shape(spans) == shape(sent)  # Phoenix shows what was sent, once
    names = [name for name, _ in shape(spans)]
    assert names.count("plangate.step work") == 1
    assert set(expected) <= set(names)
    print(f"\n{tree(spans)}")  # the tree as Phoenix has it (pytest -s)
    assert tree(spans).splitlines()[0] == "invoke_workflow slow"

    samples = _scrape(port)
    assert samples["plangate_lease_takeovers_total"] >= 1  # the second worker took the run over
    assert samples["plangate_queue_depth"] == 0  # nothing left waiting for a worker
