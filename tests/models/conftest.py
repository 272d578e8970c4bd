"""Model tests never reach a network and never read the developer's own keys or model settings."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "PLANGATE_MODEL",
)


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("a model test tried to open a network connection; use an httpx MockTransport")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    yield
