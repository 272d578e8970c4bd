"""The webhooks' repository: owners' endpoints, and the deliveries each event owes them.

For: ``Webhooks`` (add, list, get and delete endpoints; list deliveries; ``claim`` the deliveries due, so
that of several deliverers racing exactly one sends each attempt; ``settle`` an attempt) and ``COMPONENT``,
the tables' migrations with the outbox hook that fills ``webhook_deliveries`` inside runs' transactions.
A delivery is pruned with the run it is about (``store/retention.py``). Not for: sending (``deliver.py``) or
deciding which events a change makes (``_outbox.py``).

An endpoint's signing secret (``whsec_…``) is made here, returned once by ``add`` and kept in the store
(signing needs it as it is); no listing, view or log line shows it.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from plangate.errors import ConfigError, NotFoundError, StoreError
from plangate.runs.webhooks._address import checked_url
from plangate.runs.webhooks._outbox import outbox
from plangate.runs.webhooks._tables import (
    DELIVERIES,
    ENDPOINTS,
    EVENTS,
    Delivery,
    DeliveryState,
    Endpoint,
    WebhookEvent,
)
from plangate.store import Store, retention
from plangate.store.ddl import Create
from plangate.store.repository import Component, Db, RowMapper, checks, database_of, register

COMPONENT = register(
    Component(
        "webhooks",
        (
            # 1: owners' endpoints, and one delivery per event and endpoint (filled by the outbox hook)
            (Create(ENDPOINTS), Create(DELIVERIES)),
        ),
        on_commit=outbox,
    )
)


def _prune_deliveries(db: Db, run_ids: Sequence[str]) -> int:
    """A pruned run's deliveries go with it (``store/retention.py``)."""
    marks = ", ".join("?" * len(run_ids))
    return db.run(f"DELETE FROM webhook_deliveries WHERE run_id IN ({marks})", tuple(run_ids))


retention.run_rows("webhook_deliveries", _prune_deliveries, ("webhook_deliveries",))

MAX_ENDPOINTS = 20
"""Endpoints an owner may have."""

