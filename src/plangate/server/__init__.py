"""The HTTP API: runs, their live event streams (SSE), interactions, formulas and tools, behind bearer tokens.

For: ``create_app(store, tools)`` (the FastAPI application; ``plangate serve`` runs it under uvicorn) and the
token helpers the CLI shares with it. Not for: any engine logic (``plangate.formulas``, ``plangate.agent``).

Layout: ``app`` (the factory), ``routes/`` (one module per resource), ``broadcast`` (commits fanned out to
event streams), ``supervisor`` (a task per active run, recovery at start-up), ``_agents`` (agent runs with
the server's model and tools), ``_deps`` (services and authentication), ``_problems`` (errors as problem
documents), ``_limits`` (the body-size limit), ``schemas`` (request bodies and JSON views) and ``tokens``.

The application needs the ``server`` extra (FastAPI, uvicorn, sse-starlette); ``tokens`` does not, and
importing this package alone imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plangate.server.app import create_app

_EXTRA_HINT = 'the HTTP server needs its extra: pip install "plangate[server]"'


def __getattr__(name: str) -> Any:
    if name == "create_app":
        try:
            from plangate.server.app import create_app
        except ImportError as exc:
            from plangate.errors import ConfigError

            raise ConfigError(f"{_EXTRA_HINT} ({exc.name or exc} is missing)") from None
        return create_app
    raise AttributeError(f"module 'plangate.server' has no attribute {name!r}")


__all__ = ["create_app"]
