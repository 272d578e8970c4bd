"""Spans sent over OTLP/HTTP by real processes to a real receiver: a run consented to and resumed in another
process is one trace, each span once.

The receiver (``otlp_receiver.py``) speaks the protocol Phoenix, Jaeger, Tempo and the OpenTelemetry
Collector take (OTLP over HTTP, protobuf); it stands in for Phoenix, whose package brings some seventy
others (pandas, pyarrow, grpcio, …), too heavy to install for a test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

RECEIVER = Path(__file__).with_name("otlp_receiver.py")
WORKER = Path(__file__).parents[1] / "agent" / "agent_worker.py"


@pytest.fixture
def receiver() -> Iterator[str]:
    process = subprocess.Popen([sys.executable, str(RECEIVER)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _worker(store: str, endpoint: str, *args: str) -> str:
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "plangate-test",
    }
    done = subprocess.run(
        [sys.executable, str(WORKER), store, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _spans(endpoint: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(f"{endpoint}/spans", timeout=10) as response:
        spans: list[dict[str, object]] = json.loads(response.read())
    return spans


@pytest.mark.slow
def test_a_run_resumed_in_another_process_is_one_trace_each_span_once(receiver: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'plangate.db'}"
    run_id, interaction_id = _worker(store, receiver, "start").split()
    first = _spans(receiver)
    assert [span["name"] for span in first] == ["chat scripted"]  # the call of the step that asked
    assert _worker(store, receiver, "approve", run_id, interaction_id).startswith("completed")
    spans = _spans(receiver)
    ids = [span["span_id"] for span in spans]
    assert len(ids) == len(set(ids)), "a span was sent twice"
    assert len({span["trace_id"] for span in spans}) == 1
    names = {span["span_id"]: span["name"] for span in spans}
    tree = sorted((str(span["name"]), names.get(span["parent_id"])) for span in spans)  # type: ignore[call-overload]
    assert tree == [
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("execute_tool place", "invoke_agent plangate"),
        ("invoke_agent plangate", None),
        ("plangate.wait confirm", "invoke_agent plangate"),
    ]
    root = next(span for span in spans if span["parent_id"] is None)
    attributes = root["attributes"]
    assert isinstance(attributes, dict)
    assert attributes["plangate.run.id"] == run_id and attributes["plangate.outcome.code"] == "done"
