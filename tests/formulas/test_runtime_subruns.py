"""Sub-runs survive a crash: their ids commit with the parent's transition before they start, a resumed
parent adopts the ones it had, and cancelling a parent cancels them (SPEC §2 Runtime)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import failed_steps, failing_child_creation, memory_store, write_formula

from plangate.errors import StoreError
from plangate.events import StepStateEvent
from plangate.formulas.runtime import MAX_NESTING, FormulaResult, FormulaRunner
from plangate.store import TERMINAL_STATUSES, Store
from plangate.tools import ToolRegistry, tool

WIDE = 6


class Work:
    """Tools that count their calls by argument; ``hold`` keeps the ones named in ``held`` waiting."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.held: set[str] = set()
        self.release = asyncio.Event()
        self.entered: Counter[str] = Counter()

    def registry(self) -> ToolRegistry:
        work = self

        @tool
        def regions() -> dict[str, Any]:
            """The regions to deploy to."""
            work.calls["regions"] += 1
            return {"regions": [f"r{i}" for i in range(WIDE)]}

        @tool
        async def deploy(region: str) -> dict[str, Any]:
            """Deploy one region (held until released when the test says so)."""
            work.entered[region] += 1
            if region == "boom":
                raise RuntimeError("the deploy broke")
            if region in work.held or "*" in work.held:
                await work.release.wait()
            work.calls[region] += 1
            return {"deployed": region}

        return ToolRegistry([regions, deploy])


def formulas(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "region",
        """
        [vars.region]
        required = true
        [[steps]]
        id = "deploy"
        tool = { name = "deploy", args = { region = "{{region}}" } }
        """,
    )
    write_formula(
        tmp_path,
        "wide",
        """
        [[steps]]
        id = "after"
        needs = ["list"]
        waits_for = "children-of(list)"
        tool = { name = "deploy", args = { region = "all" } }
        [[steps]]
        id = "list"
        tool = { name = "regions" }
        [steps.on_complete]
        for_each = "output.regions"
        formula = "region"
        vars = { region = "{item}" }
        parallel = true
        """,
    )


def children(store: Store, run_id: str) -> list[str]:
    return sorted(run.id for run in store.list_runs(parent_run_id=run_id, limit=1000).items)


async def _until(check: Any, what: str) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{what} did not happen")


