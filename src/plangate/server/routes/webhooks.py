"""``/v1/webhooks``: the caller's webhook endpoints, and how their deliveries went.

For: registering an endpoint (its signing secret is in the answer, that once), listing, showing and
deleting them, and an endpoint's deliveries (state, attempts, last status, next try). Every endpoint
belongs to its token's owner; others get 404. Not for: writing deliveries (the outbox hook,
``runs/webhooks/_outbox.py``) or sending them (``runs/webhooks/deliver.py``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.runs.webhooks import Delivery, DeliveryState, Endpoint, WebhookEvent, Webhooks
from plangate.server._deps import OwnerDep, ServicesDep

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


class WebhookRequest(BaseModel):
    """A new endpoint: where to send which events."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048, description="An http(s) URL on a public address (unless allowed).")
    events: list[WebhookEvent] = Field(
        min_length=1, description="run.ended, run.waiting (a person is needed), turn.ended."
    )
    description: str = Field(default="", max_length=200)


def _endpoint(endpoint: Endpoint) -> dict[str, JsonValue]:
    return endpoint.model_dump(mode="json", exclude={"owner"})


def _delivery(delivery: Delivery) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = delivery.model_dump(mode="json", exclude={"owner", "payload", "event_key"})
    data["next_try_at"] = data.pop("next_at") if delivery.state == "pending" else None
    return data


@router.post(
    "",
    status_code=201,
    response_model=None,
    summary="Register a webhook endpoint; its signing secret is shown this once",
    responses={422: {"description": "A bad URL, one on a private address, or an unknown event."}},
)
async def add_webhook(
    body: Annotated[WebhookRequest, Body()], services: ServicesDep, owner: OwnerDep
) -> dict[str, JsonValue]:
    """Deliveries are signed with ``secret`` (Standard Webhooks: ``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``): keep it, it is not shown again. A URL whose host resolves to a private, loopback
    or link-local address is refused unless the operator allows it."""

    def add() -> tuple[Endpoint, str]:
        return Webhooks(services.store).add(
            owner,
            body.url,
            body.events,
            description=body.description,
            allow_private=services.webhooks.allow_private,
        )

    endpoint, secret = await run_in_threadpool(add)
    return {"webhook": _endpoint(endpoint), "secret": secret}


@router.get("", response_model=None, summary="List the caller's webhook endpoints")
def list_webhooks(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """Oldest first; never their secrets."""
    return {"items": [_endpoint(found) for found in Webhooks(services.store).listed(owner=owner)]}


@router.get("/{webhook_id}", response_model=None, summary="A webhook endpoint and its latest deliveries")
def get_webhook(
    webhook_id: str,
    services: ServicesDep,
    owner: OwnerDep,
    state: Annotated[DeliveryState | None, Query(description="Only deliveries in this state.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, JsonValue]:
    """``deliveries``: newest first, each with its ``id`` (the ``webhook-id`` of every attempt), ``event``,
    ``state`` (``pending``, ``delivered``, ``failed``), ``attempts``, ``last_status``, ``last_error`` and
    ``next_try_at`` (while pending)."""
    webhooks = Webhooks(services.store)
    found = webhooks.get(webhook_id, owner=owner)
    listed = webhooks.deliveries(found.id, owner=owner, state=state, limit=limit)
    deliveries: list[JsonValue] = [_delivery(delivery) for delivery in listed]
    return {"webhook": _endpoint(found), "deliveries": deliveries}


@router.delete("/{webhook_id}", status_code=204, summary="Delete a webhook endpoint")
def delete_webhook(webhook_id: str, services: ServicesDep, owner: OwnerDep) -> None:
    """Its deliveries not made yet are never made."""
    Webhooks(services.store).delete(webhook_id, owner=owner)


__all__ = ["router"]
