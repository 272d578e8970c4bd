"""bench/local_model.py's task sets are sound (no task solved by the untouched week, every goal compiles) and
its harness runs end to end on the TestModel (no figure of the local model is measured here)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench_modules import load

from plangate.conditions import compile_done_when
from plangate.models import TestModel
from plangate.store import open_store
from plangate.tools.schedule import seed_week

bench = load("local_model")
SETS = {"bench": bench.tasks(), "held-out": bench.held_out_tasks(), "held-out-kinds": bench.held_out_kinds()}


def test_the_sets_have_the_new_kinds_and_keep_the_held_out_apart() -> None:
    assert len(SETS["bench"]) == 66 and len(SETS["held-out-kinds"]) == 21
    for name in ("bench", "held-out-kinds"):
        kinds = {task.kind for task in SETS[name]}
        assert {"question", "move", "swap", "two_step"} <= kinds, name
    prompts = [{task.prompt for task in found} for found in SETS.values()]
    assert not (prompts[0] & prompts[1]) and not (prompts[0] & prompts[2]) and not (prompts[1] & prompts[2])


@pytest.mark.parametrize("name", sorted(SETS))
def test_no_write_task_is_solved_by_the_untouched_week_and_every_goal_compiles(
    tmp_path: Path, name: str
) -> None:
    store = open_store(str(tmp_path / "week.db"))
    seed_week(store)
    for task in SETS[name]:
        if task.done_when is not None:
            compile_done_when(task.done_when)
        if task.writes:
            assert not task.check(store, ""), task.prompt
    store.close()


def test_the_harness_runs_every_new_kind_on_the_test_model(tmp_path: Path) -> None:
    picked = {task.kind: task for task in SETS["held-out-kinds"]}
    for i, task in enumerate(picked.values()):
        workdir = tmp_path / str(i)
        workdir.mkdir()
        outcome = asyncio.run(bench.run_task(TestModel(), task, workdir, goal=True))
        assert outcome.kind == task.kind and outcome.rounds >= 1
        assert outcome.unconsented == 0
