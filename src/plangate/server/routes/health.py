"""``/healthz`` and ``/readyz``: is the process up, and can it reach its store; ``/v1/info``: what this
server runs with.

For: probes, which carry no token: ``/healthz`` says only that the process answers; ``/readyz`` reads the
store and says whether it can (nothing about any owner's runs, so it needs no token either). ``/v1/info``
(a token, as every ``/v1`` route) gives the version and the model runs use when they name none, and whether
it can run here. Not for: anything about runs.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import JsonValue

from plangate import __version__
from plangate.errors import StoreError
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=None, summary="Liveness: the process answers (no token needed)")
async def healthz() -> dict[str, JsonValue]:
    """Always ``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None, summary="Readiness: the store can be read (no token needed)")
def readyz(services: ServicesDep) -> dict[str, JsonValue]:
    """``{"status": "ready"}``, or a 503 problem when the store cannot be read (a plain function: FastAPI
    runs it in its thread pool, off the event loop)."""
    try:
        services.store.list_runs(limit=1)
    except StoreError:
        raise Problem(503, "store-unavailable", "the store cannot be read; see the server's log") from None
    return {"status": "ready"}


@router.get("/v1/info", response_model=None, summary="The server's version and the model its runs use")
def info(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """``{"version", "model": {"spec", "description", "origin", "available", "problem"}}``: the model of
    agent runs, agent and llm steps and copilot turns that name none; when it cannot run here (its extra
    or API key is missing: ``available`` false), ``problem`` says what to install or set, and those runs
    fail with that message while everything else works. A plain function: a first look may build the model
    (off the event loop)."""
    return {"version": __version__, "model": services.model.view()}


__all__ = ["router"]
