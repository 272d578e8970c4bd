"""Retries made in a child process, for the test that kills it with SIGKILL at random moments.

Usage: ``python retry_worker.py STORE FOLDER origin`` prints the id of a finished run of the ``ship``
formula in FOLDER (fetch, then build, then publish: a write, run without asking: ``--yes``);
``python retry_worker.py STORE FOLDER retries ORIGIN COUNT`` retries it from ``build`` ``COUNT`` times,
printing each retry's id as it is stored, then advancing it (build and publish run again; the write without
asking, as the origin ran). The write tool appends its idempotency key to the file ``$RETRY_WRITES_LOG``
names before it returns (in the test's process too), so the parent counts the writes that happened,
whatever was committed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from plangate.formulas.retry import retry_run
from plangate.formulas.runtime import FormulaRunner
from plangate.store import open_store
from plangate.tools import ToolRegistry, current_call, tool

SHIP = """formula = "ship"
[[steps]]
id = "fetch"
tool = { name = "fetch", args = {} }

[[steps]]
id = "build"
needs = ["fetch"]
tool = { name = "build", args = {} }

[[steps]]
id = "publish"
needs = ["build"]
tool = { name = "publish", args = { artifact = "{{steps.build.output.artifact}}" } }
"""


@tool
def fetch() -> dict[str, Any]:
    """Fetch the sources."""
    return {"sources": "src"}


@tool
async def build() -> dict[str, Any]:
    """Build the artifact (a moment's work)."""
    await asyncio.sleep(0.01)
    return {"artifact": "app.tar.gz"}


@tool(effect="write")
def publish(artifact: str) -> dict[str, Any]:
    """Publish the artifact (each call is logged, by its key, before it returns)."""
    context = current_call()
    key = context.idempotency_key if context is not None else None
    with open(os.environ["RETRY_WRITES_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{key}\n")
        log.flush()
        os.fsync(log.fileno())
    return {"url": f"https://example.invalid/{artifact}"}


TOOLS = ToolRegistry([fetch, build, publish])


def main() -> None:
    store = open_store(sys.argv[1])
    runner = FormulaRunner(store, TOOLS, search_paths=[sys.argv[2]])
    if sys.argv[3] == "origin":
        result = asyncio.run(runner.start("ship", always_execute=True))
        print(result.run_id, flush=True)
        return
    origin, count = sys.argv[4], int(sys.argv[5])
    for _ in range(count):
        retried = retry_run(runner, origin, "build")
        print(retried, flush=True)
        asyncio.run(runner.resume(retried))


if __name__ == "__main__":
    main()
