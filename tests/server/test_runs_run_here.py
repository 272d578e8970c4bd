"""Runs.run_here: a turn's task under the run id its preparation chose, answered once the store has that run,
and a turn that fails before storing it raises to the caller (nothing is adopted)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plangate.engines import build
from plangate.errors import ConfigError, RunError
from plangate.runs import Runs
from plangate.store import Store, open_store


def supervisor(store: Store) -> Runs:
    return Runs(store, build(store).registry)


def test_the_id_comes_back_once_the_run_is_stored_and_the_turn_goes_on(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plangate.db'}")
    finish = asyncio.Event()

    async def turn() -> None:
        await asyncio.sleep(0.05)  # the caller waits through this: the run is not stored yet
        await asyncio.to_thread(store.create_run, "ask", "q", {}, run_id="run_turn")
        with store.transaction("run_turn") as tx:
            tx.set_status("running")
        await finish.wait()
        with store.transaction("run_turn") as tx:
            tx.set_status("completed")

    async def scenario() -> None:
        runs = supervisor(store)
        run_id = await asyncio.wait_for(runs.run_here("run_turn", turn()), timeout=10)
        assert run_id == "run_turn"
        assert store.get_run(run_id).status == "running"
        assert runs.active(run_id)
        finish.set()
        await asyncio.wait_for(runs.wait_idle(run_id), timeout=10)

    asyncio.run(scenario())
    assert store.get_run("run_turn").status == "completed"
    store.close()


def test_a_turn_that_fails_before_its_run_is_stored_raises_to_the_caller(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plangate.db'}")

    async def turn() -> None:
        raise ConfigError("run_turn: the prepared turn has no model")

    async def scenario() -> None:
        runs = supervisor(store)
        with pytest.raises(ConfigError, match="has no model"):
            await asyncio.wait_for(runs.run_here("run_turn", turn()), timeout=10)
        assert not runs.local.active("run_turn")  # nothing adopted: no run of that id to answer for

    asyncio.run(scenario())
    assert store.list_runs().items == []
    store.close()


def test_a_turn_that_ends_without_storing_its_run_is_a_run_error(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plangate.db'}")

    async def turn() -> None:
        return None

    async def scenario() -> None:
        with pytest.raises(RunError, match="its work ended before the run was stored"):
            await asyncio.wait_for(supervisor(store).run_here("run_turn", turn()), timeout=10)

    asyncio.run(scenario())
    store.close()
