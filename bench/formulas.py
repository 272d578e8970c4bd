"""Benchmark: executing formulas — plangate's durable executor beside LangGraph, in one run.

Two graphs of no-op steps, each persisted after every step:
- a chain of N steps (each needs the one before);
- a fan-out of N independent steps.
plangate runs them with ``FormulaRunner`` on a SQLite file store (every transition committed, WAL). The
same graphs run in LangGraph as a ``StateGraph`` compiled with ``SqliteSaver`` on a SQLite file
(a checkpoint per super-step). Per-step overhead = wall time / N, median of the repeats. Target: plangate's
per-step overhead at most 1/5 of LangGraph's. Cooking a generated 2,000-step formula (target < 1 s) is
measured by ``bench/formulas_cook.py``, run at the end.

Run:  .venv/bin/python bench/formulas.py            (N = 1000, 3 repeats)
      .venv/bin/python bench/formulas.py --quick    (N = 200, 2 repeats)
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from plangate.formulas.plan import Plan, PlanStep, ToolExecutor
from plangate.formulas.runtime import FormulaRunner
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool

TARGET_RATIO = 5.0


@tool
async def noop(i: int) -> dict[str, int]:
    """Do nothing, quickly."""
    return {"i": i}


def plangate_plan(n: int, shape: str) -> Plan:
    steps = [
        PlanStep(
            id=f"s{i}",
            title=f"step {i}",
            needs=[f"s{i - 1}"] if shape == "chain" and i else [],
            executor=ToolExecutor(name="noop", args={"i": i}),
        )
        for i in range(n)
    ]
    return Plan(formula=f"{shape}-{n}", steps=steps)


def run_plangate(n: int, shape: str, concurrency: int) -> float:
    plan = plangate_plan(n, shape)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "plangate.db"))
        runner = FormulaRunner(store, ToolRegistry([noop]), concurrency=concurrency)
        started = time.perf_counter()
        result = asyncio.run(runner.start(plan))
        elapsed = time.perf_counter() - started
        assert result.status == "completed", result.reason
        store.close()
    return elapsed


class State(TypedDict):
    # The smallest state that still proves every step ran: a counter (the sum reducer lets parallel steps
    # write it), so LangGraph's checkpoints stay small and the comparison is about overhead, not state size.
    done: Annotated[int, operator.add]


def _node(i: int) -> Callable[[State], dict[str, int]]:
    def node(state: State) -> dict[str, int]:
        return {"done": 1}

    return node


def run_langgraph(n: int, shape: str) -> float:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(State)
    for i in range(n):
        graph.add_node(f"s{i}", _node(i))
    if shape == "chain":
        graph.add_edge(START, "s0")
        for i in range(1, n):
            graph.add_edge(f"s{i - 1}", f"s{i}")
        graph.add_edge(f"s{n - 1}", END)
    else:
        for i in range(n):
            graph.add_edge(START, f"s{i}")
            graph.add_edge(f"s{i}", END)
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(str(Path(tmp) / "langgraph.db"), check_same_thread=False)
        app = graph.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10}
        started = time.perf_counter()
        final = app.invoke({"done": 0}, config)
        elapsed = time.perf_counter() - started
        assert final["done"] == n
        conn.close()
    return elapsed


def median_of(repeats: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 repeats")
    parser.add_argument("-n", type=int, default=None, help="steps per graph (default 1000)")
    args = parser.parse_args()
    n = args.n or (200 if args.quick else 1000)
    repeats = 2 if args.quick else 3

    rows = []
    for shape in ("chain", "fan-out"):
        pg = median_of(repeats, lambda shape=shape: run_plangate(n, shape, concurrency=8))
        lg = median_of(repeats, lambda shape=shape: run_langgraph(n, shape))
        rows.append((shape, pg, lg))

    print(f"Executing {n} no-op steps, SQLite file stores, median of {repeats} (wall time)")
    print(
        f"{'graph':<10} {'plangate µs/step':>17} {'LangGraph µs/step':>18} {'ratio':>7}"
        f"  target ≥ {TARGET_RATIO:.0f}×"
    )
    for shape, pg, lg in rows:
        ratio = lg / pg
        verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
        print(f"{shape:<10} {pg / n * 1e6:>17.1f} {lg / n * 1e6:>18.1f} {ratio:>6.1f}×  {verdict}")
    print()
    cook = Path(__file__).with_name("formulas_cook.py")
    subprocess.run([sys.executable, str(cook), *(["--quick"] if args.quick else [])], check=True)


if __name__ == "__main__":
    main()
