"""A process that runs one copilot turn and hangs in its answer step, for the crash test to kill.

Usage: python turn_worker.py STORE_PATH DATA_PATH MARKER_PATH. Prints the ask run's id first, then writes the
marker once the formula run is in its answer step, and sleeps there until it is killed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from copilot_helpers import DONE, answer_step, lines, query_step

from plangate.copilot import Copilot
from plangate.models import ModelRequest, ScriptedModel
from plangate.store import SQLiteStore

OPS = lines(query_step("q", "shop", "SELECT count(*) AS n FROM orders"), answer_step("q"), DONE)


def main() -> None:
    store_path, data_path, marker = sys.argv[1:4]

    def respond(request: ModelRequest) -> str:
        if request.purpose == "copilot":
            return OPS
        Path(marker).write_text("answering", encoding="utf-8")
        time.sleep(120)  # the parent kills the process here
        return "never"

    copilot = Copilot(model=ScriptedModel(respond), store=SQLiteStore(store_path))
    stream = copilot.stream("How many orders are there?", data_path)
    print(stream.run_id, flush=True)

    async def follow() -> None:
        async for _ in stream:
            pass

    asyncio.run(follow())


if __name__ == "__main__":
    main()
