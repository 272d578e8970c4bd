"""A write that already ran (and failed, or succeeded) is never put to a person again in the same run."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import call, decision, of_type

from plangate.agent import Agent
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, ToolResult, tool


def _failing_place(ran: list[dict[str, object]]) -> ToolRegistry:
    @tool(effect="write")
    def place(task: str, slot: int) -> ToolResult:
        """Place a task in a slot."""
        ran.append({"task": task, "slot": slot})
        return ToolResult.failed("already_placed", f"{task} is already placed")

    return ToolRegistry([place])


def test_an_identical_failed_write_is_corrected_not_asked_and_repeating_it_stalls(tmp_path: Path) -> None:
    ran: list[dict[str, object]] = []
    script = [call("place", task="review", slot=3)] * 3
    store = SQLiteStore(str(tmp_path / "runs.db"))
    first = Agent(model=ScriptedModel(script), tools=_failing_place(ran), store=store, mode="react")
    waiting = first.run("place the review in slot 3")
    assert waiting.interaction is not None and waiting.interaction.kind == "confirm"

    # Approved from another process: a fresh agent, the same store, the model resumed where the run is.
    model = ScriptedModel(script[1:])
    second = Agent(model=model, tools=_failing_place(ran), store=store, mode="react")
    result = second.resume(waiting.run_id, waiting.interaction.id, Approve())

    assert ran == [{"task": "review", "slot": 3}]  # it ran once, and failed
    assert len(store.list_interactions(run_id=waiting.run_id)) == 1  # never asked again
    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "stalled"
    assert "already placed" in result.outcome.user_message
    events = store.events(waiting.run_id)
    corrections = [c for c in of_type(events, "correction") if c.code == "repeated_failure"]
    assert len(corrections) == 1
    assert "already ran in this run and failed (review is already placed)" in corrections[0].message
    assert "already ran in this run and failed" in model.requests[-1].messages[-1].content


def test_other_arguments_after_a_failed_write_are_asked_as_usual() -> None:
    ran: list[dict[str, object]] = []
    script = [call("place", task="review", slot=3), call("place", task="review", slot=4)]
    runner = Agent(
        model=ScriptedModel([*script, decision("done", speak="ok")]),
        tools=_failing_place(ran),
        store=SQLiteStore(":memory:"),
        mode="react",
    )
    waiting = runner.run("place the review")
    assert waiting.interaction is not None
    again = runner.resume(waiting.run_id, waiting.interaction.id, Approve())
    assert again.interaction is not None and again.interaction.tool is not None
    assert again.interaction.tool.arguments == {"task": "review", "slot": 4}


def test_a_write_that_succeeded_is_not_asked_again_nor_counted_twice() -> None:
    ran: list[str] = []

    @tool(effect="write")
    def move(task: str, day: str) -> str:
        """Move a task to a day."""
        ran.append(f"{task} {day}")
        return f"moved {task} to {day}"

    script = [call("move", task="t5", day="mon")] * 3
    store = SQLiteStore(":memory:")
    two_changes = "receipts.count(success and source == 'write_receipt') >= 2"
    runner = Agent(
        model=ScriptedModel(script), tools=[move], store=store, mode="react", done_when=two_changes
    )
    waiting = runner.run("move t5 to monday and t6 to friday")
    assert waiting.interaction is not None
    result = runner.resume(waiting.run_id, waiting.interaction.id, Approve())

    assert ran == ["t5 mon"]  # made once: a repeat is neither asked nor proof of a second change
    assert len(store.list_interactions(run_id=waiting.run_id)) == 1
    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "stalled"
    assert "again after it was done" in result.outcome.user_message
    (correction,) = of_type(store.events(waiting.run_id), "correction")
    assert correction.code == "repeated_write"
    assert "already ran in this run and succeeded (moved t5 to mon)" in correction.message
