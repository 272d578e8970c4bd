"""Exactly-once writes under takeover, with the kill landing exactly between a write's effect and its receipt.

The fault test of ``test_worker_faults.py`` kills workers at random moments; here the write tool itself
hangs right after its effect (a label ending in ``-hang``), so the worker is always killed with the intent
committed, the row written and no receipt. The worker that takes the run over must reconcile the write
(the tool's ``reconcile`` finds its row: the run goes on, the write ran once), or, for a tool that cannot
tell, ask a person (``outcome_unknown``) instead of running it again. Formula write steps and agent writes
alike. Writes are counted by the tool in a table of its own (``fault_writes``).
"""

from __future__ import annotations

import os

import fault_tools
import pytest
from worker_helpers import Workers, approve_open, submit_agent, submit_formula, until

from plangate.events import StatusEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.store import Store
from plangate.workers import RunQueue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _written(store_url: str) -> int:
    return sum(fault_tools.executions(store_url).values())


def _cut_off_after_the_effect(store: Store, store_url: str, run_id: str, workers: Workers) -> None:
    """Wait for the write to land, then SIGKILL the worker holding the run while its write hangs."""
    until(lambda: _written(store_url) == 1, 90, "the write to take effect")
    lease = store.get_lease(run_id)
    assert lease is not None
    group = os.getpgid(int(lease.holder.rsplit(":", 3)[1]))  # the worker's child holds it
    (holder,) = [proc for proc in workers.alive() if proc.pid == group]
    workers.kill(holder)
    assert workers.alive(), "no worker left to take the run over"


def _ended_or_written_twice(store: Store, store_url: str, run_id: str) -> bool:
    return store.get_run(run_id).status == "completed" or _written(store_url) > 1


def _two_workers(workers: Workers) -> None:
    first = workers.start(ttl=10)
    workers.wait_ready(first)
    second = workers.start(ttl=10)  # ready before the kill: the run's next holder
    workers.wait_ready(second)


def _codes(store: Store, run_id: str) -> list[str]:
    return [event.code for event in store.events(run_id) if isinstance(event, StatusEvent)]


def test_a_formula_write_cut_off_after_its_effect_is_reconciled_by_the_next_worker(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    _two_workers(workers)
    run_id = submit_formula(store, queue, "slow", seconds=0.1, label="cut-hang")
    _cut_off_after_the_effect(store, store_url, run_id, workers)

    until(
        lambda: store.get_run(run_id).status == "completed" or _written(store_url) > 1, 90, "the run to end"
    )

    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}
    assert store.get_run(run_id).status == "completed"
    assert "reconciled" in _codes(store, run_id)


def test_an_agent_write_cut_off_after_its_effect_is_reconciled_by_the_next_worker(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    _two_workers(workers)
    run_id = submit_agent(store, queue, "agent-hang")
    until(lambda: approve_open(store, queue) == 1, 90, "the write's consent request")
    _cut_off_after_the_effect(store, store_url, run_id, workers)

    until(
        lambda: store.get_run(run_id).status == "completed" or _written(store_url) > 1, 90, "the run to end"
    )

    assert list(fault_tools.executions(store_url).values()) == [1]
    assert store.get_run(run_id).status == "completed"
    assert "reconciled" in _codes(store, run_id)


def test_a_write_that_cannot_be_reconciled_asks_a_person_on_the_next_worker_and_never_runs_again(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    _two_workers(workers)
    run_id = submit_formula(store, queue, "blind", label="blind-hang")
    _cut_off_after_the_effect(store, store_url, run_id, workers)

    until(lambda: bool(store.list_interactions(status="open", run_id=run_id)), 90, "a question to a person")
    (asked,) = store.list_interactions(status="open", run_id=run_id)
    assert (asked.kind, asked.step_id) == ("approval", "write")
    assert "outcome_unknown" in _codes(store, run_id)
    assert _written(store_url) == 1
    approve_open(store, queue)  # "it happened"
    until(lambda: store.get_run(run_id).status == "completed", 90, "the run to complete")
    step = FormulaRunner(store).load(run_id).steps["write"]
    assert step.output == {"outcome_unknown": True, "happened": True}

    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}
