"""Rows of a store (SQLite or PostgreSQL) turned into records, and the column lists the queries select.

For: ``RowMapper``, the one mapper of a table's rows to its record (each field the column of its name, JSON
text decoded where the table keeps it; the column list derived from the record's fields, so a field and its
column cannot drift apart), and the mappers of the run core's records (``RunRecord``, ``Interaction``,
``Receipt``, ``WriteIntent``, ``Snapshot``) and of ``Event``; repositories keep theirs beside their SQL.
Both backends name the same columns and keep JSON as text. Not for: deciding what to query
(``store/sqlite.py``, ``store/postgres.py`` and their transactions).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from plangate.errors import StoreError
from plangate.events import Event, EventFormatError, InteractionTool, JsonObject, event_from_parts
from plangate.store.base import Interaction, Receipt, RunRecord, Snapshot, WriteIntent

_R = TypeVar("_R", bound=BaseModel)


class Row(Protocol):
    """A row read by name: ``sqlite3.Row`` or a psycopg ``dict_row``."""

    def __getitem__(self, key: str, /) -> Any: ...


class RowMapper(Generic[_R]):
    """How the rows of one table become one record: each field of the record is the column of its name,
    read as it is, or decoded from JSON text for the columns in ``objects`` (a JSON object) and ``values``
    (any JSON value).

    Args:
        record: the record class (a pydantic model: it checks what the row holds).
        what: how a row is named when it cannot be read (``run 'run_1'``).
        objects: the columns of JSON objects.
        values: the columns of any JSON value.
        built: fields made of several columns, with those columns and how the field is made of them.
        given: fields the caller passes (what another table holds: a turn's attempts).
        also: columns selected before the record's own, for the query that reads them (``pos``).
    """

    def __init__(
        self,
        record: type[_R],
        what: Callable[[Row], str],
        *,
        objects: Iterable[str] = (),
        values: Iterable[str] = (),
        built: Mapping[str, tuple[tuple[str, ...], Callable[[Row], object]]] | None = None,
        given: Iterable[str] = (),
        also: tuple[str, ...] = (),
    ) -> None:
        self.record = record
        self.what = what
        built = built or {}
        decoders: dict[str, Callable[[str | None], object]] = {name: _object for name in objects}
        decoders.update({name: _value for name in values})
        left_out = set(given)
        columns = list(also)
        # Three kinds of field, each read in one loop (a store reads many rows: no call per plain column).
        self._plain: list[str] = []
        self._decoded: list[tuple[str, Callable[[str | None], object]]] = []
        self._built: list[tuple[str, Callable[[Row], object]]] = []
        for name in record.model_fields:
            if name in left_out:
                continue
            if name in built:
                names, make = built[name]
                columns.extend(names)
                self._built.append((name, make))
                continue
            columns.append(name)
            if name in decoders:
                self._decoded.append((name, decoders[name]))
            else:
                self._plain.append(name)
        self.columns: tuple[str, ...] = tuple(columns)
        self.select = ", ".join(columns)
        """The column list a query selects (and an insert names, in this order)."""

    def read(self, row: Row, **given: object) -> _R:
        """The record ``row`` holds (with the fields the caller gives).

        Raises:
            StoreError: the row does not hold a valid record.
        """
        fields: dict[str, object] = {name: row[name] for name in self._plain}
        for name, decode in self._decoded:
            fields[name] = decode(row[name])
        for name, make in self._built:
            fields[name] = make(row)
        fields.update(given)
        try:
            return self.record.model_validate(fields)
        except ValidationError as exc:
            raise StoreError(f"the store holds {self.what(row)} it cannot read: {exc}") from None


def _tool(row: Row) -> InteractionTool | None:
    if row["tool_name"] is None:
        return None
    return InteractionTool(
        name=row["tool_name"],
        arguments=_object(row["tool_arguments"]) or {},
        arguments_digest=row["tool_arguments_digest"] or "",
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


RUNS = RowMapper(RunRecord, lambda row: f"run {row['id']!r}", objects=("input", "outcome"), also=("pos",))
INTERACTIONS = RowMapper(
    Interaction,
    lambda row: f"interaction {row['id']!r}",
    objects=("resolution",),
    built={"tool": (("tool_name", "tool_arguments", "tool_arguments_digest"), _tool)},
)
RECEIPTS = RowMapper(Receipt, lambda row: f"a receipt of run {row['run_id']!r}", values=("output",))
WRITE_INTENTS = RowMapper(WriteIntent, lambda row: f"write intent {row['key']!r}", objects=("result",))
SNAPSHOTS = RowMapper(Snapshot, lambda row: f"the snapshot of run {row['run_id']!r}", objects=("state",))

RUN_COLUMNS = RUNS.select
INTERACTION_COLUMNS = INTERACTIONS.select
RECEIPT_COLUMNS = RECEIPTS.select
WRITE_INTENT_COLUMNS = WRITE_INTENTS.select
EVENT_COLUMNS = "run_id, seq, type, payload, at"

run_record = RUNS.read
interaction = INTERACTIONS.read
receipt = RECEIPTS.read
write_intent = WRITE_INTENTS.read
snapshot = SNAPSHOTS.read
