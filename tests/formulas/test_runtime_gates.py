"""A held gate is looked at again when a step its condition reads moves on — by name, through an aggregate
over the steps below a parent, or over every step — and, when it reads what no step changes (a file), now and
then while work runs; steps whose work ends together commit in one transaction."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime_helpers import Calls, make_tools, memory_store, write_formula

from plangate.events import Event, GateEvent, StepStateEvent
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.store import Commit
from plangate.tools import ToolRegistry, tool


def run(tmp_path: Path, name: str, tools: ToolRegistry | None = None, **options: Any) -> FormulaResult:
    runner = FormulaRunner(memory_store(), tools or make_tools(Calls()), search_paths=[tmp_path], **options)
    return asyncio.run(runner.start(name))


def gate_events(result: FormulaResult, runner_store: Any) -> list[GateEvent]:
    return [e for e in runner_store.events(result.run_id) if isinstance(e, GateEvent)]


def test_a_gate_opens_when_a_step_it_names_moves_on_without_ending(tmp_path: Path) -> None:
    # ``announce`` is looked at first (``sign`` is pending); ``sign`` then waits for someone and nothing
    # ends: the gate must be looked at again because ``sign`` moved on, not only when a step ends
    write_formula(
        tmp_path,
        "announced",
        """
        [[steps]]
        id = "announce"
        gate = { condition = "sign.status == 'waiting'" }
        tool = { name = "work", args = { name = "announce" } }
        [[steps]]
        id = "sign"
        """,
    )
    result = run(tmp_path, "announced", poll_interval=60)

    assert result.status == "waiting"
    assert result.steps["announce"].status == "complete", result.steps["announce"].reason
    assert result.steps["sign"].status == "waiting"


def test_a_gate_over_a_parents_children_opens_when_one_of_them_completes(tmp_path: Path) -> None:
    # ``checks`` itself does not move (it runs until ``sign`` is done): only its child ``lint`` does
    write_formula(
        tmp_path,
        "any-check",
        """
        [[steps]]
        id = "after"
        gate = { condition = "children(checks).any(status == 'complete')" }
        tool = { name = "work", args = { name = "after" } }
        [[steps]]
        id = "checks"
        [[steps.children]]
        id = "lint"
        tool = { name = "work", args = { name = "lint" } }
        [[steps.children]]
        id = "sign"
        """,
    )
    result = run(tmp_path, "any-check", poll_interval=60)

    assert result.steps["after"].status == "complete", result.steps["after"].reason
    assert result.steps["lint"].status == "complete"
    assert result.steps["checks"].status == "running"
    assert result.status == "waiting"


def test_a_gate_over_descendants_opens_when_a_grandchild_completes(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "deep",
        """
        [[steps]]
        id = "after"
        gate = { condition = "descendants(top).count(status == 'complete') >= 1" }
        tool = { name = "work", args = { name = "after" } }
        [[steps]]
        id = "top"
        [[steps.children]]
        id = "mid"
        [[steps.children.children]]
        id = "leaf"
        tool = { name = "work", args = { name = "leaf" } }
        [[steps.children.children]]
        id = "sign"
        """,
    )
    result = run(tmp_path, "deep", poll_interval=60)

    assert result.steps["after"].status == "complete", result.steps["after"].reason
    assert (result.steps["top"].status, result.steps["mid"].status) == ("running", "running")


def test_a_gate_over_every_step_opens_when_any_step_it_does_not_name_completes(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "counted",
        """
        [[steps]]
        id = "after"
        gate = { condition = "steps.complete >= 1 and steps.count(status == 'waiting') >= 1" }
        tool = { name = "work", args = { name = "after" } }
        [[steps]]
        id = "first"
        tool = { name = "work", args = { name = "first" } }
        [[steps]]
        id = "sign"
        """,
    )
    result = run(tmp_path, "counted", poll_interval=60)

    assert result.steps["after"].status == "complete", result.steps["after"].reason


def test_a_held_gate_records_each_new_reason_once(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "watched",
        """
        [[steps]]
        id = "guarded"
        gate = { condition = "slow.output.name == 'slow'" }
        tool = { name = "work", args = { name = "guarded" } }
        [[steps]]
        id = "slow"
        tool = { name = "work", args = { name = "slow", delay = 0.05 } }
        [[steps]]
        id = "other"
        tool = { name = "work", args = { name = "other" } }
        """,
    )
    runner = FormulaRunner(memory_store(), make_tools(Calls()), search_paths=[tmp_path], poll_interval=60)
    result = asyncio.run(runner.start("watched"))

    assert result.status == "completed"
    gates = gate_events(result, runner.store)
    # ``other`` completing does not concern the gate; ``slow`` completing opens it
    assert [g.satisfied for g in gates] == [False, True]
    assert len({g.reason for g in gates}) == 2


def test_a_gate_on_a_file_is_looked_at_again_while_work_runs(tmp_path: Path) -> None:
    # ``make`` writes the file, then waits until ``use`` ran: only a poll of the gate can let ``use`` start
    released = asyncio.Event()

    @tool
    async def make() -> dict[str, Any]:
        """Write the file, then wait for the step that needs it."""
        (tmp_path / "ready.txt").write_text("ready")
        try:
            await asyncio.wait_for(released.wait(), 20)
        except TimeoutError:
            return {"released": False}
        return {"released": True}

    @tool
    def use() -> dict[str, Any]:
        """Use the file."""
        released.set()
        return {"used": True}

    write_formula(
        tmp_path,
        "polled",
        """
        [[steps]]
        id = "use"
        gate = { condition = "file.exists('ready.txt')" }
        tool = { name = "use" }
        [[steps]]
        id = "make"
        tool = { name = "make" }
        """,
    )
    result = run(tmp_path, "polled", ToolRegistry([make, use]), poll_interval=0.05, root=tmp_path)

    assert result.status == "completed", result.reason
    assert result.steps["make"].output == {"released": True}


def test_steps_whose_work_ends_together_commit_in_one_transaction(tmp_path: Path) -> None:
    entered = 0
    all_in = asyncio.Event()

    @tool
    async def together(i: int) -> dict[str, Any]:
        """Wait until every step has started, then end at once."""
        nonlocal entered
        entered += 1
        if entered == 4:
            all_in.set()
        await all_in.wait()
        return {"i": i}

    steps = "".join(
        f'\n[[steps]]\nid = "s{i}"\ntool = {{ name = "together", args = {{ i = {i} }} }}\n' for i in range(4)
    )
    write_formula(tmp_path, "together", steps)
    store = memory_store()
    commits: list[Commit] = []
    store.subscribe(commits.append)
    runner = FormulaRunner(store, ToolRegistry([together]), search_paths=[tmp_path], concurrency=4)
    result = asyncio.run(runner.start("together"))

    assert result.status == "completed"

    def completed(events: tuple[Event, ...]) -> list[str]:
        return [e.step_id for e in events if isinstance(e, StepStateEvent) and e.status == "complete"]

    ends = [completed(c.events) for c in commits if completed(c.events)]
    assert ends == [["s0", "s1", "s2", "s3"]]
