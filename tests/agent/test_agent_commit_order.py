"""The durability promise of a write, observed: its intent is committed before the tool runs, its receipt
after (SPEC §6).

The write tool looks at the store through a connection of its own, which sees only what was committed, at
the moment it is called; the commits the store announced (after each commit) are logged beside the calls.
"""

from __future__ import annotations

from pathlib import Path

from agent_helpers import call, decision

from plangate.agent import Agent
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import Commit, SQLiteStore, WriteIntent
from plangate.tools import ToolRegistry, current_call, tool


def test_a_write_runs_only_once_its_intent_is_committed_and_its_receipt_follows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    reader = SQLiteStore(path)  # only what was committed is visible to it
    log: list[str] = []
    seen: list[WriteIntent | None] = []

    def heard(commit: Commit) -> None:
        log.append(f"commit {' '.join(event.type for event in commit.events)}")

    store.subscribe(heard)

    @tool(effect="write")
    def place(task: str) -> str:
        """Place a task."""
        context = current_call()
        assert context is not None and context.idempotency_key is not None
        seen.append(reader.get_write_intent(context.idempotency_key))
        log.append("call place")
        return f"placed {task}"

    model = ScriptedModel([call("place", task="t1"), decision("done", speak="Placed.")])
    agent = Agent(model=model, tools=ToolRegistry([place]), store=store, mode="react")
    result = agent.run("Place t1.")
    assert result.interaction is not None and result.interaction.kind == "confirm"
    result = agent.resume(result.run_id, result.interaction.id, Approve())

    [intent] = seen  # what the store held when the tool was called
    assert intent is not None and intent.run_id == result.run_id and intent.status == "intent"
    assert result.status == "completed"
    done = store.get_write_intent(intent.key)
    assert done is not None and done.status == "done"  # the receipt, committed after the call
    receipts = [r for r in store.receipts(result.run_id) if r.source == "write_receipt"]
    assert [r.name for r in receipts] == ["place"]
    # the answer's commit (with the intent) came before the call; the result's commit after it
    called = log.index("call place")
    assert any(entry.startswith("commit interaction_resolved") for entry in log[:called]), log
    assert any("tool_result" in entry for entry in log[called:]), log
