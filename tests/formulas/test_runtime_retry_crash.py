"""A process killed with SIGKILL while it retries runs (storing them, committing their first state, running
their steps and writes) leaves the origin as it was and every retry consistent: not committed yet, or with
its first commit whole; each write made at most once, and one cut off between its intent and its receipt
asked about, never run again blindly; each retry then ends when advanced again."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from plangate.events import StatusEvent, StepStateEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.store import Store, open_store

WORKER = Path(__file__).with_name("retry_worker.py")
KILLS = 6


def _worker(url: str, folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, str(folder), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def _snapshot_of(store: Store, run_id: str) -> tuple[list[dict[str, object]], int, str]:
    events = [event.model_dump(exclude={"at"}) for event in store.events(run_id)]
    return events, len(store.receipts(run_id)), store.get_run(run_id).status


@pytest.mark.slow
def test_sigkill_while_retrying_leaves_the_origin_and_every_retry_consistent(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retry_worker import SHIP, TOOLS

    (tmp_path / "ship.formula.toml").write_text(SHIP, encoding="utf-8")
    log = tmp_path / "writes.log"
    monkeypatch.setenv("RETRY_WRITES_LOG", str(log))  # the workers' writes, and this process's
    out, err = _worker(store_url, tmp_path, "origin").communicate(timeout=60)
    assert err == "", err
    origin = out.strip()
    store = open_store(store_url)
    before = _snapshot_of(store, origin)
    assert before[2] == "completed"
    rng = random.Random(25)
    for _ in range(KILLS):
        process = _worker(store_url, tmp_path, "retries", origin, "400")
        assert process.stdout is not None
        process.stdout.readline()  # the first retry is stored
        time.sleep(rng.uniform(0.0, 0.4))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
    retries = [run.id for run in store.list_runs(origin_run_id=origin, limit=1000).items]
    assert len(retries) > KILLS

    assert _snapshot_of(store, origin) == before  # the origin is only read
    writes = Counter(log.read_text(encoding="utf-8").split())
    assert all(count == 1 for count in writes.values()), writes  # no write twice

    runner = FormulaRunner(store, TOOLS, search_paths=[tmp_path])
    asked = 0
    for retry_id in retries:
        events = store.events(retry_id)
        if events:  # its first commit whole: started, retried, --yes recorded, fetch carried
            first = [(e.type, getattr(e, "code", getattr(e, "step_id", ""))) for e in events[:4]]
            assert first == [
                ("status", "started"),
                ("status", "retried"),
                ("status", "always_execute"),
                ("step_state", "fetch"),
            ], first
            assert isinstance(events[3], StepStateEvent) and events[3].status == "complete"
        result = asyncio.run(runner.resume(retry_id))
        if result.interaction is not None:  # a write cut off mid-call: a person says whether it happened
            assert "may or may not have happened" in result.interaction.prompt
            asked += 1
            continue
        assert result.status == "completed", (retry_id, result.reason)
        made = Counter(log.read_text(encoding="utf-8").split())
        assert made[f"{retry_id}:publish:1"] == 1  # written once, before the kill or now
        codes = [e.code for e in store.events(retry_id) if isinstance(e, StatusEvent)]
        assert codes.count("retried") == 1
    final = Counter(log.read_text(encoding="utf-8").split())
    assert all(count == 1 for count in final.values()), final  # still none twice, the retries ended
    assert asked <= KILLS  # at most one write cut off per kill
    assert final[f"{origin}:publish:1"] == 1
    store.close()
