"""An answer to a run another process advances is left in the store for that process (``FormulaRunner.answer``
when it cannot take the run's lease): checked first, stored once, and applied at the next pass of whichever
runner advances the run. The worker test of the whole path (a branch still working on a real worker while
the answer comes over HTTP) is in ``tests/workers/test_workers.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from runtime_helpers import memory_store, write_formula

from plangate.errors import InteractionError, StaleInteraction
from plangate.formulas import runtime
from plangate.formulas._answers import STORED_ANSWERS
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve, Edit
from plangate.store import Documents, LeaseBook
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


def test_an_answer_to_a_run_held_elsewhere_is_checked_stored_once_and_applied_at_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_HANDED_WAIT", 0.3)  # how long answer waits for the holder to take it
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]))
    waiting = asyncio.run(runner.start(write_formula(tmp_path, "ask", BODY)))
    assert waiting.status == "waiting"
    (asked,) = store.list_interactions(status="open", run_id=waiting.run_id)
    holder = LeaseBook(store)  # another process, advancing the run
    holder.take(waiting.run_id)

    with pytest.raises(InteractionError, match="edit"):
        asyncio.run(runner.answer(asked.id, Edit({"x": 1})))  # does not fit a person's approval: nothing
    assert Documents(store).get(STORED_ANSWERS, asked.id) is None
    answered = asyncio.run(runner.answer(asked.id, Approve(), by="ann"))
    assert (answered.run_id, answered.continuing) == (waiting.run_id, True)  # its holder applies it
    with pytest.raises(StaleInteraction):
        asyncio.run(runner.answer(asked.id, Approve(), by="bob"))  # one answer per question
    assert store.get_interaction(asked.id).status == "open"  # stored, not applied: the run is untouched
    holder.give_back(waiting.run_id)

    done = asyncio.run(FormulaRunner(store, ToolRegistry([note])).resume(waiting.run_id))

    assert done.status == "completed", done.reason
    resolved = store.get_interaction(asked.id)
    assert (resolved.status, resolved.resolved_by) == ("resolved", "ann")


def test_an_answer_committed_once_its_holder_lets_the_run_wait(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]))
    waiting = asyncio.run(runner.start(write_formula(tmp_path, "ask", BODY)))
    (asked,) = store.list_interactions(status="open", run_id=waiting.run_id)
    holder = LeaseBook(store)
    holder.take(waiting.run_id)

    async def scenario() -> runtime.Answered:
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, holder.give_back, waiting.run_id)  # it lets go before it took the answer
        return await runner.answer(asked.id, Approve(), by="ann")

    answered = asyncio.run(scenario())

    assert (answered.run_id, answered.continuing) == (waiting.run_id, False)  # committed here: resume it
    assert store.get_interaction(asked.id).status == "resolved"
    assert asyncio.run(runner.resume(waiting.run_id)).status == "completed"


@pytest.mark.parametrize("stored", [{"by": "ann", "resolution": "yes"}, {"resolution": {"kind": "nod"}}])
def test_a_stored_answer_that_cannot_be_read_is_skipped_and_the_run_waits_on(
    tmp_path: Path, stored: dict[str, object]
) -> None:
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]))
    waiting = asyncio.run(runner.start(write_formula(tmp_path, "ask", BODY)))
    (asked,) = store.list_interactions(status="open", run_id=waiting.run_id)
    Documents(store).put(STORED_ANSWERS, asked.id, stored, expected_version=None)

    resumed = asyncio.run(FormulaRunner(store, ToolRegistry([note])).resume(waiting.run_id))

    assert resumed.status == "waiting", resumed.reason  # the unreadable answer is not applied, nor fatal
    assert store.get_interaction(asked.id).status == "open"
