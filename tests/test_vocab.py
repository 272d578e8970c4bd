"""The shared vocabulary is the one list of each set of names: the SQL ``CHECK`` lists of a store made on
either backend hold exactly the values ``plangate.vocab`` names, and the layers above read theirs from it."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import get_args

import psycopg

from plangate import vocab
from plangate.events import OutcomeEvent, StepStateEvent
from plangate.runs import Outcome
from plangate.store import RunRecord, open_store

EXPECTED = {
    ("runs", "kind"): vocab.RUN_KINDS,
    ("runs", "status"): vocab.RUN_STATUSES,
    ("interactions", "kind"): vocab.INTERACTION_KINDS,
    ("interactions", "status"): vocab.INTERACTION_STATUSES,
    ("receipts", "source"): vocab.RECEIPT_SOURCES,
    ("write_intents", "status"): vocab.WRITE_INTENT_STATUSES,
    ("turns", "status"): vocab.TURN_STATUSES,
    ("attempts", "status"): vocab.TURN_STATUSES,
}
_IN = re.compile(r"\b(\w+)\s+IN\s*\(([^)]*)\)", re.IGNORECASE)
_ANY = re.compile(r"\(+(\w+)\s*=\s*ANY\s*\(\s*\(?ARRAY\[([^\]]*)\]", re.IGNORECASE)


def _values(listed: str) -> tuple[str, ...]:
    return tuple(re.findall(r"'([^']*)'", listed))


def sqlite_checks(path: Path) -> dict[tuple[str, str], tuple[str, ...]]:
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    with closing(sqlite3.connect(path)) as db:
        for table, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            for column, listed in _IN.findall(sql or ""):
                found[(table, column)] = _values(listed)
    return found


def postgres_checks(url: str) -> dict[tuple[str, str], tuple[str, ...]]:
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    with psycopg.connect(url) as db:
        rows = db.execute(
            "SELECT c.relname, pg_get_constraintdef(k.oid) FROM pg_constraint k "
            "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE k.contype = 'c' AND n.nspname = current_schema()"
        ).fetchall()
    for table, definition in rows:
        for column, listed in _ANY.findall(definition):
            found[(str(table), column)] = _values(listed)
    return found


def test_the_sql_check_lists_of_both_backends_are_the_vocabulary(tmp_path: Path, postgres_url: str) -> None:
    open_store(f"sqlite:///{tmp_path / 'runs.db'}").close()
    open_store(postgres_url).close()
    for name, checks in (
        ("sqlite", sqlite_checks(tmp_path / "runs.db")),
        ("postgres", postgres_checks(postgres_url)),
    ):
        listed = {key: checks.get(key) for key in EXPECTED}
        assert listed == EXPECTED, name


def test_the_layers_read_their_names_from_the_vocabulary() -> None:
    assert get_args(RunRecord.model_fields["kind"].annotation) == vocab.RUN_KINDS
    assert get_args(RunRecord.model_fields["status"].annotation) == vocab.RUN_STATUSES
    assert get_args(Outcome.model_fields["status"].annotation) == vocab.OUTCOME_STATUSES
    assert get_args(OutcomeEvent.model_fields["status"].annotation) == vocab.OUTCOME_STATUSES
    assert get_args(StepStateEvent.model_fields["status"].annotation) == vocab.STEP_STATUSES
    assert vocab.TERMINAL_STATUSES == frozenset(vocab.OUTCOME_STATUSES)
    assert set(vocab.OUTCOME_STATUSES) < set(vocab.RUN_STATUSES)
