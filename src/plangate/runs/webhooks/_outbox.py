"""The webhooks' outbox: the deliveries an event owes, written in the very transaction that makes the event.

For: ``outbox``, the webhooks component's ``on_commit`` hook (``store/_migrate.py``): when a run's
transaction ends a run with no parent (``run.ended``), ends a copilot turn's run (``turn.ended``) or opens
an interaction (``run.waiting``: a person is needed), one ``pending`` delivery per endpoint of the run's
owner that hears of the event is inserted on the transaction's connection. It commits with the run's change
or not at all, so no event is lost if the process dies right after, and none is sent for a change that was
rolled back. Not for: sending (``deliver.py``) or the endpoints (``repository.py``).

What a payload holds is what the owner may see through the API: never an outcome's ``internal_reason``, never
a secret. The ids are derived from what the event is about, so an event is owed once per endpoint.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

from pydantic import JsonValue

from plangate.runs.webhooks._tables import WebhookEvent
from plangate.store.base import RunChange
from plangate.store.ddl import Dialect
from plangate.store.repository import Db

# A delivery for each endpoint of the owner that hears of the event, under a new random id; the id of each
# attempt's ``webhook-id`` header.
_DELIVERY = (
    "INSERT INTO webhook_deliveries (endpoint_id, event_key, id, owner, run_id, event, payload, state, "
    "attempts, next_at, last_error, created_at) "
    "SELECT e.id, ?, {id}, ?, ?, ?, ?, 'pending', 0, ?, '', ? FROM webhook_endpoints AS e "
    "WHERE e.owner = ? AND EXISTS (SELECT 1 FROM {events} WHERE {name} = ?) "
    "ON CONFLICT (endpoint_id, event_key) DO NOTHING"
)
_INSERT: dict[Dialect, str] = {
    "sqlite": _DELIVERY.format(
        id="'msg_' || lower(hex(randomblob(16)))", events="json_each(e.events)", name="json_each.value"
    ),
    "postgresql": _DELIVERY.format(
        id="'msg_' || replace(gen_random_uuid()::text, '-', '')",
        events="json_array_elements_text(e.events) AS heard (name)",
        name="heard.name",
    ),
}
# The outcome's fields a receiver is shown (``internal_reason`` stays in the store and the log).
_PUBLIC_OUTCOME = ("status", "stage", "code", "user_message", "usage")
_ROOT = (
    "WITH RECURSIVE chain (id, parent_run_id) AS ("
    "SELECT id, parent_run_id FROM runs WHERE id = ? "
    "UNION SELECT r.id, r.parent_run_id FROM runs AS r JOIN chain AS c ON r.id = c.parent_run_id"
    ") SELECT id FROM chain WHERE parent_run_id IS NULL"
)


def outbox(db: Db, change: RunChange) -> None:
    """Insert the deliveries ``change`` owes to its owner's endpoints (the webhooks' ``on_commit`` hook):
    one statement an event, which picks the endpoints that hear of it and goes with the run's commit (no
    round trip of its own on PostgreSQL)."""
    for event, key, data in _events(db, change):
        payload = {"type": event, "timestamp": _iso(change.at), "data": data}
        db.defer(
            _INSERT[db.dialect],
            (
                key,
                change.run.owner,
                change.run.id,
                event,
                json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
                change.at,
                change.at,
                change.run.owner,
                event,
            ),
        )


def _events(db: Db, change: RunChange) -> Iterator[tuple[WebhookEvent, str, dict[str, JsonValue]]]:
    """Each event ``change`` makes: its name, what it is about (unique per endpoint) and its data."""
    run = change.run
    if change.ended and run.parent_run_id is None:
        outcome = {key: value for key, value in (change.outcome or {}).items() if key in _PUBLIC_OUTCOME}
        data: dict[str, JsonValue] = {
            "run_id": run.id,
            "kind": run.kind,
            "name": run.name,
            "status": change.status,
            "outcome": outcome,
        }
        schedule = run.input.get("schedule")
        if isinstance(schedule, dict):
            data["schedule"] = schedule
        yield "run.ended", f"run.ended:{run.id}", data
        turn = run.input.get("turn_id")
        if isinstance(turn, str) and turn:
            yield (
                "turn.ended",
                f"turn.ended:{turn}",
                {
                    "turn_id": turn,
                    "conversation_id": run.input.get("conversation_id"),
                    "run_id": run.id,
                    "status": outcome.get("code"),
                    "answer": outcome.get("user_message"),
                },
            )
    for interaction in change.opened:
        root = db.one(_ROOT, (run.id,))
        yield (
            "run.waiting",
            f"run.waiting:{interaction.id}",
            {
                "run_id": run.id if root is None else root["id"],
                "asking_run_id": run.id,
                "interaction": {
                    "id": interaction.id,
                    "kind": interaction.kind,
                    "prompt": interaction.prompt,
                    "tool": None if interaction.tool is None else interaction.tool.name,
                    "step_id": interaction.step_id,
                },
            },
        )


def _iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat().replace("+00:00", "Z")


__all__ = ["outbox"]
