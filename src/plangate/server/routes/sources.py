"""``/v1/sources``: the data sources an owner may ask about, and registering new ones.

For: listing the caller's sources (the bundled shop data and the ones it registered; never another owner's),
registering a SQLite file under the server's data directories or a PostgreSQL URL (opened and described
first: one that cannot be opened is a 4xx problem saying why, with no server path and no password), and
removing one. Not for: the checks themselves (``_sources.py``).

Registering opens a database, which may take seconds: it runs in the thread pool, like every store call.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem
from plangate.server._sources import SourceError
from plangate.server.schemas import SourceName, SourceRequest

router = APIRouter(prefix="/v1/sources", tags=["sources"])


@router.get("", response_model=None, summary="List the data sources the caller may ask about")
def list_sources(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The bundled shop data (``builtin``), then the caller's own sources, oldest first."""
    return {"items": [entry.view() for entry in services.sources.listed(owner)]}


@router.post(
    "",
    status_code=201,
    response_model=None,
    summary="Register a SQLite file or a PostgreSQL URL as a data source",
    responses={
        403: {"description": "A file outside the server's data directories, in a hidden folder, or a store."},
        409: {"description": "The name is taken."},
        422: {"description": "It cannot be opened, or holds no tables; the detail says why."},
    },
)
async def register_source(
    body: Annotated[SourceRequest, Body()], services: ServicesDep, owner: OwnerDep
) -> dict[str, JsonValue]:
    """Open the data, read its schema, and keep it as the caller's source ``name``."""
    try:
        entry = await run_in_threadpool(services.sources.register, owner, body.data, body.name)
    except SourceError as exc:
        raise Problem(exc.status, exc.code, str(exc)) from None
    return {"source": entry.view()}


@router.delete("/{name}", status_code=204, summary="Forget one of the caller's data sources")
def remove_source(name: SourceName, services: ServicesDep, owner: OwnerDep) -> None:
    """Its turns stay as they were stored; new questions cannot name it any more."""
    services.sources.remove(owner, name)


__all__ = ["router"]
