"""Refusing request bodies over a size limit before anything parses them, and JSON bodies that hold text no
UTF-8 can encode.

For: an ASGI middleware that answers 413 when ``Content-Length`` says the body is too large, and otherwise
reads the body itself, counting the bytes as they stream in (a chunked request declares no length), and
hands the application the body it read; a JSON body holding a lone surrogate (``"\\ud800"``: valid JSON,
no Unicode character) is a 422 naming where, where it would otherwise fail deep in a handler that stores
it. Not for: limits on responses or on event streams, or owners' limits (``_rate.py``,
``plangate.runs.quotas``).
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plangate.server._problems import problem_response

MAX_BODY = 1024 * 1024
"""The default limit: 1 MB."""


class BodyLimit:
    """Answer 413 to any HTTP request whose body is larger than ``limit`` bytes.

    Args:
        app: the application behind it.
        limit: the largest body accepted, in bytes.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        # The whole body is read here, at most ``limit`` bytes of it, so a chunked body that grows past the
        # limit is stopped while it streams in rather than after the application buffered all of it.
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        where = _lone_surrogate(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request"))
        if where is not None:
            await self._refuse_text(where, scope, receive, send)
            return
        pending = iter(messages)

        async def replay() -> Message:
            # First the messages read above, then the live channel (a stream waits on it for disconnects).
            for message in pending:
                return message
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse_text(where: str, scope: Scope, receive: Receive, send: Send) -> None:
        why = "a lone surrogate (a \\ud800-\\udfff escape outside a pair) is no text; nothing can store it"
        errors = [{"field": where, "message": why}]
        response = problem_response(422, "invalid-request", f"{where}: {why}", errors=errors)
        await response(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            413,
            "body-too-large",
            f"the request body is larger than the limit of {self.limit} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(body: bytes) -> str | None:
    """Where a JSON ``body`` holds a string (a key or a value) with a lone surrogate, as ``body.a.0.b``; None
    when it holds none, or is no JSON (the application says what is wrong with it then)."""
    if not _SURROGATE_ESCAPE.search(body):  # only an escape can write one: the bytes are UTF-8
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, object]] = [("body", parsed)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _encodes(value):
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                if not _encodes(key):
                    return where
                stack.append((f"{where}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}.{index}", item) for index, item in enumerate(value))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


__all__ = ["MAX_BODY", "BodyLimit"]
