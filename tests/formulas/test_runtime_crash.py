"""Kill a formula run with SIGKILL at random moments, resume it each time, and check nothing was lost.

The promise under test: a process killed at any instant loses at most the work in flight; ``resume``
continues from the last committed transition; no completed step runs again; the store stays sound.
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

from plangate.events import StepStateEvent
from plangate.store import open_store

WORKER = Path(__file__).with_name("crash_worker.py")
pytestmark = pytest.mark.slow
KILLS = 8
MAX_RUNS = 6  # a run that completes before its share of kills leaves the rest to the next one


def _spawn(db: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _run_id(db: Path) -> str | None:
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT id FROM runs LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _event_count(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0


def _wait_for_progress(process: subprocess.Popen[str], db: Path, baseline: int) -> bool:
    """Wait until the worker commits something new (True) or exits (False)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if _event_count(db) > baseline:
            return True
        time.sleep(0.005)
    raise AssertionError("the worker made no progress in 60 s")


def _kill_and_resume(db: Path, rng: random.Random, budget: int) -> int:
    """Run a formula to its end in ``db``, killed up to ``budget`` times; returns how many kills landed."""
    kills = 0
    process = _spawn(db, "start")
    while kills < budget:
        # kill only once the worker is really running, at a random instant of its work
        if not _wait_for_progress(process, db, _event_count(db)):
            break
        time.sleep(rng.uniform(0.0, 0.06))
        if process.poll() is not None:
            break
        process.send_signal(signal.SIGKILL)
        process.communicate()  # reap it and close its pipes
        kills += 1
        run_id = _run_id(db)
        assert run_id is not None
        process = _spawn(db, "resume", run_id)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert stdout.strip().endswith("completed"), (stdout, stderr)
    return kills


def _check(db: Path) -> None:
    run_id = _run_id(db)
    assert run_id is not None
    store = open_store(str(db))
    events = store.events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # gapless, nothing torn
    completes = Counter(e.step_id for e in events if isinstance(e, StepStateEvent) and e.status == "complete")
    assert sorted(completes) == sorted(f"s{i}" for i in range(48))
    assert set(completes.values()) == {1}  # every step completed exactly once
    assert not db.with_suffix(".double").exists(), db.with_suffix(".double").read_text()
    assert store.get_run(run_id).status == "completed"
    store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("seed", range(5))
def test_random_kills_then_resume_lose_nothing_and_repeat_nothing(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kills = runs = 0
    while kills < KILLS and runs < MAX_RUNS:
        # On a loaded machine a run may complete before its share of kills: the next run takes the rest.
        runs += 1
        db = tmp_path / f"crash-{runs}.db"
        kills += _kill_and_resume(db, rng, KILLS - kills)
        _check(db)
    assert kills == KILLS, f"only {kills} kills landed mid-run in {runs} runs: the test proved too little"
