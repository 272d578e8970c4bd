"""Rows of a store (SQLite or PostgreSQL) turned into records, and the column lists the queries select.

For: the one place that knows how a row maps to ``RunRecord``, ``Interaction``, ``Receipt``, ``WriteIntent``,
``Snapshot``, ``Document`` and ``Event``; both backends name the same columns and keep JSON as text. Not for:
deciding what to query (``store/sqlite.py``, ``store/postgres.py`` and their transactions).
"""

from __future__ import annotations

import json
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from plangate.errors import StoreError
from plangate.events import Event, EventFormatError, InteractionTool, JsonObject, event_from_parts
from plangate.store.base import Document, Interaction, Receipt, RunRecord, Snapshot, WriteIntent

RUN_COLUMNS = (
    "pos, id, kind, name, status, input, owner, parent_run_id, outcome, last_seq, created_at, updated_at, "
    "lease_owner, lease_expires_at"
)
INTERACTION_COLUMNS = (
    "id, run_id, kind, status, prompt, tool_name, tool_arguments, tool_arguments_digest, step_id, "
    "created_at, resolved_at, resolved_by, resolution"
)
RECEIPT_COLUMNS = "run_id, step_index, source, name, arguments_digest, success, summary, at, output"
WRITE_INTENT_COLUMNS = "key, run_id, tool, arguments_digest, status, result, created_at, completed_at"
EVENT_COLUMNS = "run_id, seq, type, payload, at"
DOCUMENT_COLUMNS = "namespace, key, value, version, updated_at"

_R = TypeVar("_R", bound=BaseModel)


class Row(Protocol):
    """A row read by name: ``sqlite3.Row`` or a psycopg ``dict_row``."""

    def __getitem__(self, key: str, /) -> Any: ...


def run_record(row: Row) -> RunRecord:
    """A ``runs`` row as a record."""
    return _build(
        RunRecord,
        f"run {row['id']!r}",
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        status=row["status"],
        input=_object(row["input"]),
        owner=row["owner"],
        parent_run_id=row["parent_run_id"],
        outcome=_object(row["outcome"]),
        last_seq=row["last_seq"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
    )


def interaction(row: Row) -> Interaction:
    """An ``interactions`` row as a record."""
    tool = None
    if row["tool_name"] is not None:
        tool = InteractionTool(
            name=row["tool_name"],
            arguments=_object(row["tool_arguments"]) or {},
            arguments_digest=row["tool_arguments_digest"] or "",
        )
    return _build(
        Interaction,
        f"interaction {row['id']!r}",
        id=row["id"],
        run_id=row["run_id"],
        kind=row["kind"],
        status=row["status"],
        prompt=row["prompt"],
        tool=tool,
        step_id=row["step_id"],
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
        resolved_by=row["resolved_by"],
        resolution=_object(row["resolution"]),
    )


def receipt(row: Row) -> Receipt:
    """A ``receipts`` row as a record."""
    return _build(
        Receipt,
        f"a receipt of run {row['run_id']!r}",
        run_id=row["run_id"],
        step_index=row["step_index"],
        source=row["source"],
        name=row["name"],
        arguments_digest=row["arguments_digest"],
        success=bool(row["success"]),
        summary=row["summary"],
        at=row["at"],
        output=_value(row["output"]),
    )


def write_intent(row: Row) -> WriteIntent:
    """A ``write_intents`` row as a record."""
    return _build(
        WriteIntent,
        f"write intent {row['key']!r}",
        key=row["key"],
        run_id=row["run_id"],
        tool=row["tool"],
        arguments_digest=row["arguments_digest"],
        status=row["status"],
        result=_object(row["result"]),
        created_at=row["created_at"],
        completed_at=row["completed_at"],
    )


def snapshot(row: Row) -> Snapshot:
    """A ``snapshots`` row as a record."""
    return _build(
        Snapshot,
        f"the snapshot of run {row['run_id']!r}",
        run_id=row["run_id"],
        version=row["version"],
        seq=row["seq"],
        state=_object(row["state"]),
        updated_at=row["updated_at"],
    )


def document(row: Row) -> Document:
    """A ``documents`` row as a record."""
    return _build(
        Document,
        f"document {row['key']!r} in namespace {row['namespace']!r}",
        namespace=row["namespace"],
        key=row["key"],
        value=_object(row["value"]),
        version=row["version"],
        updated_at=row["updated_at"],
    )


def event(row: Row) -> Event:
    """An ``events`` row as the event it stores."""
    try:
        return event_from_parts(row["run_id"], row["seq"], row["at"], row["type"], row["payload"])
    except EventFormatError as exc:
        raise StoreError(f"the store holds an event it cannot read: {exc}") from None


def _object(text: str | None) -> JsonObject | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StoreError(
            f"expected a JSON object in a store column; found text that is not JSON: {exc}"
        ) from None
    if not isinstance(value, dict):
        raise StoreError(f"expected a JSON object in a store column; found {type(value).__name__}")
    return value


def _value(text: str | None) -> JsonValue:
    if text is None:
        return None
    try:
        value: JsonValue = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"expected JSON in a store column; found text that is not JSON: {exc}") from None
    return value


def _build(cls: type[_R], what: str, **fields: object) -> _R:
    try:
        return cls.model_validate(fields)
    except ValidationError as exc:
        raise StoreError(f"the store holds {what} it cannot read: {exc}") from None
