"""Only the holder of a run's lease advances it: taken when a runner starts or resumes a run, renewed while
it works, released at the end, and checked by every commit, so two processes never advance one run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import memory_store, write_formula

from plangate.agent import Agent
from plangate.errors import RunLeased
from plangate.events import StatusEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import LeaseBook, Store
from plangate.store.run_lease import holder_is_gone, new_holder
from plangate.tools import ToolRegistry, tool


def slow_tools(entered: asyncio.Event, release: asyncio.Event) -> ToolRegistry:
    @tool
    async def slow() -> dict[str, Any]:
        """Wait until released."""
        entered.set()
        await release.wait()
        return {"done": True}

    return ToolRegistry([slow])


SLOW = """
[[steps]]
id = "slow"
tool = { name = "slow" }
[[steps]]
id = "next"
needs = ["slow"]
tool = { name = "slow" }
"""


def the_run(store: Store) -> str:
    (run,) = store.list_runs(kind="formula").items
    return run.id


def test_a_run_is_leased_while_it_works_renewed_and_released_at_the_end(tmp_path: Path) -> None:
    store = memory_store()
    source = write_formula(tmp_path, "slow", SLOW)

    async def scenario() -> tuple[float, float, str | None]:
        entered, release = asyncio.Event(), asyncio.Event()
        runner = FormulaRunner(store, slow_tools(entered, release), lease_ttl=0.3)
        task = asyncio.ensure_future(runner.start(source))
        await entered.wait()
        run = store.get_run(the_run(store))
        assert run.lease_owner == runner.leases.holder
        first = run.lease_expires_at
        await asyncio.sleep(0.5)  # past the first expiry: only renewal keeps it
        later = store.get_run(run.id)
        with pytest.raises(RunLeased, match="is being advanced by another process"):
            LeaseBook(store).take(run.id)
        release.set()
        await task
        assert first is not None and later.lease_expires_at is not None
        return first, later.lease_expires_at, later.lease_owner

    first, later, owner = asyncio.run(scenario())

    assert later > first
    assert owner is not None
    assert store.get_run(the_run(store)).lease_owner is None


def test_a_runner_that_lost_its_lease_commits_nothing_more(tmp_path: Path) -> None:
    store = memory_store()
    source = write_formula(tmp_path, "slow", SLOW)

    async def scenario() -> None:
        entered, release = asyncio.Event(), asyncio.Event()
        runner = FormulaRunner(store, slow_tools(entered, release))
        task = asyncio.ensure_future(runner.start(source))
        await entered.wait()
        run_id = the_run(store)
        # as if it froze past its lease's expiry and another process took the run over
        store.release_lease(run_id, runner.leases.holder)
        LeaseBook(store).take(run_id)
        seq = store.last_seq(run_id)
        release.set()
        with pytest.raises(RunLeased, match="lost the run's lease"):
            await task
        assert store.last_seq(run_id) == seq

    asyncio.run(scenario())


def test_one_run_is_advanced_by_one_runner_at_a_time(tmp_path: Path) -> None:
    store = memory_store()
    source = write_formula(tmp_path, "slow", SLOW)

    async def scenario() -> None:
        entered, release = asyncio.Event(), asyncio.Event()
        tools = slow_tools(entered, release)
        runner = FormulaRunner(store, tools)
        task = asyncio.ensure_future(runner.start(source))
        await entered.wait()
        run_id = the_run(store)
        with pytest.raises(RunLeased):
            await FormulaRunner(store, tools).resume(run_id)  # another runner (another holder)
        with pytest.raises(RunLeased, match="already"):
            await runner.resume(run_id)  # the same runner, twice
        release.set()
        assert (await task).status == "completed"

    asyncio.run(scenario())


def test_only_a_holder_of_this_machine_whose_process_is_gone_counts_as_gone() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    host, _pid, boot, token = new_holder().rsplit(":", 3)

    assert holder_is_gone(f"{host}:{finished.stdout.strip()}:{boot}:{token}")
    assert not holder_is_gone(new_holder())  # this process
    assert not holder_is_gone(f"another-host:{finished.stdout.strip()}:{boot}:{token}")
    assert not holder_is_gone(f"{host}:{finished.stdout.strip()}:another-boot:{token}")
    assert not holder_is_gone("a-worker-name")
    assert not holder_is_gone(f"{host}:not-a-pid:{boot}:{token}")


def test_a_runner_frozen_past_its_lease_commits_nothing_even_when_the_lease_is_free_again(
    tmp_path: Path,
) -> None:
    # Frozen (its event loop blocked) past the lease's expiry; meanwhile another holder took the run,
    # committed, and released it. The frozen runner must not take the lease again and go on from its stale
    # memory: its commits are fenced by the generation it held.
    store = memory_store()
    source = write_formula(tmp_path, "slow", SLOW)

    async def scenario() -> None:
        entered, release = asyncio.Event(), asyncio.Event()
        runner = FormulaRunner(store, slow_tools(entered, release), lease_ttl=0.3)
        task = asyncio.ensure_future(runner.start(source))
        await entered.wait()
        run_id = the_run(store)
        time.sleep(0.5)  # noqa: ASYNC251 (frozen on purpose: no renewal runs while the loop is blocked)
        taken = store.take_lease(run_id, "another-holder", 30)
        assert taken is not None
        with store.transaction(run_id, fence=taken) as tx:
            tx.append(StatusEvent(stage="run", code="taken_over", text="another holder"))
        store.release_lease(run_id, "another-holder")
        seq = store.last_seq(run_id)
        release.set()
        with pytest.raises(RunLeased, match="lost the run's lease"):
            await task
        assert store.last_seq(run_id) == seq

    asyncio.run(scenario())


def test_an_agent_run_whose_lease_was_taken_commits_and_writes_nothing_more() -> None:
    store = memory_store()
    calls: list[str] = []

    @tool(effect="write")
    def place(task: str) -> str:
        """Place a task."""
        calls.append(task)
        return f"placed {task}"

    script = [json.dumps({"action": "confirm", "tool_call": {"name": "place", "arguments": {"task": "gym"}}})]
    book = LeaseBook(store)
    agent = Agent(model=ScriptedModel(script), tools=[place], store=store, mode="react", leases=book)
    waiting = agent.run("place the gym")
    assert waiting.interaction is not None
    interaction_id = waiting.interaction.id

    async def scenario() -> None:
        async with book.kept(waiting.run_id):
            # as if this process froze and another took the run over
            store.release_lease(waiting.run_id, book.holder)
            LeaseBook(store).take(waiting.run_id)
            seq = store.last_seq(waiting.run_id)
            with pytest.raises(RunLeased, match="lost the run's lease"):
                await agent.resume_async(waiting.run_id, interaction_id, Approve())
            assert store.last_seq(waiting.run_id) == seq

    asyncio.run(scenario())
    assert calls == []
    assert store.get_interaction(interaction_id).status == "open"


def test_a_run_created_with_its_lease_is_taken_as_any_other_once_that_lease_is_old(tmp_path: Path) -> None:
    # LeaseBook.create_run holds the new run's lease from its creation, and its first take asks the store
    # nothing; a take that comes later (a stream begun late) takes the lease again from the store, where the
    # one the run was created with may have lapsed: committing with it would be refused.
    store = memory_store()
    book = LeaseBook(store, ttl=0.3)
    fresh = book.create_run("formula", "f", {})
    book.take(fresh.id)
    assert book.fence(fresh.id).generation == 1
    book.give_back(fresh.id)

    late = book.create_run("formula", "f", {})
    time.sleep(0.4)  # past its ttl: lapsed in the store
    book.take(late.id)
    with book.transaction(late.id) as tx:
        tx.append(StatusEvent(stage="run", code="started", text="late, but started"))
    assert book.fence(late.id).generation == 2
    book.give_back(late.id)
    assert store.get_lease(late.id) is None
