"""One row mapper (store/_rows.py): a record's fields are the columns a query selects and reads, on every
table, so a field and its column cannot drift apart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel, JsonValue

from plangate.copilot import _conversations
from plangate.errors import StoreError
from plangate.server import tokens
from plangate.store import _rows, documents, open_store

MAPPERS = {
    "runs": _rows.RUNS,
    "interactions": _rows.INTERACTIONS,
    "receipts": _rows.RECEIPTS,
    "write_intents": _rows.WRITE_INTENTS,
    "snapshots": _rows.SNAPSHOTS,
    "documents": documents._DOCUMENTS,
    "tokens": tokens._TOKENS,
    "turns": _conversations._TURNS,
    "attempts": _conversations._ATTEMPTS,
}


@pytest.mark.parametrize("table", sorted(MAPPERS))
def test_each_mapper_selects_columns_its_table_has(tmp_path: Path, table: str) -> None:
    path = tmp_path / "plangate.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        conn.execute(f"SELECT {MAPPERS[table].select} FROM {table}").fetchall()
    conn.close()
    assert set(MAPPERS[table].columns) <= columns


class Note(BaseModel):
    id: str
    body: dict[str, JsonValue] | None
    tags: JsonValue
    size: int
    parts: list[str]


def test_a_records_fields_are_the_columns_read_json_decoded_where_kept_so() -> None:
    mapper = _rows.RowMapper(
        Note, lambda row: f"note {row['id']!r}", objects=("body",), values=("tags",), given=("parts",)
    )
    row = {"id": "n1", "body": '{"a": 1}', "tags": '["x"]', "size": 3}

    assert mapper.select == "id, body, tags, size"
    assert mapper.read(row, parts=["p"]) == Note(id="n1", body={"a": 1}, tags=["x"], size=3, parts=["p"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input": "[1]"}, "expected a JSON object in a store column; found list"),
        ({"input": "{nope"}, "expected a JSON object in a store column; found text that is not JSON"),
        ({"status": "sleeping"}, "the store holds run 'run_1' it cannot read"),
    ],
)
def test_a_row_that_does_not_hold_its_record_is_a_store_error(
    change: dict[str, object], message: str
) -> None:
    row: dict[str, object] = {
        "pos": 1,
        "id": "run_1",
        "kind": "agent",
        "name": "n",
        "status": "running",
        "input": json.dumps({"prompt": "p"}),
        "owner": "local",
        "parent_run_id": None,
        "outcome": None,
        "last_seq": 0,
        "created_at": 1.0,
        "updated_at": 1.0,
        "lease_owner": None,
        "lease_expires_at": None,
        "origin_run_id": None,
    }
    assert _rows.run_record(row).input == {"prompt": "p"}
    with pytest.raises(StoreError, match=message.replace("(", r"\(")):
        _rows.run_record({**row, **change})