_ENDPOINTS = RowMapper(Endpoint, lambda row: f"webhook endpoint {row['id']!r}", values=("events",))
_DELIVERIES = RowMapper(Delivery, lambda row: f"webhook delivery {row['id']!r}", objects=("payload",))
_ENDPOINT_SELECT = f"SELECT {_ENDPOINTS.select} FROM webhook_endpoints"
_DELIVERY_SELECT = f"SELECT {_DELIVERIES.select} FROM webhook_deliveries"


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery claimed for one attempt, with what sending it needs.

    Attributes:
        delivery: the delivery as claimed (``attempts`` counts this one).
        body: the payload as stored: the bytes signed and sent.
        url: the endpoint's URL.
        secret: the endpoint's signing secret.
    """

    delivery: Delivery
    body: str
    url: str
    secret: str


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


class Webhooks:
    """The webhook endpoints and deliveries of a store.

    Raises:
        ConfigError: ``store`` offers no database.
        SchemaVersionError: a newer plangate wrote the webhooks' tables.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def now(self) -> float:
        """The store's clock."""
        return self._database.now()

    # -- endpoints ---------------------------------------------------------------------------------------

    def add(
        self,
        owner: str,
        url: str,
        events: Collection[str],
        *,
        description: str = "",
        allow_private: bool = False,
    ) -> tuple[Endpoint, str]:
        """Register an endpoint of ``owner`` for ``events``; returns it with its signing secret (shown this
        once).

        Raises:
            ConfigError: a bad URL (or one on a private address, unless ``allow_private``), an unknown
                event, none, or the owner has ``MAX_ENDPOINTS`` already.
        """
        checks.text(owner, "webhook: owner", empty=False)
        checks.text(description, "webhook: description")
        wanted = _events(events)
        target = checked_url(url, allow_private=allow_private)
        secret = new_secret()
        new_id = "whk_" + secrets.token_urlsafe(9)
        now = self._database.now()
        with self._database.writing("add_webhook") as db:
            row = db.one("SELECT count(*) AS n FROM webhook_endpoints WHERE owner = ?", (owner,))
            if row is not None and int(row["n"]) >= MAX_ENDPOINTS:
                raise ConfigError(f"webhook: owner {owner!r} has {MAX_ENDPOINTS} endpoints, the most allowed")
            db.run(
                "INSERT INTO webhook_endpoints (id, owner, url, events, secret, description, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (new_id, owner, target, json.dumps(wanted), secret, description, now),
            )
            return self._endpoint(db, new_id, None), secret

    def listed(self, *, owner: str | None = None) -> list[Endpoint]:
        """The endpoints (``owner``'s only, when given), oldest first."""
        where, params = (" WHERE owner = ?", (owner,)) if owner is not None else ("", ())
        with self._database.reading("list_webhooks") as db:
            rows = db.all(f"{_ENDPOINT_SELECT}{where} ORDER BY pos", params)
        return [_ENDPOINTS.read(row) for row in rows]

    def get(self, endpoint_id: str, *, owner: str | None = None) -> Endpoint:
        """The endpoint with that id.

        Raises:
            NotFoundError: none (or another owner's).
        """
        with self._database.reading("get_webhook") as db:
            return self._endpoint(db, endpoint_id, owner)

    def delete(self, endpoint_id: str, *, owner: str | None = None) -> Endpoint:
        """Delete an endpoint and its deliveries (those not made yet are never made).

        Raises:
            NotFoundError: no such endpoint.
        """
        with self._database.writing("delete_webhook") as db:
            found = self._endpoint(db, endpoint_id, owner)
            db.run("DELETE FROM webhook_deliveries WHERE endpoint_id = ?", (found.id,))
            db.run("DELETE FROM webhook_endpoints WHERE id = ?", (found.id,))
        return found

    # -- deliveries --------------------------------------------------------------------------------------

    def deliveries(
        self,
        endpoint_id: str,
        *,
        owner: str | None = None,
        state: DeliveryState | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        """An endpoint's latest deliveries (in ``state`` only, when given), newest first.

        Raises:
            NotFoundError: no such endpoint (or another owner's).
        """
        limit = checks.page_limit(limit)
        with self._database.reading("list_webhook_deliveries") as db:
            found = self._endpoint(db, endpoint_id, owner)
            where, params = ("AND state = ? ", (found.id, state)) if state else ("", (found.id,))
            rows = db.all(
                f"{_DELIVERY_SELECT} WHERE endpoint_id = ? {where}ORDER BY created_at DESC LIMIT ?",
                (*params, limit),
            )
        return [_DELIVERIES.read(row) for row in rows]

    def claim(self, holder: str, lease: float, limit: int) -> list[Claimed]:
        """Claim up to ``limit`` deliveries due now for one attempt each by ``holder``: each attempt counted
        and its next try moved ``lease`` seconds on (a holder that dies mid-attempt leaves the delivery to
        be claimed again then, under the same id). Of deliverers racing, one claims each."""
        now = self._database.now()
        skip = " FOR UPDATE OF d SKIP LOCKED" if self._database.dialect == "postgresql" else ""
        claimed: list[Claimed] = []
        with self._database.writing("claim_webhook_deliveries") as db:
            rows = db.all(
                f"SELECT d.endpoint_id, d.event_key, d.attempts, d.payload, e.url, e.secret "
                f"FROM webhook_deliveries AS d JOIN webhook_endpoints AS e ON e.id = d.endpoint_id "
                f"WHERE d.state = 'pending' AND d.next_at <= ? ORDER BY d.next_at LIMIT ?{skip}",
                (now, limit),
            )
            for row in rows:
                key = (row["endpoint_id"], row["event_key"])
                taken = db.run(
                    "UPDATE webhook_deliveries SET attempts = attempts + 1, next_at = ?, claimed_by = ? "
                    "WHERE endpoint_id = ? AND event_key = ? AND state = 'pending' AND attempts = ?",
                    (now + lease, holder, *key, row["attempts"]),
                )
                if taken != 1:
                    continue
                stored = db.one(f"{_DELIVERY_SELECT} WHERE endpoint_id = ? AND event_key = ?", key)
                if stored is None:
                    raise StoreError(f"webhook delivery {key!r} vanished while it was claimed")
                payload = row["payload"]
                body = payload if isinstance(payload, str) else json.dumps(payload)
                claimed.append(Claimed(_DELIVERIES.read(stored), body, row["url"], row["secret"]))
        return claimed

    def settle(
        self,
        delivery: Delivery,
        holder: str,
        *,
        state: DeliveryState,
        status: int | None,
        error: str,
        next_at: float | None = None,
    ) -> bool:
        """Record how ``holder``'s attempt went: ``delivered``, ``failed`` (given up), or ``pending`` again
        at ``next_at``; whether it was still that holder's attempt to record (False: its claim lapsed and
        another deliverer took the delivery over)."""
        now = self._database.now()
        finished = None if state == "pending" else now
        with self._database.writing("settle_webhook_delivery") as db:
            changed = db.run(
                "UPDATE webhook_deliveries SET state = ?, last_status = ?, last_error = ?, next_at = ?, "
                "finished_at = ?, claimed_by = NULL WHERE endpoint_id = ? AND event_key = ? "
                "AND claimed_by = ? AND attempts = ? AND state = 'pending'",
                (
                    state,
                    status,
                    error[:500],
                    now if next_at is None else next_at,
                    finished,
                    delivery.endpoint_id,
                    delivery.event_key,
                    holder,
                    delivery.attempts,
                ),
            )
        return changed == 1

    def _endpoint(self, db: Db, endpoint_id: str, owner: str | None) -> Endpoint:
        checks.text(endpoint_id, "webhook", empty=False)
        row = db.one(f"{_ENDPOINT_SELECT} WHERE id = ?", (endpoint_id,))
        if row is None or (owner is not None and row["owner"] != owner):
            scope = f" of owner {owner!r}" if owner is not None else ""
            raise NotFoundError(
                f"no webhook endpoint {endpoint_id!r}{scope} in the store at {self._database.where}"
            )
        return _ENDPOINTS.read(row)


def _events(events: Collection[str]) -> list[WebhookEvent]:
    if isinstance(events, str) or not events:
        raise ConfigError(f"webhook: events: expected one or more of {', '.join(EVENTS)}")
    wanted: list[WebhookEvent] = []
    for event in events:
        if event not in EVENTS:
            raise ConfigError(
                f"webhook: events: unknown event {event!r}; expected one of {', '.join(EVENTS)}"
            )
        for known in EVENTS:
            if known == event and known not in wanted:
                wanted.append(known)
    return wanted


__all__ = ["COMPONENT", "MAX_ENDPOINTS", "Claimed", "Webhooks", "new_secret"]
