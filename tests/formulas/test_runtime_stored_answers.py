"""Answers stored for the process that advances a run (``FormulaRunner.store_answer``), as a server whose
runs workers advance gives them: checked when stored, stored once, applied by a runner made with
``stored_answers`` at its next pass. The worker test of the whole path (a branch still working on a real
worker while the answer comes over HTTP) is in ``tests/workers/test_workers.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from runtime_helpers import memory_store, write_formula

from plangate.errors import InteractionError, StaleInteraction
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve, Edit
from plangate.tools import ToolRegistry, tool


@tool
def note() -> str:
    """Take a note."""
    return "noted"


BODY = """
[[steps]]
id = "ask"
human = { prompt = "Go on?", kind = "approve" }

[[steps]]
id = "after"
needs = ["ask"]
tool = { name = "note" }
"""


def test_a_stored_answer_is_checked_stored_once_and_applied_at_the_next_pass(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]), stored_answers=True)
    waiting = asyncio.run(runner.start(write_formula(tmp_path, "ask", BODY)))
    assert waiting.status == "waiting"
    (asked,) = store.list_interactions(status="open", run_id=waiting.run_id)

    with pytest.raises(InteractionError, match="edit"):
        runner.store_answer(asked.id, Edit({"x": 1}))  # does not fit a person's approval: nothing stored
    assert runner.store_answer(asked.id, Approve(), by="ann") == waiting.run_id
    with pytest.raises(StaleInteraction):
        runner.store_answer(asked.id, Approve(), by="bob")  # one answer per question
    assert store.get_interaction(asked.id).status == "open"  # stored, not applied: the run is untouched

    done = asyncio.run(runner.resume(waiting.run_id))

    assert done.status == "completed", done.reason
    resolved = store.get_interaction(asked.id)
    assert (resolved.status, resolved.resolved_by) == ("resolved", "ann")


def test_a_runner_not_made_for_stored_answers_does_not_look_for_them(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]))
    waiting = asyncio.run(runner.start(write_formula(tmp_path, "ask", BODY)))
    (asked,) = store.list_interactions(status="open", run_id=waiting.run_id)
    runner.store_answer(asked.id, Approve(), by="ann")

    again = asyncio.run(runner.resume(waiting.run_id))

    assert again.status == "waiting"
    assert store.get_interaction(asked.id).status == "open"
