"""One write protocol for every engine: a consented write that was cut off before its intent was committed
(so its call never started) starts once when its run is advanced next — a formula step and an agent round
alike — and the same decision tree settles the others (``plangate.runs.writes``)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from plangate.agent import Agent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.runs import writes
from plangate.store import LeaseBook, SQLiteStore
from plangate.tools import ToolRegistry, ToolResult, current_call, tool

PUBLISH = """
formula = "publish"

[[steps]]
id = "publish"
consent = "auto"
tool = { name = "publish", args = { artifact = "app.tgz" } }
"""


class Publisher:
    """A write tool that counts, from inside the tool, every call it really made."""

    def __init__(self) -> None:
        self.calls: list[str | None] = []  # the idempotency key of each call

    def registry(self) -> ToolRegistry:
        publisher = self

        @tool(effect="write")
        def publish(artifact: str) -> str:
            """Publish an artifact."""
            call = current_call()
            publisher.calls.append(call.idempotency_key if call is not None else None)
            return f"published {artifact}"

        return ToolRegistry([publish])


def _delete_intents(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        db.execute("DELETE FROM write_intents")
        db.commit()


def test_a_formula_write_step_cut_off_before_its_intent_starts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "publish.formula.toml").write_text(PUBLISH)
    store = SQLiteStore(tmp_path / "runs.db")
    publisher = Publisher()

    async def cut_off() -> str:
        # The process stops after the step's running state committed and before the call: the lease is
        # confirmed right before every write, and here that confirmation never returns.
        entered = asyncio.Event()

        async def never(self: LeaseBook, run_id: str) -> None:
            entered.set()
            await asyncio.Event().wait()

        monkeypatch.setattr(LeaseBook, "confirm_async", never)
        runner = FormulaRunner(store, publisher.registry())
        task = asyncio.ensure_future(runner.start(tmp_path / "publish.formula.toml"))
        await asyncio.wait_for(entered.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        monkeypatch.undo()
        (run,) = store.list_runs(kind="formula").items
        return run.id

    run_id = asyncio.run(cut_off())
    assert publisher.calls == []
    _delete_intents(tmp_path / "runs.db")  # what a store holds when the intent never committed

    done = asyncio.run(FormulaRunner(store, publisher.registry()).resume(run_id))

    assert done.status == "completed", done.reason
    assert len(publisher.calls) == 1  # started once: its consent ("auto") stands
    (intent,) = [store.get_write_intent(key) for key in publisher.calls if key is not None]
    assert intent is not None and intent.status == "done"
    store.close()


def test_an_agent_write_approved_where_the_run_is_not_advanced_starts_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    publisher = Publisher()
    model = ScriptedModel(
        [
            json.dumps(
                {"action": "continue", "tool_call": {"name": "publish", "arguments": {"artifact": "a"}}}
            ),
            json.dumps({"action": "done", "speak": "Published."}),
            "Published.",
        ]
    )
    agent = Agent(model=model, tools=publisher.registry(), store=store, mode="react", leases=LeaseBook(store))
    waiting = agent.run("Publish a")
    assert waiting.interaction is not None
    # Committed here, acted on nowhere (a server handing the run to workers): its intent is not committed.
    agent.resolve(waiting.run_id, waiting.interaction.id, Approve(), by="ana")
    assert publisher.calls == [] and store.pending_write_intents(waiting.run_id) == []

    later = Agent(model=model, tools=publisher.registry(), store=store, leases=LeaseBook(store))
    done = later.resume(waiting.run_id)

    assert done.status == "completed", done.outcome
    assert publisher.calls == [waiting.interaction.id]  # once, under the consent's key
    intent = store.get_write_intent(waiting.interaction.id)
    assert intent is not None and intent.status == "done"
    store.close()


@pytest.mark.parametrize(
    ("reconcile", "idempotent", "expected"),
    [
        ("found", None, "settled"),
        ("none", None, "ran"),
        ("raises", None, "unknown"),
        ("absent", True, "ran"),
        ("absent", None, "unknown"),
    ],
)
def test_an_open_intent_is_settled_by_the_one_decision_tree(
    tmp_path: Path, reconcile: str, idempotent: bool | None, expected: str
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    run = store.create_run("agent", "x", {})
    with store.transaction(run.id) as tx:
        tx.record_write_intent("k1", "publish", "sha256:x")
    ran: list[str] = []

    def reconciler(key: str) -> ToolResult | None:
        if reconcile == "raises":
            raise RuntimeError("no answer")
        return ToolResult.done("it happened") if reconcile == "found" else None

    @tool(effect="write", reconcile=None if reconcile == "absent" else reconciler, idempotent=idempotent)
    def publish(artifact: str) -> str:
        """Publish an artifact."""
        ran.append(artifact)
        return "published"

    async def never_started() -> None:
        raise AssertionError("an intent exists: the call must not start as new")

    call = writes.WriteCall("publish", {"artifact": "a"}, "k1")
    outcome = asyncio.run(writes.recover(store, ToolRegistry([publish]), call, never_started))

    found: dict[str, Any] = {
        "settled": isinstance(outcome, writes.Settled) and ran == [],
        "ran": isinstance(outcome, writes.Settled) and ran == ["a"],
        "unknown": isinstance(outcome, writes.Unknown) and ran == [],
    }
    assert found[expected], outcome
    store.close()
