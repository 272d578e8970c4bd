"""30 SIGKILLs at random moments on a formula with a loop, a 6-wide fan-out and writes, resumed each time.

The promises under test (SPEC §2 Runtime, §6): each root completes with exactly 6 sub-runs and no orphan
(no run left unfinished, every sub-run committed by its parent before it existed), no completed step runs
again, and every write happened exactly once, as counted from inside the write tool.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from crash_fanout_worker import LOOP, WIDE

from plangate.events import StepStateEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.store import TERMINAL_STATUSES, open_store

WORKER = Path(__file__).with_name("crash_fanout_worker.py")
KILLS = 30
MAX_ROOTS = 8  # a root that completes before its share of kills leaves the rest to the next one
pytestmark = pytest.mark.slow


def _spawn(db: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def _count(db: Path, sql: str) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0


def _root(db: Path) -> str | None:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute("SELECT id FROM runs WHERE parent_run_id IS NULL").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _progress(process: subprocess.Popen[str], db: Path, baseline: int) -> bool:
    """Wait until the worker commits something new (True) or exits (False)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if _count(db, "SELECT count(*) FROM events") > baseline:
            return True
        time.sleep(0.003)
    raise AssertionError("the worker made no progress in 60 s")


def _kill_and_resume(db: Path, rng: random.Random, budget: int) -> int:
    """Run one root to its end, killing it up to ``budget`` times; returns how many kills landed."""
    kills = 0
    process = _spawn(db, "start")
    while kills < budget:
        if not _progress(process, db, _count(db, "SELECT count(*) FROM events")):
            break
        time.sleep(rng.uniform(0.0, 0.08))
        if process.poll() is not None:
            break
        process.send_signal(signal.SIGKILL)
        process.communicate()  # reap it: its pid is gone, so the next process may take its lease at once
        kills += 1
        root = _root(db)
        process = _spawn(db, "resume", root) if root is not None else _spawn(db, "start")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert stdout.strip().endswith("completed"), (stdout, stderr)
    return kills


def _check(db: Path) -> None:
    root = _root(db)
    assert root is not None
    store = open_store(str(db))
    runs = {run.id: run for run in store.list_runs(limit=1000).items}
    assert store.get_run(root).status == "completed"
    subs = [run for run in runs.values() if run.parent_run_id == root]
    assert len(subs) == WIDE, sorted(runs)  # exactly six: adopted after every kill, never started again
    assert all(run.status in TERMINAL_STATUSES for run in runs.values())  # no orphan left running
    assert all(run.status == "completed" for run in runs.values())
    fanned = [
        e.wait
        for e in store.events(root)
        if isinstance(e, StepStateEvent)
        and e.step_id == "regions"
        and e.wait
        and e.wait.get("kind") == "fanout"
    ]
    committed = fanned[0]["run_ids"]  # the transition that fanned out, before any sub-run existed
    assert isinstance(committed, list) and sorted(map(str, committed)) == sorted(run.id for run in subs)

    for run_id in runs:
        events = store.events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        done = Counter(e.step_id for e in events if isinstance(e, StepStateEvent) and e.status == "complete")
        assert set(done.values()) == {1}, (run_id, done)  # every step completed exactly once
        assert store.pending_write_intents(run_id) == []
    rerun = db.with_suffix(".rerun")
    assert not rerun.exists(), f"completed steps ran again: {rerun.read_text()}"

    with sqlite3.connect(db.with_name("effects.db")) as conn:
        executions = conn.execute("SELECT what, key FROM executions").fetchall()
    per_write = Counter(what for what, _ in executions)
    assert per_write == Counter({"release": 1, **{f"r{i}": 1 for i in range(WIDE)}}), executions
    loop_steps = [s for s in FormulaRunner(store).load(root).steps if s.startswith("warmup.iter")]
    assert len(loop_steps) == LOOP
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_thirty_kills_lose_nothing_repeat_nothing_and_write_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    kills = 0
    roots = 0
    while kills < KILLS and roots < MAX_ROOTS:
        folder = tmp_path / f"root{roots}"
        folder.mkdir()
        db = folder / "runs.db"
        kills += _kill_and_resume(db, rng, min(10, KILLS - kills))
        _check(db)
        roots += 1
    assert kills == KILLS, f"only {kills} kills landed mid-run in {roots} roots: the test proved too little"
