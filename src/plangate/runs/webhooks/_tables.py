"""The webhooks' tables and records: the endpoints owners registered, and one delivery per event and endpoint.

For: ``ENDPOINTS`` and ``DELIVERIES`` (described once for both backends), the records read from them
(``Endpoint``, ``Delivery``) and the names of the events (``EVENTS``). Not for: writing them (``_outbox.py``
writes deliveries inside runs' transactions; ``repository.py`` everything else).

A delivery is keyed by ``(endpoint_id, event_key)``: an event (a run that ended, an interaction that
opened, a turn that ended) is delivered to an endpoint once, under one ``id`` (the ``webhook-id`` header),
however often it is tried.
"""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from plangate.store import Record
from plangate.store.ddl import INTEGER, JSON, POSITION, REAL, TEXT, Column, Index, Table

WebhookEvent = Literal["run.ended", "run.waiting", "turn.ended"]
"""What an endpoint may hear of: a run with no parent ended; a run waits on a person; a copilot turn
ended."""
EVENTS: tuple[WebhookEvent, ...] = ("run.ended", "run.waiting", "turn.ended")

DeliveryState = Literal["pending", "delivered", "failed"]
"""Where a delivery stands: to be tried (now or at ``next_at``), received (a 2xx), or given up."""
DELIVERY_STATES: tuple[DeliveryState, ...] = ("pending", "delivered", "failed")

ENDPOINTS = Table(
    "webhook_endpoints",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("url", TEXT),
        Column("events", JSON),
        Column("secret", TEXT),
        Column("description", TEXT),
        Column("created_at", REAL),
    ),
    indexes=(Index("webhook_endpoints_by_owner", ("owner", "pos")),),
)
DELIVERIES = Table(
    "webhook_deliveries",
    (
        Column("endpoint_id", TEXT, references=("webhook_endpoints", "id")),
        Column("event_key", TEXT),
        Column("id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("run_id", TEXT),
        Column("event", TEXT, choices=EVENTS),
        Column("payload", JSON),
        Column("state", TEXT, choices=DELIVERY_STATES),
        Column("attempts", INTEGER),
        Column("next_at", REAL),
        Column("claimed_by", TEXT, nullable=True),
        Column("last_status", INTEGER, nullable=True),
        Column("last_error", TEXT),
        Column("created_at", REAL),
        Column("finished_at", REAL, nullable=True),
    ),
    primary_key=("endpoint_id", "event_key"),
    indexes=(
        Index("webhook_deliveries_due", ("state", "next_at")),
        Index("webhook_deliveries_by_endpoint", ("endpoint_id", "created_at")),
        Index("webhook_deliveries_by_run", ("run_id",)),
    ),
)


class Endpoint(Record):
    """Where an owner's events are sent.

    Attributes:
        id: ``whk_…``, random.
        events: the events it hears of.
        description: the owner's label.
    """

    id: str
    owner: str
    url: str
    events: list[WebhookEvent]
    description: str
    created_at: float


class Delivery(Record):
    """One event for one endpoint, and how its delivery went.

    Attributes:
        id: ``msg_…``: the ``webhook-id`` of every attempt, so a receiver drops duplicates by it.
        event_key: what the event is about (``run.ended:run_…``), unique per endpoint.
        run_id: the run whose change made the event (pruned with it: ``store/retention.py``).
        payload: the body sent (``type``, ``timestamp``, ``data``).
        attempts: attempts made so far (one being made counts).
        next_at: when it is tried next (while ``pending``; an attempt in flight pushes it past its timeout).
        last_status: the HTTP status of the last answered attempt, or None.
        last_error: why the last attempt failed (empty when none did).
        finished_at: when it was delivered or given up.
    """

    id: str
    endpoint_id: str
    event_key: str
    owner: str
    run_id: str
    event: WebhookEvent
    payload: dict[str, JsonValue]
    state: DeliveryState
    attempts: int
    next_at: float
    last_status: int | None
    last_error: str
    created_at: float
    finished_at: float | None


__all__ = [
    "DELIVERIES",
    "DELIVERY_STATES",
    "ENDPOINTS",
    "EVENTS",
    "Delivery",
    "DeliveryState",
    "Endpoint",
    "WebhookEvent",
]
