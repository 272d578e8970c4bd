"""Benchmark: executing formulas — plangate's durable executor beside LangGraph, in one run.

Two graphs of no-op steps, each persisted after every step:
- a chain of N steps (each needs the one before);
- a fan-out of N independent steps.
plangate runs them with ``FormulaRunner`` (concurrency 8) on a SQLite file store (every transition
committed, WAL). The same graphs run in LangGraph as a ``StateGraph`` compiled with ``SqliteSaver`` on a
SQLite file (a checkpoint per super-step). Per-step overhead = wall time / N, median of the repeats; the two
runtimes alternate within each repeat, so both see the same machine load (the load average is printed with
the figures: the machine may be shared).

Targets: plangate's per-step overhead at most 1/15 of LangGraph's in both shapes, and flat from 1,000 to
10,000 steps (the 10,000-step figure at most 1.25 times the 1,000-step one). LangGraph is measured up to
``--langgraph-max`` steps (default 1,000): its chain costs more per step the longer it is (a run of 10,000
steps takes minutes), so larger rows are compared with its largest measured figure, and say so. Cooking a
generated 2,000-step formula (target < 1 s) is measured by ``bench/formulas_cook.py``, run at the end.

``--floors`` also measures what bounds plangate's figures from below, at the smallest N: the chain on a
SQLite store in memory (every transition still committed, no file written) and the fan-out with a
concurrency of N (no step waits for a slot: no "waiting for a free slot" transitions, one pass), each beside
the per-step budget that LangGraph's figure divided by the target leaves.

Run:  .venv/bin/python bench/formulas.py            (N = 1,000 and 10,000, 3 repeats)
      .venv/bin/python bench/formulas.py --quick    (N = 200 and 2,000, 2 repeats)
      .venv/bin/python bench/formulas.py -n 1000 -n 5000 --repeat 5 --langgraph-max 5000 --no-cook
      .venv/bin/python bench/formulas.py -n 1000 --floors --no-cook
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from plangate.formulas.plan import CookedStep, Plan, ToolExecutor
from plangate.formulas.runtime import FormulaRunner
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool

TARGET_RATIO = 15.0
TARGET_FLAT = 1.25
SHAPES = ("chain", "fan-out")


@tool
async def noop(i: int) -> dict[str, int]:
    """Do nothing, quickly."""
    return {"i": i}


def plangate_plan(n: int, shape: str) -> Plan:
    steps = [
        CookedStep(
            id=f"s{i}",
            title=f"step {i}",
            needs=[f"s{i - 1}"] if shape == "chain" and i else [],
            executor=ToolExecutor(name="noop", args={"i": i}),
        )
        for i in range(n)
    ]
    return Plan(formula=f"{shape}-{n}", steps=steps)


def run_plangate(n: int, shape: str, concurrency: int, *, memory: bool = False) -> float:
    """Seconds to run the graph; ``memory``: on a SQLite store in memory rather than a file."""
    plan = plangate_plan(n, shape)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(":memory:" if memory else str(Path(tmp) / "plangate.db"))
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


@dataclass
class Row:
    shape: str
    n: int
    plangate: list[float]  # µs per step, one per repeat
    langgraph: list[float]  # empty when LangGraph was not run at this size

    @property
    def pg(self) -> float:
        return statistics.median(self.plangate)

    @property
    def lg(self) -> float | None:
        return statistics.median(self.langgraph) if self.langgraph else None


def measure(shape: str, n: int, repeats: int, with_langgraph: bool) -> Row:
    """Alternate the two runtimes ``repeats`` times, so that both see the same machine load."""
    row = Row(shape, n, [], [])
    for _ in range(repeats):
        row.plangate.append(run_plangate(n, shape, concurrency=8) / n * 1e6)
        if with_langgraph:
            row.langgraph.append(run_langgraph(n, shape) / n * 1e6)
    return row


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def report(rows: list[Row], repeats: int, langgraph_max: int) -> None:
    print(f"Executing no-op steps, SQLite file stores, median of {repeats} (wall time), µs per step")
    print(
        f"{'graph':<8} {'steps':>6} {'plangate':>9} {'LangGraph':>10} {'ratio':>7}  "
        f"target ≥ {TARGET_RATIO:.0f}×   (all repeats: plangate | LangGraph)"
    )
    for row in rows:
        lg, note = row.lg, ""
        if lg is None:
            measured = [r for r in rows if r.shape == row.shape and r.lg is not None]
            if measured:
                lg = measured[-1].lg
                note = f" (LangGraph at {measured[-1].n:,})"
        ratio = f"{lg / row.pg:>6.1f}×" if lg is not None else f"{'-':>7}"
        verdict = ("met" if lg / row.pg >= TARGET_RATIO else "MISSED") if lg is not None else ""
        lg_text = f"{lg:>10.1f}" if lg is not None else f"{'-':>10}"
        repeats_text = " ".join(f"{v:.1f}" for v in row.plangate)
        if row.langgraph:
            repeats_text += " | " + " ".join(f"{v:.1f}" for v in row.langgraph)
        print(
            f"{row.shape:<8} {row.n:>6,} {row.pg:>9.1f} {lg_text} {ratio}  {verdict:<6}{note}"
            f"   ({repeats_text})"
        )
    sizes = sorted({r.n for r in rows})
    if len(sizes) > 1 and any(n > langgraph_max for n in sizes):
        print(
            f"LangGraph is measured up to {langgraph_max:,} steps (--langgraph-max): its chain's per-step "
            "cost grows with the graph, so a 10,000-step run takes minutes; larger rows use its largest "
            "measured figure."
        )
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for shape in SHAPES:
            first = next(r for r in rows if r.shape == shape and r.n == small)
            last = next(r for r in rows if r.shape == shape and r.n == large)
            growth = last.pg / first.pg
            verdict = "met" if growth <= TARGET_FLAT else "MISSED"
            print(
                f"flat {shape:<8} {large:,} vs {small:,} steps: {growth:.2f}× per step"
                f"  (target ≤ {TARGET_FLAT:.2f}×: {verdict})"
            )


def floors(rows: list[Row], repeats: int) -> None:
    """What bounds plangate from below at the smallest N measured beside LangGraph (see the docstring)."""
    n = min(r.n for r in rows if r.lg is not None)
    cases = {
        "chain": ("a store in memory (no file written)", lambda: run_plangate(n, "chain", 8, memory=True)),
        "fan-out": (f"concurrency {n:,} (no slot waits)", lambda: run_plangate(n, "fan-out", n)),
    }
    print(f"Floors at {n:,} steps, median of {repeats}, µs per step; budget = LangGraph / {TARGET_RATIO:.0f}")
    for shape, (what, run) in cases.items():
        row = next(r for r in rows if r.shape == shape and r.n == n)
        lg = row.lg if row.lg is not None else 0.0
        figures = [run() / n * 1e6 for _ in range(repeats)]
        print(
            f"{shape:<8} bench {row.pg:>7.1f}   with {what + ':':<40} {statistics.median(figures):>7.1f}"
            f"   budget {lg / TARGET_RATIO:>6.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="N = 200 and 2,000, 2 repeats")
    parser.add_argument("-n", type=int, action="append", help="steps per graph (repeatable)")
    parser.add_argument("--repeat", type=int, default=None, help="repeats per row (default 3)")
    parser.add_argument(
        "--langgraph-max", type=int, default=1000, help="largest graph LangGraph runs (default 1,000)"
    )
    parser.add_argument("--no-cook", action="store_true", help="skip bench/formulas_cook.py")
    parser.add_argument(
        "--floors", action="store_true", help="also measure what bounds plangate from below (see above)"
    )
    args = parser.parse_args()
    sizes = args.n or ([200, 2000] if args.quick else [1000, 10000])
    repeats = args.repeat or (2 if args.quick else 3)
    langgraph_max = max(args.langgraph_max, min(sizes))

    print(f"load average before: {load()}")
    rows = [measure(shape, n, repeats, with_langgraph=n <= langgraph_max) for n in sizes for shape in SHAPES]
    print(f"load average after:  {load()}")
    report(rows, repeats, langgraph_max)
    if args.floors:
        print()
        floors(rows, repeats)
    if not args.no_cook:
        print()
        cook = Path(__file__).with_name("formulas_cook.py")
        subprocess.run([sys.executable, str(cook), *(["--quick"] if args.quick else [])], check=True)


if __name__ == "__main__":
    main()
