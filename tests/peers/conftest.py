"""Real peer processes for the tests of this folder: llama-cpp-python's OpenAI-compatible server running the
packaged SmolLM2 model, and an HTTP server that hangs. Every process starts on a free loopback port, has a
bounded time to come up, and is killed when its fixture ends.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plangate.models.local import packaged_model_path
from plangate.models.openai import forget_negotiated

HERE = Path(__file__).resolve().parent
STARTUP_LIMIT = 180.0
"""Seconds llama-cpp-python's server has to load the model and answer (a busy two-core CI machine)."""

_PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "PLANGATE_MODEL",
    "PLANGATE_OPENAI_FORMAT",
    "PLANGATE_MODEL_TIMEOUT",
)


@pytest.fixture(autouse=True)
def _own_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No developer key or model setting leaks in, and no format negotiated by another test carries over."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    forget_negotiated()
    yield
    forget_negotiated()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a process and its group: SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass(frozen=True)
class LlamaServer:
    """A running ``python -m llama_cpp.server``: its OpenAI-compatible base URL and its log."""

    base_url: str
    log: Path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama") / "server.log"
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_model_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "2",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                tail = log.read_text()[-3000:]
                pytest.fail(f"llama_cpp.server did not answer within {STARTUP_LIMIT:g} s:\n{tail}")
            time.sleep(0.5)
        yield LlamaServer(base_url, log)
    finally:
        stop(process)


@dataclass(frozen=True)
class HangingServer:
    """A server that takes requests and never answers; ``requests()`` counts the ones it received."""

    base_url: str
    count_file: Path

    def requests(self) -> int:
        if not self.count_file.exists():
            return 0
        return len(self.count_file.read_text().splitlines())


@pytest.fixture
def hanging_server(tmp_path: Path) -> Iterator[HangingServer]:
    count_file = tmp_path / "requests.txt"
    process = subprocess.Popen(
        [sys.executable, str(HERE / "hanging_http_server.py"), str(count_file)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        line = process.stdout.readline().decode().strip() if ready else ""  # the port, once it listens
        assert line.isdigit(), f"the hanging server did not start: {line!r}"
        yield HangingServer(f"http://127.0.0.1:{line}/v1", count_file)
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()
