"""``examples/formulas/demo_tools.py``: the demo's week, and the fresh one each ``./dev demo`` starts from.

The script runs for real, as ``./dev demo`` runs it, on a store of the test's own (``$PLANGATE_STORE``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from plangate.store import open_store
from plangate.tools.schedule import ScheduleState, ScheduleStore
from plangate.tools.schedule.models import Placement

DEMO_TOOLS = Path(__file__).resolve().parents[2] / "examples" / "formulas" / "demo_tools.py"


def _script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLANGATE_STORE": f"sqlite:///{tmp_path / 'demo.db'}"}
    command = [sys.executable, str(DEMO_TOOLS), *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _review(tmp_path: Path) -> Placement | None:
    store = open_store(f"sqlite:///{tmp_path / 'demo.db'}")
    try:
        planner, _ = ScheduleStore(store).load()
        return next(task.placement for task in planner.tasks() if task.id == "review")
    finally:
        store.close()


def _place_review(tmp_path: Path) -> None:
    # what a first demo leaves behind: the review placed in the week
    assert _script(tmp_path).returncode in (0, 1)  # loading the tools stores the week (and the review)
    store = open_store(f"sqlite:///{tmp_path / 'demo.db'}")
    try:
        week = ScheduleStore(store)
        planner, _ = week.load()
        tasks = tuple(
            task.model_copy(update={"placement": Placement(day=2, slot=0)}) if task.id == "review" else task
            for task in planner.state.tasks
        )
        week.replace(ScheduleState(tasks=tasks, events=planner.state.events, applied=planner.state.applied))
    finally:
        store.close()


def test_fresh_week_puts_a_new_example_week_with_an_unplaced_review(tmp_path: Path) -> None:
    _place_review(tmp_path)
    assert _review(tmp_path) == Placement(day=2, slot=0)

    # loading the tools (as approve does) keeps the week; ./dev demo's fresh-week starts a new one
    kept = subprocess.run(
        [sys.executable, "-c", f"import runpy; runpy.run_path({str(DEMO_TOOLS)!r})"],
        cwd=tmp_path,
        env={**os.environ, "PLANGATE_STORE": f"sqlite:///{tmp_path / 'demo.db'}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert kept.returncode == 0, kept.stderr
    assert _review(tmp_path) == Placement(day=2, slot=0)

    fresh = _script(tmp_path, "fresh-week")
    assert fresh.returncode == 0, fresh.stderr
    assert "a fresh example week" in fresh.stderr
    assert _review(tmp_path) is None
