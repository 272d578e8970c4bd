"""The durability promise, observed: nothing a step does starts before what allows it is committed.

SPEC §6: a step's ``running`` state and a write's intent are committed before its work starts, its result
before anything that depends on it starts; the transitions of one scheduler pass may share one transaction
(group commit). Two witnesses for every call: the order in which the store announced its commits (it tells
subscribers after each commit) against the order of the calls, and a second store on the same file or
database, which sees only what was committed, read from inside the tool. On both backends: a PostgreSQL
store commits a run's transitions without reading its row first (``Store.commit``), which must not move a
call ahead of its commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plangate.events import StepStateEvent
from plangate.formulas.plan import CookedStep, Plan, ToolExecutor
from plangate.formulas.runtime import FormulaRunner
from plangate.store import Commit, SQLiteStore, Store, open_store
from plangate.tools import ToolRegistry, current_call, tool

Opener = Callable[[], Store]
"""Opens a new handle on the test's store (the same file or database each time)."""


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        return lambda: SQLiteStore(path)
    url: str = request.getfixturevalue("postgres_url")
    return lambda: open_store(url)


Entry = tuple[str, Any]
"""``("commit", {(step id, status), ...})`` or ``("call", step id)``, in the order they happened."""


class Witness:
    """The log of commits and calls, and what a reader of the file saw from inside each call."""

    def __init__(self, reader: Store) -> None:
        self.log: list[Entry] = []
        self.reader = reader  # a connection of its own: only what was committed is visible
        self.seen: dict[str, set[tuple[str, str]]] = {}  # step id -> (step id, status) committed at its call

    def heard(self, commit: Commit) -> None:
        states = {(e.step_id, e.status) for e in commit.events if isinstance(e, StepStateEvent)}
        self.log.append(("commit", states))

    def called(self, step: str) -> None:
        self.log.append(("call", step))
        run = self.reader.list_runs(limit=1).items[0]
        events = self.reader.events(run.id)
        self.seen[step] = {(e.step_id, e.status) for e in events if isinstance(e, StepStateEvent)}

    def committed_at(self, state: tuple[str, str]) -> int:
        """Where in the log the commit holding ``state`` was announced."""
        return next(i for i, (kind, what) in enumerate(self.log) if kind == "commit" and state in what)

    def called_at(self, step: str) -> int:
        return self.log.index(("call", step))


def _run(opener: Opener, plan: Plan, concurrency: int, *, write: bool = False) -> tuple[Witness, Store]:
    store = opener()
    witness = Witness(opener())
    store.subscribe(witness.heard)

    @tool
    async def work(step: str) -> dict[str, str]:
        """Do one step's work."""
        witness.called(step)
        await asyncio.sleep(0)  # a real suspension: others' work may interleave
        return {"done": step}

    @tool(effect="write")
    async def publish(step: str) -> dict[str, str]:
        """Publish, once: its intent must be committed already."""
        call = current_call()
        assert call is not None and call.idempotency_key is not None
        intent = witness.reader.get_write_intent(call.idempotency_key)
        witness.seen[f"intent:{step}"] = {("intent", intent.status)} if intent is not None else set()
        witness.called(step)
        return {"published": step}

    runner = FormulaRunner(store, ToolRegistry([work, publish]), concurrency=concurrency)
    try:
        result = asyncio.run(runner.start(plan, always_execute=write))
    finally:
        witness.reader.close()
    assert result.status == "completed", result.reason
    return witness, store


def _step(i: int, needs: list[str], tool_name: str = "work") -> CookedStep:
    executor = ToolExecutor(name=tool_name, args={"step": f"s{i}"})
    return CookedStep(id=f"s{i}", title=f"step {i}", needs=needs, executor=executor)


def test_in_a_chain_each_running_state_and_each_need_is_committed_before_the_call(opener: Opener) -> None:
    plan = Plan(formula="chain", steps=[_step(i, [f"s{i - 1}"] if i else []) for i in range(6)])
    witness, store = _run(opener, plan, concurrency=8)
    store.close()

    for i in range(6):
        step = f"s{i}"
        assert witness.committed_at((step, "running")) < witness.called_at(step)
        assert (step, "running") in witness.seen[step]  # on disk, for another connection, at the call
        if i:
            need = (f"s{i - 1}", "complete")
            assert witness.committed_at(need) < witness.called_at(step)
            assert need in witness.seen[step]
    # group commit: a step's end and the next one's start share one transaction
    assert {("s0", "complete"), ("s1", "running")} <= witness.log[witness.committed_at(("s1", "running"))][1]


def test_in_a_fan_out_each_running_state_is_committed_before_the_call_and_a_pass_commits_together(
    opener: Opener,
) -> None:
    plan = Plan(formula="fan-out", steps=[_step(i, []) for i in range(20)])
    witness, store = _run(opener, plan, concurrency=4)

    for i in range(20):
        step = f"s{i}"
        assert witness.committed_at((step, "running")) < witness.called_at(step)
        assert (step, "running") in witness.seen[step]
    # the steps that became ready together commit their running states together, one transaction a pass
    first = witness.log[witness.committed_at(("s0", "running"))][1]
    assert {(f"s{i}", "running") for i in range(4)} <= first
    assert max(witness.called_at(f"s{i}") for i in range(4)) < witness.committed_at(("s4", "running"))
    store.close()


def test_a_write_step_runs_only_once_its_intent_and_running_state_are_committed(opener: Opener) -> None:
    plan = Plan(formula="write", steps=[_step(0, []), _step(1, ["s0"], tool_name="publish")])
    witness, store = _run(opener, plan, concurrency=8, write=True)

    assert witness.seen["intent:s1"] == {("intent", "intent")}  # committed, its receipt not yet
    assert ("s1", "running") in witness.seen["s1"]
    run = store.list_runs(limit=1).items[0]
    assert store.pending_write_intents(run.id) == []  # and its receipt committed after the call
    store.close()


def test_a_new_run_s_first_transition_commits_with_its_first_pass(opener: Opener) -> None:
    plan = Plan(formula="chain", steps=[_step(i, [f"s{i - 1}"] if i else []) for i in range(4)])
    witness, store = _run(opener, plan, concurrency=8)

    commits = [what for kind, what in witness.log if kind == "commit"]
    # started, and its first step running, in one transaction; then one transaction a step
    assert ("s0", "running") in commits[0]
    assert len(commits) == len(plan.steps) + 1
    run = store.list_runs(limit=1).items[0]
    first = store.events(run.id)[0]
    assert (first.type, getattr(first, "code", None)) == ("status", "started")
    assert first.seq == 1
    store.close()


def test_starting_a_run_reads_back_nothing_it_just_wrote(tmp_path: Path) -> None:
    # A run this runner creates is created with its lease, and is neither read again nor looked up for a
    # lease to take over, and a plan that starts no runs has no children to list when it ends: each would be
    # one more round trip a run on PostgreSQL.
    store = SQLiteStore(tmp_path / "runs.db")
    reads: list[str] = []
    for name in ("get_run", "get_lease", "take_lease", "list_runs", "get_snapshot"):
        method = getattr(store, name)

        def counted(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            reads.append(_name)
            return _method(*args, **kwargs)

        setattr(store, name, counted)

    @tool
    async def work(step: str) -> dict[str, str]:
        """Do one step's work."""
        return {"done": step}

    plan = Plan(formula="chain", steps=[_step(i, [f"s{i - 1}"] if i else []) for i in range(3)])
    result = asyncio.run(FormulaRunner(store, ToolRegistry([work])).start(plan))

    assert result.status == "completed", result.reason
    assert reads == []
    store.close()
