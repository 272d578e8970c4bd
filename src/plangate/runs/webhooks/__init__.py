"""Signed webhooks (Standard Webhooks): owners' endpoints hear of their runs' ends, waits and turns.

For: ``Webhooks`` (the endpoints and their deliveries, in the store), ``EVENTS`` and the records; the
attempts, retried with backoff for a day, are ``deliver.py``'s (``Deliverer``, ``DeliverySettings``: it
needs httpx, of the server and workers extras). An event's
deliveries are written in the transaction that makes the event (the component's ``on_commit`` hook:
``_outbox.py``), so none is lost and none is sent for a change rolled back; every server and worker
delivers them, each attempt claimed by one. Not for: the HTTP routes (``server/routes/webhooks.py``) or the
command (``cli/_webhook.py``).
"""

from __future__ import annotations

from plangate.runs.webhooks._address import checked_url, public
from plangate.runs.webhooks._tables import EVENTS, Delivery, DeliveryState, Endpoint, WebhookEvent
from plangate.runs.webhooks.repository import COMPONENT, MAX_ENDPOINTS, Claimed, Webhooks, new_secret

__all__ = [
    "COMPONENT",
    "EVENTS",
    "MAX_ENDPOINTS",
    "Claimed",
    "Delivery",
    "DeliveryState",
    "Endpoint",
    "WebhookEvent",
    "Webhooks",
    "checked_url",
    "new_secret",
    "public",
]
