"""Refusing request bodies over a size limit before anything parses them.

For: an ASGI middleware that answers 413 when ``Content-Length`` says the body is too large, and otherwise
reads the body itself, counting the bytes as they stream in (a chunked request declares no length), and
hands the application the body it read. Not for: limits on responses or on event streams, or owners' limits
(``_rate.py``, ``plangate.runs.quotas``).
"""

from __future__ import annotations

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
        pending = iter(messages)

        async def replay() -> Message:
            # First the messages read above, then the live channel (a stream waits on it for disconnects).
            for message in pending:
                return message
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            413,
            "body-too-large",
            f"the request body is larger than the limit of {self.limit} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


__all__ = ["MAX_BODY", "BodyLimit"]
