"""Errors a model provider raises, all ``RunError``s, and the mapping from HTTP statuses to them.

What it is for: one small tree the runtime can act on (retry when ``retryable``, stop on an authentication
failure), and message text that never carries a secret. What it is not for: output the protocol cannot use
(``plangate.decisions.DecisionParseError``, a ``ModelBehaviorError``).

::

    RunError
    ├── ModelProviderError            the provider failed; .provider, .status, .retryable
    │   ├── ModelAuthenticationError  401 / 403: the key is missing, wrong or not allowed
    │   ├── ModelRequestError         400 / 404 / 413 / 422: the request was refused as it stands
    │   ├── ModelRateLimitError       429: too many requests or no quota left (retryable)
    │   └── ModelUnavailableError     5xx, 529, a timeout or no connection (retryable)
    │       └── ModelTimeoutError     no answer within the request timeout (not retried by the providers)
    └── ModelBehaviorError
        └── ScriptExhaustedError      a scripted model was called once more than it has responses
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from plangate.errors import ModelBehaviorError, RunError

# Shapes of provider secrets, masked even when a server echoes part of a key back in an error body.
_SECRET_SHAPES = re.compile(r"\b(?:sk|pk|rk)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)
_MAX_DETAIL = 300


class ModelProviderError(RunError):
    """A model provider failed to answer.

    Attributes:
        provider: the model's name (``openai:gpt-4o-mini``).
        status: the HTTP status, or ``None`` when no response came (timeout, connection).
        retryable: whether the same request may succeed later.
    """

    retryable = False

    def __init__(self, message: str, *, provider: str, status: int | None = None) -> None:
        self.provider = provider
        self.status = status
        super().__init__(message)


class ModelAuthenticationError(ModelProviderError):
    """The provider refused the credentials (HTTP 401 or 403)."""


class ModelRequestError(ModelProviderError):
    """The provider refused the request as it stands (HTTP 400, 404, 413, 422, ...)."""


class ModelRateLimitError(ModelProviderError):
    """Too many requests, or no quota left (HTTP 429)."""

    retryable = True


class ModelUnavailableError(ModelProviderError):
    """The provider is down, overloaded, timed out or unreachable."""

    retryable = True


class ModelTimeoutError(ModelUnavailableError):
    """The server sent nothing for the whole request timeout (``$PLANGATE_MODEL_TIMEOUT``, default 120 s).

    Retryable in principle, but the providers do not retry it themselves: each retry would cost another
    whole timeout, and a server that hung once rarely answers the same request a moment later.
    """


class ScriptExhaustedError(ModelBehaviorError):
    """A ``ScriptedModel`` was asked for more responses than its script holds."""


MIN_SECRET_LENGTH = 8
"""Shorter values are not treated as secrets: a key of ``x`` (a local server that checks none) must not
mask every ``x`` of a message."""

# What a secret must not be glued to, on either side, to count as the secret itself (a whole token).
_TOKEN_CHAR = r"[A-Za-z0-9_\-]"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Mask the given secrets (``MIN_SECRET_LENGTH`` characters or more, as whole tokens) and anything
    shaped like an API key in ``text``."""
    found = {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_LENGTH}
    for secret in sorted(found, key=len, reverse=True):  # a secret inside a longer one goes with it
        whole = re.compile(rf"(?<!{_TOKEN_CHAR}){re.escape(secret)}(?!{_TOKEN_CHAR})")
        text = whole.sub("[redacted]", text)
    return _SECRET_SHAPES.sub("[redacted]", text)


def server_detail(body: object, fallback: str) -> str:
    """The human part of a provider's error body (``{"error": {"message": ...}}`` and its variants)."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return fallback


def status_error(
    provider: str, status: int, detail: str, *, secrets: Iterable[str | None] = ()
) -> ModelProviderError:
    """The error for an HTTP error status from ``provider``, with the server's detail made safe to show.

    Args:
        provider: the model's name, for the message.
        status: the HTTP status.
        detail: the server's own message (redacted and shortened here).
        secrets: values that must never appear (the API key).
    """
    cls: type[ModelProviderError]
    if status in (401, 403):
        cls, what = ModelAuthenticationError, "the provider refused the credentials"
    elif status == 429:
        cls, what = ModelRateLimitError, "rate limited or out of quota"
    elif status >= 500 or status in (408, 409):
        cls, what = ModelUnavailableError, "the provider is unavailable"
    else:
        cls, what = ModelRequestError, "the provider refused the request"
    safe = redact(" ".join(detail.split()), secrets)
    if len(safe) > _MAX_DETAIL:
        safe = safe[: _MAX_DETAIL - 1] + "…"
    suffix = f": {safe}" if safe else ""
    return cls(f"{provider}: HTTP {status}, {what}{suffix}", provider=provider, status=status)


__all__ = [
    "MIN_SECRET_LENGTH",
    "ModelAuthenticationError",
    "ModelProviderError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "ScriptExhaustedError",
    "redact",
    "server_detail",
    "status_error",
]
