"""Real peer processes for the tests of this folder: llama-cpp-python's OpenAI-compatible server running the
packaged SmolLM2 model, and an HTTP server that hangs. Every process starts on a free loopback port, has a
bounded time to come up, and is killed when its fixture ends.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from peer_helpers import HangingServer, LlamaServer, free_port, stop

from plangate.models.local import LocalModel, packaged_model_path
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


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama") / "server.log"
    port = free_port()
    # as many threads as the local model takes here (one in a parallel run of the tests: parallel_plugin.py)
    threads = str(LocalModel().n_threads)
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_model_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", threads,
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
