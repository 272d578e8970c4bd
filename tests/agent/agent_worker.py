"""An agent run in a child process, for the tests that resume with nothing but ids, or kill a write midway.

Usage (STORE: a store URL or a SQLite file): ``python agent_worker.py STORE start`` prints ``RUN_ID
INTERACTION_ID`` of a run waiting for consent; ``python agent_worker.py STORE approve RUN_ID INTERACTION_ID``
approves it in a fresh process and prints the final status and answer. With
``PLANGATE_TEST_HANG=<marker file>`` the write tool writes the marker, then blocks, so that the parent can
kill the process between the write's intent and its receipt.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from plangate.agent import Agent
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool


@tool(effect="write")
def place(task: str, slot: int) -> str:
    """Place a task in a slot."""
    hang = os.environ.get("PLANGATE_TEST_HANG")
    if hang:
        Path(hang).write_text(f"{task}@{slot}", encoding="utf-8")
        time.sleep(120)
    return f"placed {task} at {slot}"


TOOLS = ToolRegistry([place])


def main() -> None:
    db, command = sys.argv[1], sys.argv[2]
    store = open_store(db)
    if command == "start":
        call = {"name": "place", "arguments": {"task": "gym", "slot": 3}}
        model = ScriptedModel([json.dumps({"action": "continue", "tool_call": call})])
        result = Agent(model=model, tools=TOOLS, store=store, mode="react").run("Put the gym in slot 3")
        assert result.interaction is not None
        print(result.run_id, result.interaction.id, flush=True)
        return
    run_id, interaction_id = sys.argv[3], sys.argv[4]
    model = ScriptedModel([json.dumps({"action": "done", "speak": "Placed."}), "The gym is in slot 3."])
    result = Agent(model=model, tools=TOOLS, store=store).resume(run_id, interaction_id, Approve())
    print(result.status, result.answer, flush=True)


if __name__ == "__main__":
    main()
