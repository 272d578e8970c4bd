"""``/healthz`` and ``/readyz``: is the process up, and can it reach its store.

For: probes, which carry no token: ``/healthz`` says only that the process answers; ``/readyz`` reads the
store and says whether it can (nothing about any owner's runs, so it needs no token either). Not for:
anything about runs.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import JsonValue

from plangate.errors import StoreError
from plangate.server._deps import ServicesDep
from plangate.server._problems import Problem

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=None, summary="Liveness: the process answers (no token needed)")
async def healthz() -> dict[str, JsonValue]:
    """Always ``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}


@router.get(
    "/readyz", response_model=None, summary="Readiness: the store can be read (no token needed)"
)
def readyz(services: ServicesDep) -> dict[str, JsonValue]:
    """``{"status": "ready"}``, or a 503 problem when the store cannot be read (a plain function: FastAPI
    runs it in its thread pool, off the event loop)."""
    try:
        services.store.list_runs(limit=1)
    except StoreError:
        raise Problem(503, "store-unavailable", "the store cannot be read; see the server's log") from None
    return {"status": "ready"}


__all__ = ["router"]
