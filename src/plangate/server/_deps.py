"""What every route needs: the server's services and the owner the request acts as.

For: the ``Services`` the app factory builds once, and the FastAPI dependencies that hand them and the
caller's owner to routes (``ServicesDep``, ``OwnerDep``). Not for: making or storing tokens
(``tokens.py``).

Authentication: ``Authorization: Bearer pg_…``; the token is hashed and looked up in the store's tokens
(``tokens.Tokens``: only live tokens are found). A missing, malformed, unknown or revoked token is a 401
with ``WWW-Authenticate: Bearer``; the token itself never appears in a response or a log line. With
authentication off (local development), every request acts as the owner ``local``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from plangate.engines import ProcessEngines
from plangate.runs import Runs
from plangate.runs.quotas import LimitsOf
from plangate.runs.webhooks.deliver import DeliverySettings
from plangate.server._asks import AskJobs
from plangate.server._model_info import ModelInfo
from plangate.server._problems import Problem
from plangate.server._sources import SourceRegistry
from plangate.server.broadcast import Broadcaster
from plangate.server.tokens import Tokens, hash_token, looks_like_token
from plangate.store import Store
from plangate.tools import ToolRegistry

LOCAL_OWNER = "local"
"""The owner of every request when authentication is off."""


@dataclass
class Services:
    """The parts of a running server, shared by every request.

    Attributes:
        engines: the engines of this server (the formula one checks formulas; each creates its kind of
            run).
        runs: the facade every run is advanced, answered and cancelled through.
        auth: whether requests must carry a bearer token.
        pepper: the key of the token hash (``PLANGATE_TOKEN_PEPPER``), or None.
        search_paths: where formulas are looked for (before the default places).
        sources: the data sources owners registered (what copilot turns may ask about).
        asks: starts and shows copilot turns.
        model: the model runs use when they name none, as ``GET /v1/info`` tells of it.
        limits: each owner's limits.
        webhooks: how webhook deliveries are made (``allow_private`` also decides which URLs may be
            registered).
    """

    store: Store
    tools: ToolRegistry
    engines: ProcessEngines
    runs: Runs
    broadcaster: Broadcaster
    sources: SourceRegistry
    asks: AskJobs
    auth: bool = True
    pepper: bytes | None = None
    search_paths: list[Path] = field(default_factory=list)
    model: ModelInfo = field(default_factory=lambda: ModelInfo(None))
    limits: LimitsOf = field(default_factory=lambda: LimitsOf(None))
    webhooks: DeliverySettings = field(default_factory=DeliverySettings)


async def services(request: Request) -> Services:
    """The server's services (set by ``create_app``); async, so FastAPI calls it without a thread hop."""
    found: Services = request.app.state.services
    return found


ServicesDep = Annotated[Services, Depends(services)]

# Declared for the OpenAPI document (the "Authorize" button of /docs); the header is read below, so that
# each kind of failure gets its own message.
_bearer = HTTPBearer(auto_error=False, description="A token made with `plangate token create`.")


def _unauthorized(detail: str, error: str | None = None) -> Problem:
    challenge = 'Bearer realm="plangate"'
    if error is not None:
        challenge += f', error="{error}"'
    return Problem(401, "unauthorized", detail, headers={"WWW-Authenticate": challenge})


def current_owner(
    request: Request,
    services: ServicesDep,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The owner the request acts as.

    A plain function, so FastAPI runs it in its thread pool: the token lookup reads the store, which must
    never hold up the event loop.

    Raises:
        Problem: 401 when authentication is on and the request has no live token.
    """
    if not services.auth:
        return LOCAL_OWNER
    header = request.headers.get("authorization")
    if header is None:
        raise _unauthorized("this request needs a bearer token: send 'Authorization: Bearer <token>'")
    scheme, _, value = header.strip().partition(" ")
    token = value.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized(
            "expected the Authorization header to be 'Bearer <token>'", error="invalid_request"
        )
    if not looks_like_token(token):
        raise _unauthorized("the bearer token is not a plangate token", error="invalid_token")
    found = Tokens(services.store).find(hash_token(token, services.pepper))
    if found is None:
        raise _unauthorized("the bearer token is unknown or was revoked", error="invalid_token")
    return found.owner


OwnerDep = Annotated[str, Depends(current_owner)]


__all__ = ["LOCAL_OWNER", "OwnerDep", "Services", "ServicesDep", "current_owner", "services"]
