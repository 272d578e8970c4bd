"""Security headers on every response: a strict Content-Security-Policy for the console and the API.

For: an ASGI middleware that adds ``Content-Security-Policy`` (scripts, styles, images and calls from the
server itself only; no inline script or style, no plugin, no framing), ``X-Content-Type-Options: nosniff``,
``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``. The console builds its DOM without
``innerHTML`` and loads only its own files (the vendored uPlot included), so the policy costs it nothing and
stops any script a bug might let in. The interactive API docs (``/docs``, ``/redoc``) are FastAPI's pages,
with inline scripts and a CDN of their own: they get every header but the policy. Not for: CORS (the API
allows no other origin) or authentication (``_deps.py``).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The policy of the console's pages and of every API response."""

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_DOCS = ("/docs", "/redoc")


class SecurityHeaders:
    """Add the security headers to every HTTP response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        with_policy = not path.startswith(_DOCS)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers.setdefault(name, value)
                if with_policy:
                    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            await send(message)

        await self.app(scope, receive, send_with_headers)


__all__ = ["CONTENT_SECURITY_POLICY", "SecurityHeaders"]
