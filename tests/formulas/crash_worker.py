"""A formula run in a child process, for the crash tests: started or resumed, then killed at random.

Each step's tool first checks, in the store, that its step has not completed before (a completed step
that runs again is exactly the failure the crash tests look for) and records that in a marker file.
Usage: ``python crash_worker.py DB start|resume [RUN_ID]``.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
from pathlib import Path
from typing import Any

from plangate.formulas.runtime import FormulaRunner
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool

STEPS = 48


def formula_text() -> str:
    lines = ['formula = "crashy"']
    for i in range(STEPS):
        needs = f'needs = ["s{i - 1}"]' if i % 4 else ""  # twelve chains of four steps, side by side
        lines += [
            "[[steps]]",
            f'id = "s{i}"',
            needs,
            f'tool = {{ name = "slow_step", args = {{ step = "s{i}" }} }}',
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    marker = Path(db).with_suffix(".double")

    @tool
    async def slow_step(step: str) -> dict[str, Any]:
        """Check this step has not completed before, then take a little while."""
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT count(*) FROM events WHERE type = 'step_state' "
                "AND json_extract(payload, '$.step_id') = ? "
                "AND json_extract(payload, '$.status') = 'complete'",
                (step,),
            ).fetchone()
        if rows[0]:
            with marker.open("a") as handle:
                handle.write(f"{step}\n")
        await asyncio.sleep(random.uniform(0.01, 0.05))
        return {"step": step}

    runner = FormulaRunner(open_store(db), ToolRegistry([slow_step]), concurrency=3)
    if mode == "start":
        path = Path(db).with_name("crashy.formula.toml")
        path.write_text(formula_text(), encoding="utf-8")
        result = asyncio.run(runner.start(str(path)))
    else:
        result = asyncio.run(runner.resume(sys.argv[3]))
    print(result.status, flush=True)


if __name__ == "__main__":
    main()
