"""A run is advanced only with the tools it was started with: a server whose tool of the same name is another
function (or that lacks one) never advances a run another process left unfinished — it leaves it waiting with
the reason, visible to its owner, says so in its one recovery line, and a process with the run's own tools
continues it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import wait_until

from plangate.agent import Agent
from plangate.events import StatusEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.models import ScriptedModel
from plangate.store import Store
from plangate.tools import ToolRegistry, tool

placed: list[str] = []


@tool(name="place")
def place_in_the_calendar(task: str) -> str:
    """Put a task in the calendar (the command line's tool)."""
    placed.append(f"calendar:{task}")
    return f"placed {task}"


@tool(name="place")
def place_an_order(task: str) -> str:
    """Place an order (the server's own tool of that name: another function)."""
    placed.append(f"order:{task}")
    return f"ordered {task}"


FORMULA = """
formula = "plan"

[[steps]]
id = "put"
tool = { name = "place", args = { task = "review" } }
"""


def _left_running(store: Store, tmp_path: Path) -> str:
    """A formula run a command-line process stored and was killed before it advanced."""
    (tmp_path / "plan.formula.toml").write_text(FORMULA)
    runner = FormulaRunner(store, ToolRegistry([place_in_the_calendar]))
    run_id = runner.submit(tmp_path / "plan.formula.toml")
    with store.transaction(run_id) as tx:
        tx.set_status("running")
    return run_id


def test_a_server_with_another_tool_of_that_name_leaves_the_run_waiting_with_the_reason(
    make_app: Callable[..., FastAPI], store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    placed.clear()
    run_id = _left_running(store, tmp_path)

    with caplog.at_level(logging.INFO, logger="plangate.runs"), TestClient(
        make_app(auth=False, tools=ToolRegistry([place_an_order]))
    ) as client:
        wait_until(lambda: store.get_run(run_id).status == "waiting", what="the run to be left waiting")
        shown = client.get(f"/v1/runs/{run_id}").json()

    assert placed == []  # the server's own place never ran for it
    last = store.events(run_id)[-1]
    assert isinstance(last, StatusEvent) and last.code == "tools_differ"
    assert "its tool 'place' is test_server_tool_identity:place_in_the_calendar" in last.text
    assert "this process's is test_server_tool_identity:place_an_order" in last.text
    assert shown["run"]["status"] == "waiting"
    line = next(r.getMessage() for r in caplog.records if r.name == "plangate.runs")
    assert "left 1 waiting for their own tools" in line and run_id in line

    done = asyncio.run(FormulaRunner(store, ToolRegistry([place_in_the_calendar])).resume(run_id))
    assert done.status == "completed", done.reason
    assert placed == ["calendar:review"]


def test_an_agent_run_is_not_advanced_with_another_tool_of_that_name(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    placed.clear()
    model = ScriptedModel(['{"action": "done", "speak": "Nothing to do."}', "Nothing to do."])
    agent = Agent(model=model, tools=[place_in_the_calendar], store=store, mode="react")
    run_id = agent.submit("Place the review")
    with store.transaction(run_id) as tx:
        tx.set_status("running")

    with TestClient(make_app(auth=False, tools=ToolRegistry([place_an_order]), model=model)):
        wait_until(lambda: store.get_run(run_id).status == "waiting", what="the agent run to be left waiting")

    last = store.events(run_id)[-1]
    assert isinstance(last, StatusEvent) and last.code == "tools_differ"
    assert store.get_run(run_id).outcome is None and placed == []
