"""An agent run with a token budget, advanced by two processes, for the test that counts usage once.

Usage (STORE: a store URL): ``python usage_worker.py STORE start MAX_TOKENS`` starts a run (``MAX_TOKENS`` 0:
no budget) that asks for consent to a write and prints ``RUN_ID INTERACTION_ID``; ``python usage_worker.py
STORE approve RUN_ID INTERACTION_ID`` approves it in a fresh process that passes no budget of its own, and
prints the run's end and the model calls this process made as JSON.
"""

from __future__ import annotations

import json
import sys

from plangate.agent import Agent
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool


@tool(effect="write")
def place(task: str, slot: int) -> str:
    """Place a task in a slot."""
    return f"placed {task} at {slot}"


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


TOOLS = ToolRegistry([place, lookup])


def _call(name: str, **arguments: object) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


def main() -> None:
    store = open_store(sys.argv[1])
    if sys.argv[2] == "start":
        limit = int(sys.argv[3]) or None
        model = ScriptedModel([_call("place", task="gym", slot=3)])
        agent = Agent(model=model, tools=TOOLS, store=store, mode="react", max_tokens=limit)
        result = agent.run("Put the gym in slot 3")
        assert result.interaction is not None
        print(result.run_id, result.interaction.id, flush=True)
        return
    run_id, interaction_id = sys.argv[3], sys.argv[4]
    model = ScriptedModel(
        [_call("lookup", query="the week"), json.dumps({"action": "done", "speak": "Done."})]
    )
    result = Agent(model=model, tools=TOOLS, store=store).resume(run_id, interaction_id, Approve())
    outcome = None if result.outcome is None else result.outcome.stored()
    print(json.dumps({"status": result.status, "outcome": outcome, "calls": len(model.requests)}), flush=True)


if __name__ == "__main__":
    main()