def test_the_sub_run_ids_are_committed_before_any_sub_run_starts(tmp_path: Path) -> None:
    formulas(tmp_path)
    work = Work()
    work.held = {"*"}
    store = memory_store()
    runner = FormulaRunner(store, work.registry(), search_paths=[tmp_path])

    async def scenario() -> tuple[list[str], list[str], FormulaResult]:
        task = asyncio.ensure_future(runner.start("wide"))
        await _until(lambda: sum(work.entered.values()) == WIDE, "every sub-run to start")
        (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
        committed = FormulaRunner(store).load(root.id).steps["list"].wait  # what a restart would read
        recorded = [str(r) for r in committed["run_ids"]]  # type: ignore[union-attr]
        existing = children(store, root.id)
        work.release.set()
        return recorded, existing, await task

    recorded, existing, result = asyncio.run(scenario())

    assert result.status == "completed", result.reason
    assert len(recorded) == WIDE
    assert sorted(recorded) == existing  # every child that exists was committed by its parent first
    assert children(store, result.run_id) == existing


def test_a_resumed_fan_out_adopts_its_sub_runs_and_reruns_no_completed_step(tmp_path: Path) -> None:
    formulas(tmp_path)
    work = Work()
    work.held = {"r3", "r4"}
    store = memory_store()

    async def cut_off() -> str:
        task = asyncio.ensure_future(
            FormulaRunner(store, work.registry(), search_paths=[tmp_path]).start("wide")
        )
        await _until(lambda: sum(work.calls.values()) == 1 + WIDE - 2, "the free sub-runs to finish")
        await _until(lambda: work.entered["r3"] and work.entered["r4"], "the held ones to start")
        task.cancel()  # what a killed process leaves: the parent waiting on its fan-out, two children running
        with pytest.raises(asyncio.CancelledError):
            await task
        (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
        return root.id

    run_id = asyncio.run(cut_off())
    before = children(store, run_id)
    assert len(before) == WIDE
    work.held.clear()

    result = asyncio.run(FormulaRunner(store, work.registry(), search_paths=[tmp_path]).resume(run_id))

    assert result.status == "completed", result.reason
    assert children(store, run_id) == before  # adopted: no second set of sub-runs
    assert all(store.get_run(child).status == "completed" for child in before)
    assert work.calls == Counter({"regions": 1, "all": 1, **{f"r{i}": 1 for i in range(WIDE)}})


def test_a_sub_formula_step_cut_off_adopts_its_sub_run(tmp_path: Path) -> None:
    formulas(tmp_path)
    write_formula(
        tmp_path,
        "outer",
        """
        [[steps]]
        id = "one"
        formula = { name = "region", vars = { region = "solo" } }
        """,
    )
    work = Work()
    work.held = {"solo"}
    store = memory_store()

    async def cut_off() -> str:
        task = asyncio.ensure_future(
            FormulaRunner(store, work.registry(), search_paths=[tmp_path]).start("outer")
        )
        await _until(lambda: work.entered["solo"] == 1, "the sub-run's step to start")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
        return root.id

    run_id = asyncio.run(cut_off())
    (child,) = children(store, run_id)
    work.held.clear()

    result = asyncio.run(FormulaRunner(store, work.registry(), search_paths=[tmp_path]).resume(run_id))

    assert result.status == "completed", result.reason
    assert children(store, run_id) == [child]
    assert result.outputs["one"]["run_id"] == child
    assert work.entered["solo"] == 2 and work.calls["solo"] == 1  # the cut-off read ran again, once


def test_cancelling_a_parent_cancels_its_sub_runs_recursively(tmp_path: Path) -> None:
    write_formula(tmp_path, "ask", '[[steps]]\nid = "q"\nhuman = { prompt = "Go?" }\n')
    write_formula(tmp_path, "middle", '[[steps]]\nid = "inner"\nformula = { name = "ask" }\n')
    write_formula(tmp_path, "top", '[[steps]]\nid = "mid"\nformula = { name = "middle" }\n')
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry(), search_paths=[tmp_path])
    result = asyncio.run(runner.start("top"))
    assert result.status == "waiting" and result.interaction is not None
    (middle,) = children(store, result.run_id)
    (inner,) = children(store, middle)

    runner.cancel(result.run_id, "not today")

    assert [store.get_run(r).status for r in (result.run_id, middle, inner)] == ["cancelled"] * 3
    assert store.get_interaction(result.interaction.id).status == "expired"


def test_a_failed_fan_out_leaves_no_sub_run_behind(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "mixed",
        """
        [vars.region]
        required = true
        [[steps]]
        id = "ask"
        condition = "vars.region == 'r0'"
        human = { prompt = "Deploy r0?" }
        [[steps]]
        id = "break"
        condition = "vars.region == 'r1'"
        tool = { name = "deploy", args = { region = "boom" } }
        [[steps]]
        id = "deploy"
        tool = { name = "deploy", args = { region = "{{region}}" } }
        """,
    )
    write_formula(
        tmp_path,
        "wide",
        """
        [[steps]]
        id = "list"
        tool = { name = "regions" }
        [steps.on_complete]
        for_each = "output.regions"
        formula = "mixed"
        vars = { region = "{item}" }
        parallel = true
        """,
    )
    work = Work()
    store = memory_store()
    runner = FormulaRunner(store, work.registry(), search_paths=[tmp_path])

    result = asyncio.run(runner.start("wide"))  # r1 fails while r0 waits on a person

    assert result.status == "failed", result.reason
    subs = children(store, result.run_id)
    assert len(subs) == WIDE
    assert {store.get_run(c).status for c in subs} == {"completed", "failed", "cancelled"}
    assert all(store.get_run(c).status in TERMINAL_STATUSES for c in subs)  # nobody is left waiting
    assert store.list_interactions(status="open") == []


def test_a_run_cancelled_from_elsewhere_stops_at_its_next_commit_with_its_sub_runs(tmp_path: Path) -> None:
    formulas(tmp_path)
    work = Work()
    work.held = {"*"}
    store = memory_store()

    async def scenario() -> FormulaResult:
        task = asyncio.ensure_future(
            FormulaRunner(store, work.registry(), search_paths=[tmp_path]).start("wide")
        )
        await _until(lambda: sum(work.entered.values()) == WIDE, "every sub-run to start")
        (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
        FormulaRunner(store).cancel(root.id, "stopped from another process")  # no lease needed to stop a run
        work.release.set()
        return await task

    result = asyncio.run(scenario())

    assert result.status == "cancelled"
    runs = store.list_runs(limit=100).items
    assert len(runs) == 1 + WIDE and all(run.status == "cancelled" for run in runs)
    assert work.calls["all"] == 0  # nothing after the cancel ran


def test_a_store_that_fails_as_a_sub_run_is_created_stops_the_run_and_never_fails_the_step(
    tmp_path: Path,
) -> None:
    formulas(tmp_path)
    one = '[[steps]]\nid = "one"\nformula = { name = "region", vars = { region = "solo" } }\n'
    write_formula(tmp_path, "outer", one)
    work = Work()
    store = memory_store()
    failed = failing_child_creation(store, 1)

    with pytest.raises(StoreError, match="connection to the database was lost"):
        asyncio.run(FormulaRunner(store, work.registry(), search_paths=[tmp_path]).start("outer"))

    assert failed
    (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
    assert root.status == "running"
    assert failed_steps(store, root.id) == []
    result = asyncio.run(FormulaRunner(store, work.registry(), search_paths=[tmp_path]).resume(root.id))
    assert result.status == "completed", result.reason
    assert work.calls == Counter({"solo": 1})


def test_a_store_that_fails_inside_a_parallel_fan_out_stops_every_element_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    formulas(tmp_path)
    work = Work()
    work.held = {"*"}  # the elements made before the failure are still at work when it comes
    store = memory_store()
    failed = failing_child_creation(store, 3)

    async def cut() -> list[asyncio.Task[Any]]:
        with pytest.raises(StoreError, match="connection to the database was lost"):
            await FormulaRunner(store, work.registry(), search_paths=[tmp_path]).start("wide")
        await asyncio.sleep(0.05)
        return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]

    assert asyncio.run(cut()) == []  # no element left running on its own
    assert failed
    assert set(work.calls) == {"regions"}  # no element had finished: the others were stopped at work
    work.held.clear()
    (root,) = [r for r in store.list_runs(kind="formula", limit=100).items if r.parent_run_id is None]
    assert root.status == "running"
    assert failed_steps(store, root.id) == []
    result = asyncio.run(FormulaRunner(store, work.registry(), search_paths=[tmp_path]).resume(root.id))
    assert result.status == "completed", result.reason
    assert len(children(store, root.id)) == WIDE
    assert work.calls == Counter({"regions": 1, "all": 1, **{f"r{i}": 1 for i in range(WIDE)}})


@tool
def one() -> dict[str, Any]:
    """A list of one element."""
    return {"items": ["x"]}


# Each recursion below stands under a condition that always holds: ``check`` lets such a formula run (a
# warning), since a condition on its vars could end it; without one it is an error (test_formula_check.py).
_ALWAYS = """
[vars.go]
default = "yes"
[[steps]]
id = "a"
condition = "vars.go == 'yes'"
"""


@pytest.mark.parametrize("through", ["sub-formula", "fan-out", "each other"])
def test_a_formula_that_runs_itself_stops_at_the_deepest_nesting_and_every_run_ends(
    tmp_path: Path, through: str
) -> None:
    # Before, it nested without end: thousands of runs in seconds, each left running, the store growing.
    if through == "sub-formula":
        write_formula(tmp_path, "again", _ALWAYS + 'formula = { name = "again" }\n')
    elif through == "fan-out":
        fan = 'tool = { name = "one" }\non_complete = { for_each = "output.items", formula = "again" }\n'
        write_formula(tmp_path, "again", _ALWAYS + fan)
    else:
        write_formula(tmp_path, "again", _ALWAYS + 'formula = { name = "other" }\n')
        write_formula(tmp_path, "other", '[[steps]]\nid = "b"\nformula = { name = "again" }\n')
    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([one]), search_paths=[tmp_path])

    result = asyncio.run(runner.start("again"))

    assert result.status == "failed"
    runs = store.list_runs(limit=1000).items
    assert len(runs) == MAX_NESTING
    assert {run.status for run in runs} == {"failed"}
    reasons = [
        event.reason
        for run in runs
        for event in store.events(run.id)
        if isinstance(event, StepStateEvent) and event.status == "failed"
    ]
    assert any(f"nested {MAX_NESTING + 1} runs deep, over the most of {MAX_NESTING}" in r for r in reasons)
