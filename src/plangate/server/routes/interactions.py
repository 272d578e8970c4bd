"""``/v1/interactions``: the caller's questions and consent requests, and answering one.

For: listing interactions of the caller's runs and resolving one (approve, reject, answer, edit). A
resolution commits before the response; the run then continues in the background. An interaction that is
not open any more (answered already, by this caller or a concurrent one, or expired) is a 409 with the
reason ``stale_interaction``; another owner's is a 404. Every answer goes through the ``Runs`` facade, the
same way for every kind of run: it is committed (or handed to the process advancing the run) before the
response, never stops what runs, and the run acts on it in the background. Not for: what a resolution does
to a run (the engines).

The store calls made here never run on the event loop: the routes that only read are plain functions
(FastAPI runs them in its thread pool), and ``resolve_interaction`` hands its own reads to the pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.errors import InteractionError, StaleInteraction
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem
from plangate.server._rate import LimitedOwnerDep
from plangate.server.schemas import ResolveRequest, interaction_view, run_view
from plangate.store import InteractionStatus

router = APIRouter(prefix="/v1/interactions", tags=["interactions"])


@router.get("", response_model=None, summary="List the caller's interactions")
def list_interactions(
    services: ServicesDep,
    owner: OwnerDep,
    status: Annotated[
        InteractionStatus | None, Query(description="Only interactions in this status.")
    ] = None,
    run_id: Annotated[str | None, Query(max_length=200, description="Only this run's.")] = None,
) -> dict[str, JsonValue]:
    """Interactions of the caller's runs, oldest first."""
    found = services.store.list_interactions(status=status, run_id=run_id, owner=owner)
    return {"items": [interaction_view(item) for item in found]}


@router.get("/{interaction_id}", response_model=None, summary="Show one interaction")
def get_interaction(interaction_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The interaction, if it belongs to one of the caller's runs."""
    return {"interaction": interaction_view(services.store.get_interaction(interaction_id, owner=owner))}


@router.post("/{interaction_id}", response_model=None, summary="Resolve an open interaction")
async def resolve_interaction(
    interaction_id: str, body: ResolveRequest, services: ServicesDep, owner: LimitedOwnerDep
) -> dict[str, JsonValue]:
    """Approve, reject (with a reason), answer (with text) or edit (approve with changed arguments).

    Responds once the resolution is committed; the run continues in the background (follow its events)."""
    store = services.store
    interaction = await run_in_threadpool(store.get_interaction, interaction_id, owner=owner)
    run = await run_in_threadpool(store.get_run, interaction.run_id, owner=owner)
    try:
        await services.runs.answer(interaction_id, body.resolution(), owner)
    except StaleInteraction as exc:
        raise Problem(409, "stale-interaction", str(exc), reason=StaleInteraction.code) from None
    except InteractionError as exc:
        raise Problem(422, "resolution-does-not-fit", str(exc)) from None

    def answer() -> dict[str, JsonValue]:
        return {
            "interaction": interaction_view(store.get_interaction(interaction_id, owner=owner)),
            "run": run_view(store.get_run(run.id, owner=owner)),
        }

    return await run_in_threadpool(answer)


__all__ = ["router"]
