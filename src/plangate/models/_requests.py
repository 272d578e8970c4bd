"""What every HTTP provider shares: the default request timeout and when (and how long) to retry.

For: ``request_timeout`` (an explicit value, else ``$PLANGATE_MODEL_TIMEOUT``, else the default a
``plangate.toml`` set through ``set_default_timeout``, else 120 s) and the retry
policy the ``openai`` and ``anthropic`` providers apply themselves (their SDKs' own retries are off): a
refused connection, HTTP 429 and 5xx are retried a few times with a growing pause; a timeout is not, since a
server that stopped answering once rarely answers the same request a moment later, and each retry would
add another whole timeout to the round; and ``client_for_request``, the SDK client a request goes out on.
Not for: mapping errors (``errors.py``) or any provider's request.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol, TypeVar

from plangate.errors import ConfigError

MODEL_TIMEOUT_ENV = "PLANGATE_MODEL_TIMEOUT"
"""Seconds a model request may wait for the server's next bytes (``plangate.toml``: ``model_timeout``)."""

DEFAULT_MODEL_TIMEOUT = 120.0
"""The default: long enough for a local model on a CPU to read a long prompt before its first token, short
enough that a server that hangs ends the round in two minutes rather than the SDKs' 10 (times 3 attempts)."""

MAX_RETRY_PAUSE = 20.0
"""The longest pause before a retry, even when the server's ``Retry-After`` asks for more."""


_configured: float | None = None


class _Client(Protocol):
    async def close(self) -> None: ...


_C = TypeVar("_C", bound=_Client)


@contextlib.asynccontextmanager
async def client_for_request(given: _C | None, make: Callable[[], _C]) -> AsyncIterator[_C]:
    """The SDK client a model was given (left open: its owner closes it), else a new one made for this
    request alone and closed when the request ends."""
    if given is not None:
        yield given
        return
    client = make()
    try:
        yield client
    finally:
        await client.close()


def set_default_timeout(seconds: float | None) -> None:
    """Make ``seconds`` the timeout of models that set none and run where ``$PLANGATE_MODEL_TIMEOUT`` is
    unset (``plangate.toml``'s ``model_timeout``); None restores 120 s.

    Raises:
        ConfigError: not a positive number of seconds.
    """
    global _configured
    _configured = None if seconds is None else request_timeout(seconds, where="model_timeout")


def request_timeout(value: float | None, *, where: str) -> float:
    """The timeout of a provider: ``value``, else ``$PLANGATE_MODEL_TIMEOUT``, else the configured default
    (``set_default_timeout``), else 120 s.

    Args:
        value: the timeout given in code or in the model spec (``?timeout=30``).
        where: what to name in an error (``openai:gpt-4o-mini timeout``).

    Raises:
        ConfigError: the value (or the variable) is not a positive number of seconds.
    """
    if value is None:
        raw = os.environ.get(MODEL_TIMEOUT_ENV, "").strip()
        if not raw:
            return _configured if _configured is not None else DEFAULT_MODEL_TIMEOUT
        where = f"{MODEL_TIMEOUT_ENV}={raw!r}"
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{where}: expected a positive number of seconds") from None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value)


def retry_pause(attempt: int, headers: Mapping[str, str] | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1``: the server's ``Retry-After`` when it sends one
    (at most ``MAX_RETRY_PAUSE``), else 0.5 s, 1 s, 2 s, ..."""
    if headers is not None:
        raw = headers.get("retry-after-ms")
        scale = 1000.0
        if raw is None:
            raw, scale = headers.get("retry-after"), 1.0
        try:
            asked = float(raw) / scale if raw is not None else None
        except ValueError:
            asked = None  # an HTTP date: not worth parsing for a pause this short
        if asked is not None and asked >= 0:
            return min(asked, MAX_RETRY_PAUSE)
    return min(0.5 * 2.0**attempt, MAX_RETRY_PAUSE)


__all__ = [
    "DEFAULT_MODEL_TIMEOUT",
    "MAX_RETRY_PAUSE",
    "MODEL_TIMEOUT_ENV",
    "request_timeout",
    "retry_pause",
    "set_default_timeout",
]
