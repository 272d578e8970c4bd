"""Whole turns on the real local model (SmolLM2-135M under llama.cpp, offline): the grammar path ends every
turn with a status and a reason, and whatever it answers passes the review.

Marked ``slow`` and ``local_model`` (``./dev test-local`` runs them alone). The model is small: these tests
assert what the runtime guarantees (a stored turn, a structured query on real columns, an honest status),
not that the answer is right.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from copilot_helpers import assert_stored_whole

from plangate.copilot import Turn, ask
from plangate.events import OpEvent
from plangate.models.local import LocalModel
from plangate.store import SQLiteStore, Store

pytestmark = [pytest.mark.slow, pytest.mark.local_model, pytest.mark.timeout(900)]

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture(scope="module")
def model() -> LocalModel:
    loaded = LocalModel()
    loaded.load()
    return loaded


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened  # type: ignore[misc]
    opened.close()


def _assert_honest(turn: Turn, store: Store) -> None:
    assert_stored_whole(store, turn)
    assert turn.status in ("done", "partial", "unusable", "failed") and turn.reason
    ops = [e.op for e in store.events(turn.run_id) if isinstance(e, OpEvent)]
    queries = [op for op in ops if op["op"] == "add_step" and op.get("by") is None]
    assert queries and all(op["step"]["tool"]["name"] == "db_aggregate" for op in queries)  # type: ignore[index]
    for attempt in turn.attempts:
        # a formula that ran named only real tables and columns (the grammar's enums), so the check passed
        if attempt.run_id is not None:
            assert not [i for i in attempt.issues if i.level == "error"]
    if turn.status in ("done", "partial"):
        assert turn.answer and "invented_number" not in turn.attempts[-1].review.kinds()


def test_the_demo_question_runs_a_whole_turn_offline(model: LocalModel, store: Store) -> None:
    turn = ask("Which 3 regions had the highest revenue in 2025?", DATA / "shop.db", model=model, store=store)
    _assert_honest(turn, store)


def test_a_chinook_question_runs_a_whole_turn_offline(model: LocalModel, store: Store) -> None:
    turn = ask("Which 5 genres sold the most tracks?", DATA / "chinook.sqlite", model=model, store=store)
    _assert_honest(turn, store)
