"""Arize Phoenix, a real trace collector, for the tests that send runs' spans over OTLP and read them back.

One Phoenix server for the whole session (``phoenix serve`` from ``.venv-phoenix``, which ``./dev setup`` and
``./dev test`` make: its pins are not the project's), started on first use on free loopback ports, with its
data in a temporary folder. Processes export to a tee in front of it (``runs/otlp_receiver.py``), which
passes each request on to Phoenix and keeps every span it saw: Phoenix keeps the first of two spans with
one id, so a span sent twice shows only at the tee. ``PhoenixServer.spans`` reads a trace back from
Phoenix's REST API (``GET /v1/projects/default/spans``), ``tree`` draws it as text.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PHOENIX = REPO / ".venv-phoenix" / "bin" / "phoenix"
RECEIVER = Path(__file__).parent / "runs" / "otlp_receiver.py"
# Phoenix loads some 140 packages before it answers: 20 s on a quiet two-core machine, minutes on a busy one.
_START_SECONDS = 300.0
# why Phoenix did not start: the session's later tests fail at once, not after minutes each
_failed: list[str] = []

Span = dict[str, object]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@dataclass
class PhoenixServer:
    """The session's Phoenix: ``url`` (its UI and APIs) and ``endpoint`` (the tee to export to)."""

    url: str
    endpoint: str

    def env(self, **more: str) -> dict[str, str]:
        """The environment of a process that traces to Phoenix (through the tee), batches flushed fast."""
        return {
            **os.environ,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": "plangate-test",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            **more,
        }

    def sent(self, trace_id: str) -> list[Span]:
        """Every span of ``trace_id`` (hex) sent to the tee, in order, duplicates included."""
        spans = _get(f"{self.endpoint}/spans")
        assert isinstance(spans, list)
        return [span for span in spans if span["trace_id"] == trace_id]

    def spans(self, trace_id: str, count: int, timeout: float = 30.0) -> list[Span]:
        """The spans of ``trace_id`` (hex) as Phoenix has them, once it has ``count`` (Phoenix stores what it
        receives in batches), or what it has after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._read(trace_id)
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.25)

    def _read(self, trace_id: str) -> list[Span]:
        found: list[Span] = []
        cursor: str | None = None
        while True:
            query = {"trace_id": trace_id, "limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = _get(f"{self.url}/v1/projects/default/spans?{urllib.parse.urlencode(query)}")
            assert isinstance(page, dict)
            for span in page["data"]:
                context = span["context"]
                found.append(
                    {
                        "trace_id": context["trace_id"],
                        "span_id": context["span_id"],
                        "parent_id": span.get("parent_id"),
                        "name": span["name"],
                        "attributes": span.get("attributes") or {},
                        "start": span.get("start_time"),
                    }
                )
            cursor = page.get("next_cursor")
            if not cursor:
                return found


def tree(spans: list[Span]) -> str:
    """``spans`` drawn as an indented tree, children in the order they started."""
    children: dict[object, list[Span]] = {}
    ids = {span["span_id"] for span in spans}
    for span in sorted(spans, key=lambda span: str(span["start"])):
        parent = span["parent_id"] if span["parent_id"] in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def draw(span: Span, prefix: str, last: bool, top: bool) -> None:
        lines.append(str(span["name"]) if top else f"{prefix}{'└── ' if last else '├── '}{span['name']}")
        below = children.get(span["span_id"], [])
        inner = "" if top else prefix + ("    " if last else "│   ")
        for index, child in enumerate(below):
            draw(child, inner, index == len(below) - 1, False)

    for root in children.get(None, []):
        draw(root, "", True, True)
    return "\n".join(lines)


def shape(spans: list[Span]) -> list[tuple[str, str | None]]:
    """Each span's name beside its parent's, sorted: a tree's shape, whatever the ids."""
    names = {span["span_id"]: str(span["name"]) for span in spans}
    return sorted((str(span["name"]), names.get(span["parent_id"])) for span in spans)


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _give_up(f"phoenix serve exited ({process.returncode})", log)
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    _give_up(f"phoenix serve did not answer in {_START_SECONDS:.0f}s", log)


def _give_up(why: str, log: Path) -> None:
    _failed.append(f"{why}:\n{log.read_text(errors='replace')[-3000:]}")
    pytest.fail(_failed[0], pytrace=False)


@pytest.fixture(scope="session")
def phoenix() -> Iterator[PhoenixServer]:
    """The session's Phoenix server, started on first use, stopped (its data removed) at the end."""
    if not PHOENIX.exists():
        pytest.fail(f"{PHOENIX} is missing: ./dev setup installs Arize Phoenix there", pytrace=False)
    if _failed:
        pytest.fail(_failed[0], pytrace=False)
    folder = Path(tempfile.mkdtemp(prefix="plangate-test-phoenix-"))
    port = _free_port()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PHOENIX_"))},
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PYTHONUNBUFFERED": "1",  # its log says how far it got, should it not start
    }
    log = folder / "phoenix.log"
    with log.open("wb") as out:
        server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    tee: subprocess.Popen[str] | None = None
    try:
        _wait_until_up(url, server, log)
        tee = subprocess.Popen([sys.executable, str(RECEIVER), url], stdout=subprocess.PIPE, text=True)
        assert tee.stdout is not None
        yield PhoenixServer(url, f"http://127.0.0.1:{tee.stdout.readline().strip()}")
    finally:
        for process in (tee, server):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        if tee is not None and tee.stdout is not None:
            tee.stdout.close()
        shutil.rmtree(folder, ignore_errors=True)
