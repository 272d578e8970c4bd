"""A formula with a loop, a 6-wide fan-out and write steps, run in a child process that the test kills.

The formula: a 4-iteration loop, then a step that fans out to six ``region`` sub-runs (each: a slow step, a
write, a slow step), then a write after every sub-run. Every slow step first checks, in the store, that it
has not completed before (a completed step that runs again is the failure the test looks for) and records
that in a marker file. The write tool records every call it really makes in a table of its own
(``effects.db``: one row per execution, keyed by its idempotency key) and answers ``reconcile`` from it, as
a service with idempotency keys would. Usage: ``python crash_fanout_worker.py DB start|resume [RUN_ID]``.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from plangate.formulas.runtime import FormulaRunner
from plangate.store import open_store
from plangate.tools import ToolRegistry, ToolResult, current_call, tool

WIDE = 6
LOOP = 4

ROOT = """
formula = "deploy-all"

[[steps]]
id = "warmup"
[steps.loop]
count = LOOP
var = "i"
[[steps.loop.body]]
id = "tick"
tool = { name = "slow_step", args = { step = "tick-{{i}}" } }

[[steps]]
id = "regions"
needs = ["warmup"]
tool = { name = "regions" }
[steps.on_complete]
for_each = "output.regions"
formula = "region"
vars = { region = "{item}" }
parallel = true

[[steps]]
id = "publish"
needs = ["regions"]
waits_for = "children-of(regions)"
consent = "auto"
tool = { name = "publish", args = { what = "release" } }
""".replace("LOOP", str(LOOP))

REGION = """
formula = "region"

[vars.region]
required = true

[[steps]]
id = "deploy"
tool = { name = "slow_step", args = { step = "deploy-{{region}}" } }

[[steps]]
id = "record"
needs = ["deploy"]
consent = "auto"
tool = { name = "publish", args = { what = "{{region}}" } }

[[steps]]
id = "check"
needs = ["record"]
tool = { name = "slow_step", args = { step = "check-{{region}}" } }
"""


def effects(db: str) -> sqlite3.Connection:
    conn = sqlite3.connect(Path(db).with_name("effects.db"), timeout=30)
    conn.execute("CREATE TABLE IF NOT EXISTS executions (key TEXT, what TEXT, at REAL)")
    return conn


def tools(db: str) -> ToolRegistry:
    marker = Path(db).with_suffix(".rerun")

    @tool
    async def slow_step(step: str) -> dict[str, Any]:
        """Check this step never completed before, then take a little while."""
        with sqlite3.connect(db, timeout=30) as conn:
            (done,) = conn.execute(
                "SELECT count(*) FROM events WHERE type = 'step_state' "
                "AND json_extract(payload, '$.status') = 'complete' "
                "AND json_extract(payload, '$.output.step') = ?",
                (step,),
            ).fetchone()
        if done:
            with marker.open("a") as handle:
                handle.write(f"{step}\n")
        await asyncio.sleep(random.uniform(0.01, 0.04))
        return {"step": step}

    @tool
    def regions() -> dict[str, Any]:
        """The regions to deploy to."""
        return {"regions": [f"r{i}" for i in range(WIDE)]}

    def reconcile(key: str) -> ToolResult | None:
        with effects(db) as conn:
            row = conn.execute("SELECT what FROM executions WHERE key = ?", (key,)).fetchone()
        return None if row is None else ToolResult.done(f"published {row[0]}", data={"what": row[0]})

    @tool(effect="write", reconcile=reconcile)
    def publish(what: str) -> dict[str, Any]:
        """Publish something: one row per real execution, under the call's idempotency key."""
        call = current_call()
        key = call.idempotency_key if call is not None else None
        with effects(db) as conn:
            conn.execute("INSERT INTO executions VALUES (?, ?, ?)", (key, what, time.time()))
        time.sleep(random.uniform(0.0, 0.03))  # a kill here lands after the effect, before the receipt
        return {"what": what}

    return ToolRegistry([slow_step, regions, publish])


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    folder = Path(db).parent
    (folder / "deploy-all.formula.toml").write_text(ROOT, encoding="utf-8")
    (folder / "region.formula.toml").write_text(REGION, encoding="utf-8")
    runner = FormulaRunner(open_store(db), tools(db), search_paths=[folder])
    if mode == "start":
        result = asyncio.run(runner.start("deploy-all"))
    else:
        result = asyncio.run(runner.resume(sys.argv[3]))
    print(result.status, flush=True)


if __name__ == "__main__":
    main()
