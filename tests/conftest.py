"""Test-wide settings: hypothesis profiles (CI runs the big one), a guard against real network calls, the
real servers some tests use (``services_plugin.py``: PostgreSQL and Redis; ``phoenix_plugin.py``: Arize
Phoenix; each started on demand), how a parallel run shares the tests out (``parallel_plugin.py``) and the
CPU seconds each test costs (``cputime_plugin.py``: ``--cpu-durations=N``)."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["services_plugin", "phoenix_plugin", "cputime_plugin", "parallel_plugin"]

settings.register_profile("dev", max_examples=300, deadline=None)
settings.register_profile(
    "ci", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # unix sockets and the like never leave the machine
    host = str(address[0])
    if host in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_prog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print next commands as ``plangate …`` whatever ran the tests (``./dev test`` exports
    ``PLANGATE_PROG``); a test about that variable sets it itself."""
    monkeypatch.delenv("PLANGATE_PROG", raising=False)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test that tries to reach a real network model or service beyond loopback."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield
