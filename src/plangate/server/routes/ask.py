"""``/v1/ask``, ``/v1/turns`` and ``/v1/conversations``: copilot turns started on the server and read back.

For: starting a turn (``POST /v1/ask`` answers at once with the turn's id and its run's id; the turn goes on
in the server whether the client stays or not), reading a turn (stored, or running), retrying one, and the
owner's conversations. A turn's live progress is its run's event stream (``GET /v1/runs/{run_id}/events``:
``op``, ``status``, ``review`` and ``outcome`` events). Every lookup is scoped to the caller's owner: another
owner's turn, conversation or source is a 404. Not for: running turns (``_asks.py``, ``plangate.copilot``).

Store calls never run on the event loop: reads are plain functions (FastAPI runs them in its thread pool),
and starting a turn hands its checks to a thread.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from pydantic import JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.errors import ConfigError
from plangate.runs.usage import Budget
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem
from plangate.server._quotas import budget_left
from plangate.server._rate import LimitedOwnerDep
from plangate.server.schemas import AskRequest

router = APIRouter(prefix="/v1", tags=["ask"])

_TURN_ID = r"^turn_[A-Za-z0-9_-]{1,64}$"


@router.post(
    "/ask",
    status_code=202,
    response_model=None,
    summary="Ask a question about a data source: starts a copilot turn on the server",
    responses={
        404: {"description": "The source or the conversation is not the caller's."},
        409: {"description": "A turn of the conversation has not ended (double_texting 'reject')."},
        429: {
            "description": "The caller made its requests per minute, or spent its daily budget; "
            "Retry-After says when to retry."
        },
        422: {
            "description": "An empty or too long question, an unknown field, an unusable model, a "
            "max_cost for a model without a price."
        },
        503: {"description": "The request names no model and the server's cannot run here."},
    },
)
async def ask(
    body: Annotated[AskRequest, Body()], services: ServicesDep, owner: LimitedOwnerDep
) -> dict[str, JsonValue]:
    """Start a turn: the question becomes a checked, run and reviewed formula, retried once if the review
    says so. Answers at once with ``turn_id``, ``run_id`` and ``conversation_id``; follow the run's events
    (``events``), then read the turn (``turn``). While a turn of the conversation has not ended, the new one
    is refused (409), waits after it (``status``: ``queued``), or cancels it first, as ``double_texting`` (or
    the server's ``[limits] double_texting``) says: one turn writes a conversation at a time."""
    limits = await run_in_threadpool(budget_left, services, owner)
    await run_in_threadpool(services.model.require, body.model)
    try:
        budget = Budget(max_tokens=body.max_tokens, max_cost=body.max_cost)
        started = await services.asks.start(
            owner,
            body.question,
            body.source,
            body.conversation_id,
            body.model,
            double_texting=body.double_texting or limits.double_texting,
            budget=budget,
        )
    except ConfigError as exc:
        raise Problem(422, "invalid-ask", str(exc)) from None
    return started.view()


@router.get(
    "/turns/{turn_id}",
    response_model=None,
    summary="Show a turn: its status, answer, rows, formula, attempts",
)
def get_turn(turn_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The turn as stored (``status``: done, partial, unusable, failed, cancelled), or ``running`` with the
    attempts finished so far (``queued``: it waits for the turn before it in its conversation); ``chart``
    says how to draw ``result`` when it is a series (else null); ``runs`` are the formula runs its attempts
    started; ``usage``, what its model calls used and cost (as its run's outcome keeps it; null while it
    runs)."""
    return {"turn": services.asks.turn(owner, turn_id)}


@router.post(
    "/turns/{turn_id}/retry",
    status_code=202,
    response_model=None,
    summary="Ask a finished turn's question again, as a new turn of its conversation",
    responses={409: {"description": "The turn is still running."}},
)
async def retry_turn(turn_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """A new turn with the same question, source and conversation (the old one stays as it was)."""
    limits = await run_in_threadpool(budget_left, services, owner)
    started = await services.asks.retry(owner, turn_id, double_texting=limits.double_texting)
    return started.view(retry_of=turn_id)


@router.get(
    "/conversations", response_model=None, summary="List the caller's conversations, most recent first"
)
def list_conversations(
    services: ServicesDep,
    owner: OwnerDep,
    cursor: Annotated[
        str | None, Query(max_length=64, description="`next_cursor` of the previous page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, JsonValue]:
    """One page of conversations; pass ``next_cursor`` back as ``cursor`` for the next one (null: no more)."""
    try:
        return services.asks.conversations(owner, limit, cursor)
    except ConfigError as exc:
        raise Problem(400, "invalid-cursor", str(exc)) from None


@router.get(
    "/conversations/{conversation_id}", response_model=None, summary="Show a conversation with its turns"
)
def get_conversation(conversation_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The conversation and its turns, oldest first (a turn still running last, with status ``running``)."""
    return services.asks.conversation(owner, conversation_id)


__all__ = ["router"]
