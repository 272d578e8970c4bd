"""Forks made in a child process, for the test that kills it with SIGKILL at random moments.

Usage: ``python fork_worker.py STORE LOG origin`` prints the id of a finished run (round 1 looks up, round 2
places, approved; round 3 is done); ``python fork_worker.py STORE LOG forks ORIGIN COUNT`` forks it before
round 2 ``COUNT`` times, each fork writing without asking (``always_execute``), printing each fork's id as it
starts. The write tool appends ``<idempotency key>`` to the LOG file before it returns, so the parent counts
the writes that happened, whatever was committed.
"""

from __future__ import annotations

import json
import os
import sys

from plangate.agent import Agent
from plangate.agent._fork import ForkRequest
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import open_store
from plangate.tools import ToolRegistry, current_call, tool

LOG = sys.argv[2] if len(sys.argv) > 2 else ""


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@tool(effect="write")
def place(task: str, slot: int) -> str:
    """Place a task in a slot (each call is logged, by its key, before it returns)."""
    context = current_call()
    key = context.idempotency_key if context is not None else None
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{key}\n")
        log.flush()
        os.fsync(log.fileno())
    return f"placed {task} at {slot}"


TOOLS = ToolRegistry([lookup, place])


def _call(name: str, **arguments: object) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


def main() -> None:
    store = open_store(sys.argv[1])
    if sys.argv[3] == "origin":
        script = [_call("lookup", query="slots"), _call("place", task="gym", slot=9)]
        script += [json.dumps({"action": "done"}), "Placed."]
        runner = Agent(model=ScriptedModel(script), tools=TOOLS, store=store, mode="react")
        result = runner.run("Put the gym in a slot")
        while result.interaction is not None:
            result = runner.resume(result.run_id, result.interaction.id, Approve())
        print(result.run_id, flush=True)
        return
    origin, count = sys.argv[4], int(sys.argv[5])
    for _ in range(count):
        model = ScriptedModel([_call("place", task="gym", slot=10), json.dumps({"action": "done"}), "Done."])
        forker = Agent(model=model, tools=TOOLS, store=store)
        fork_id = forker.submit_fork(origin, ForkRequest(at_round=2, always_execute=True))
        print(fork_id, flush=True)
        forker.resume(fork_id)


if __name__ == "__main__":
    main()
