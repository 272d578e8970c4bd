"""A formula run stopped right after it launched steps (its run ended elsewhere, a caller's time limit, a
server shutting down) leaves no step's work behind: a step task cancelled before it ever ran leaves no
coroutine unawaited (under ``filterwarnings = error`` that warning fails whatever test happens to collect
it)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path

from runtime_helpers import memory_store, write_formula

from plangate.errors import InteractionError
from plangate.formulas._scheduler import Scheduler
from plangate.formulas.runtime import FormulaRunner
from plangate.tools import ToolRegistry, tool


@tool
def note() -> str:
    """Take a note."""
    return "noted"


BODY = """
[[steps]]
id = "one"
tool = { name = "note" }

[[steps]]
id = "two"
tool = { name = "note" }
"""


def test_steps_launched_then_stopped_before_they_ran_leave_no_work_unawaited(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([note]))
    run_id = runner.submit(write_formula(tmp_path, "two", BODY))

    async def launch_and_stop() -> int:
        scheduler = Scheduler(runner, store.get_run(run_id), runner.load(run_id))
        scheduler._index()
        scheduler._schedule()
        scheduler._launch()  # the steps' tasks exist, and have not run yet
        launched = len(scheduler.tasks)
        scheduler._stop(InteractionError("stopped"))  # as when the run ends before the next await
        await asyncio.sleep(0)
        return launched

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(launch_and_stop()) == 2
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
