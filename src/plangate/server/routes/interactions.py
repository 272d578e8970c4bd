"""``/v1/interactions``: the caller's questions and consent requests, and answering one.

For: listing interactions of the caller's runs and resolving one (approve, reject, answer, edit). A
resolution commits before the response (or, when the process advancing the run must take it, is handed
to it: a 202 after at most ``ANSWER_WAIT`` seconds); the run then continues in the background. An
interaction that is not open any more (answered already, by this caller or a concurrent one, or expired)
is a 409 with the reason ``stale_interaction``; another owner's is a 404. Every answer goes through the
``Runs`` facade, the same way for every kind of run: it is committed (or handed to the process advancing
the run) before the response, never stops what runs, and the run acts on it in the background. Not for:
what a resolution does to a run (the engines).

The store calls made here never run on the event loop: the routes that only read are plain functions
(FastAPI runs them in its thread pool), and ``resolve_interaction`` hands its own reads to the pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.errors import InteractionError, StaleInteraction
from plangate.formulas._answers import answer_handed_on
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem
from plangate.server._rate import LimitedOwnerDep
from plangate.server.schemas import ResolveRequest, interaction_view, run_view
from plangate.store import InteractionStatus, Store

router = APIRouter(prefix="/v1/interactions", tags=["interactions"])
logger = logging.getLogger("plangate.server")


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


ANSWER_WAIT = 1.0
"""Seconds an answer handed to the process advancing its run (stored for it to take) is waited for before
the response: past them, the request answers 202 and the run's events say when it was taken."""

_pending: set[asyncio.Task[str]] = set()
"""Answers still finishing after their 202, kept referenced until they end."""


@router.post("/{interaction_id}", response_model=None, summary="Resolve an open interaction")
async def resolve_interaction(
    interaction_id: str,
    body: ResolveRequest,
    services: ServicesDep,
    owner: LimitedOwnerDep,
    response: Response,
) -> dict[str, JsonValue]:
    """Approve, reject (with a reason), answer (with text) or edit (approve with changed arguments).

    Responds once the resolution is committed (200), or, when another process advances the run, once it
    is stored for that process to take (202, ``"accepted": true``, after at most ``ANSWER_WAIT`` seconds:
    the interaction closes when that process takes it); either way the run continues in the background
    (follow its events)."""
    store = services.store
    interaction = await run_in_threadpool(store.get_interaction, interaction_id, owner=owner)
    run = await run_in_threadpool(store.get_run, interaction.run_id, owner=owner)
    task = asyncio.ensure_future(services.runs.answer(interaction_id, body.resolution(), owner))
    accepted = await _handed_on(task, store, interaction_id)
    if accepted:
        _pending.add(task)
        task.add_done_callback(_settled)
        response.status_code = 202
    else:
        try:
            task.result()
        except StaleInteraction as exc:
            raise Problem(409, "stale-interaction", str(exc), reason=StaleInteraction.code) from None
        except InteractionError as exc:
            raise Problem(422, "resolution-does-not-fit", str(exc)) from None

    def answer() -> dict[str, JsonValue]:
        return {
            "interaction": interaction_view(store.get_interaction(interaction_id, owner=owner)),
            "run": run_view(store.get_run(run.id, owner=owner)),
            "accepted": accepted,
        }

    return await run_in_threadpool(answer)


async def _handed_on(task: asyncio.Task[str], store: Store, interaction_id: str) -> bool:
    """Wait for the answer to commit (False), or, past ``ANSWER_WAIT`` seconds, until it is stored for the
    process that advances the run to take (True: the request need not wait for that process)."""
    began = time.monotonic()
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.2)
        if done:
            return False
        if time.monotonic() - began >= ANSWER_WAIT and await run_in_threadpool(
            answer_handed_on, store, interaction_id
        ):
            return True


def _settled(task: asyncio.Task[str]) -> None:
    """An answer that finished after its 202: forgotten, and logged when it failed (its run's events and
    its interaction say the rest)."""
    _pending.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("an answer accepted earlier did not apply: %s", task.exception())


__all__ = ["router"]
