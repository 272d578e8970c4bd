"""Helpers of the copilot tests: op streams as a model writes them, gold rows, the stored state of a turn."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from plangate.copilot import Turn
from plangate.copilot._conversations import Conversations
from plangate.events import OutcomeEvent
from plangate.store import Store


def lines(*ops: dict[str, object]) -> str:
    """Ops as newline-delimited JSON."""
    return "\n".join(json.dumps(op) for op in ops) + "\n"


def aggregate_step(step_id: str, **args: object) -> dict[str, object]:
    return {
        "op": "add_step",
        "step": {"id": step_id, "title": step_id, "tool": {"name": "db_aggregate", "args": args}},
    }


def query_step(step_id: str, source: str, sql: str) -> dict[str, object]:
    return {
        "op": "add_step",
        "step": {"id": step_id, "tool": {"name": "db_query", "args": {"source": source, "sql": sql}}},
    }


def answer_step(needs: str, step_id: str = "answer") -> dict[str, object]:
    rows = f"{{{{steps.{needs}.output.rows}}}}"
    prompt = f"Question: {{{{question}}}}\nRows {{{{steps.{needs}.output.columns}}}}: {rows}"
    return {"op": "add_step", "step": {"id": step_id, "needs": [needs], "llm": {"prompt": prompt}}}


DONE = {"op": "done", "explanation": "query, then answer", "run": True}


def gold(path: Path, sql: str) -> list[list[object]]:
    """The rows ``sql`` returns on the database at ``path``."""
    with closing(sqlite3.connect(path)) as connection:
        return [list(row) for row in connection.execute(sql).fetchall()]


def assert_stored_whole(store: Store, turn: Turn) -> None:
    """The turn is stored as returned, and its run ended with one outcome that says the same (and keeps
    the turn's usage)."""
    stored = Turn.from_record(Conversations(store).get_turn(turn.id))
    assert stored == turn.model_copy(update={"usage": None})
    run = store.get_run(turn.run_id)
    assert run.kind == "ask" and run.status in ("completed", "failed", "cancelled")
    outcomes = [e for e in store.events(turn.run_id) if isinstance(e, OutcomeEvent)]
    assert len(outcomes) == 1 and outcomes[0].code == turn.status
    assert outcomes[0].usage == turn.usage
    assert store.events(turn.run_id)[-1] == outcomes[0]
    assert [a.n for a in turn.attempts] == list(range(1, len(turn.attempts) + 1))
