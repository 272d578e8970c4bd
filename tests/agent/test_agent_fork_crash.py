"""A process killed with SIGKILL while it forks runs (copying their history, writing in them) leaves the
origin as it was and every fork consistent: not copied yet, or copied whole; each write made at most once,
and one cut off between its intent and its receipt is asked about, never run again blindly."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from agent_helpers import decision

from plangate.agent import Agent
from plangate.models import ScriptedModel
from plangate.store import Store, open_store

WORKER = Path(__file__).with_name("fork_worker.py")
KILLS = 6


def _worker(url: str, log: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, str(log), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def _snapshot_of(store: Store, run_id: str) -> tuple[list[dict[str, object]], int]:
    return [event.model_dump(exclude={"at"}) for event in store.events(run_id)], len(store.receipts(run_id))


@pytest.mark.slow
def test_sigkill_while_forking_leaves_the_origin_and_every_fork_consistent(
    tmp_path: Path, store_url: str
) -> None:
    log = tmp_path / "writes.log"
    out, err = _worker(store_url, log, "origin").communicate(timeout=60)
    assert err == "", err
    origin = out.strip()
    store = open_store(store_url)
    before = _snapshot_of(store, origin)
    cut = next(e.seq for e in store.events(origin) if e.type == "round" and getattr(e, "round", 0) == 2)
    carried = [{**e, "run_id": ""} for e in before[0][: cut - 1]]
    rng = random.Random(25)
    for _ in range(KILLS):
        process = _worker(store_url, log, "forks", origin, "400")
        assert process.stdout is not None
        process.stdout.readline()  # the first fork has started
        time.sleep(rng.uniform(0.0, 0.4))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
    forks = [run.id for run in store.list_runs(limit=1000).items if run.id != origin]
    assert len(forks) > KILLS

    assert _snapshot_of(store, origin) == before  # the origin is only read
    writes = Counter(log.read_text(encoding="utf-8").split())
    assert all(count == 1 for count in writes.values()), writes  # no write twice
    from fork_worker import TOOLS

    asked = 0
    for fork_id in forks:
        events = store.events(fork_id)
        if events:  # copied whole, or not at all
            copied = [{**e.model_dump(exclude={"at"}), "run_id": ""} for e in events[: cut - 1]]
            assert copied == carried
            assert events[cut - 1].type == "status" and getattr(events[cut - 1], "code", "") == "forked"
        model = ScriptedModel([decision("done"), "Done."])
        result = Agent(model=model, tools=TOOLS, store=store).resume(fork_id)
        if result.interaction is not None:  # a write cut off mid-call: a person says whether it happened
            assert "may or may not have happened" in result.interaction.prompt
            asked += 1
            continue
        assert result.status == "completed", (fork_id, result)
        receipts = [(r.name, r.source) for r in store.receipts(fork_id)]
        assert receipts[0] == ("lookup", "tool_observation")  # carried: the fork point is before the write
        wrote = receipts[1:] == [("place", "write_receipt")]
        assert wrote or receipts[1:] == []
        assert (f"{fork_id}:2" in writes) == wrote  # a write happened exactly when its receipt says so
    assert asked <= KILLS  # at most one write cut off per kill
    origin_key = next(i.id for i in store.list_interactions(run_id=origin))
    assert writes[origin_key] == 1 and sum(writes.values()) <= len(forks) + 1
    store.close()
