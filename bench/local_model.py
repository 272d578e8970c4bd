"""Benchmark: how the offline default model (SmolLM2-135M on llama.cpp) does as an agent on the week planner.

50 small, self-checking tasks on the built-in ``schedule`` toolkit ("place t9 on Tuesday at 10:00", "what is
free on Wednesday", "move t8 to Friday 11:00", ...). Each runs as a ReAct agent (``mode="react"``, at most 6
rounds) on a fresh copy of the example week, with the toolkit's tools active from the first round (as an
agent step of a formula has the tools it names); every consent request is approved and every question
answered with "go ahead", as a cooperative person would. Reported, honestly, per the issue:

- decisions that parsed (execute rounds without a ``malformed_output`` correction; target 100%);
- rounds per task; tasks completed correctly (the run completed, and the planner's state or the answer
  text is what the task asks for);
- consent: consent requests raised, writes that ran, and writes that ran without an approval of their own
  (same tool, given before the write; target 0, i.e. every write asked first);
- median seconds per round; how every run ended (every run must end with an outcome);
- prompt tokens per execute round, and how many of them llama.cpp evaluated again (the rest it kept in its
  context from the previous call: the prompt's prefix it shares), from the ``round`` events' token counts.

A 135M model fails many tasks; what must hold is that the runtime never crashes, never writes without
consent and always ends with an outcome.

Run:  .venv/bin/python bench/local_model.py            (50 tasks)
      .venv/bin/python bench/local_model.py --tasks 10 (a quicker look)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from plangate.agent import Agent
from plangate.events import CorrectionEvent, RoundEvent
from plangate.interactions import Answer, Approve
from plangate.models.local import LocalModel
from plangate.store import Store, open_store
from plangate.tools import ToolRegistry
from plangate.tools.schedule import ScheduleStore, schedule_tools, seed_week

DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
Check = Callable[[Store, str], bool]


@dataclass(frozen=True)
class Task:
    prompt: str
    check: Check
    writes: bool


def _placed(task_id: str, day: int, slot: int) -> Check:
    def check(store: Store, answer: str) -> bool:
        state = ScheduleStore(store, "default").load()[0].state
        task = next(t for t in state.tasks if t.id == task_id)
        return task.placement is not None and (task.placement.day, task.placement.slot) == (day, slot)

    return check


def _unplaced(task_id: str) -> Check:
    def check(store: Store, answer: str) -> bool:
        state = ScheduleStore(store, "default").load()[0].state
        return next(t for t in state.tasks if t.id == task_id).placement is None

    return check


def _mentions(*patterns: str) -> Check:
    """An answer that matches every pattern (whole words, any case); the run must also have completed."""

    def check(store: Store, answer: str) -> bool:
        return all(re.search(rf"\b{pattern}\b", answer, re.IGNORECASE) for pattern in patterns)

    return check


def tasks() -> list[Task]:
    """Fifty tasks over the example week (t9 grocery 1h and t4 expenses 1h are unplaced; t8 is Fri 08:00)."""
    found: list[Task] = []
    free = [(1, 4), (1, 5), (2, 0), (2, 1), (3, 4), (4, 2), (4, 3), (4, 5)]  # (day, slot) free in the week
    for day, slot in free:
        hhmm = f"{8 + slot:02d}:00"
        found.append(Task(f"Place task t9 on {DAYS[day].title()} at {hhmm}.", _placed("t9", day, slot), True))
        found.append(Task(f"Put the expense report (t4) on {DAYS[day].title()} at {hhmm}.",
                          _placed("t4", day, slot), True))
    for day, slot in free[:6]:
        hhmm = f"{8 + slot:02d}:00"
        found.append(Task(f"Move task t8 to {DAYS[day].title()} {hhmm}.", _placed("t8", day, slot), True))
    for task_id in ("t2", "t5", "t6", "t8"):
        found.append(Task(f"Unplace task {task_id}.", _unplaced(task_id), True))
    for day in range(5):
        name = DAYS[day]
        found.append(Task(f"What is free on {name.title()}?", _mentions(f"({name[:3]}|{name})"), False))
    for _ in range(3):
        found.append(Task("How many tasks are not placed yet?", _mentions("(4|four)"), False))
    found.append(Task("Is my week feasible? Check its health.", _mentions("free"), False))
    found.append(Task("Which tasks have deadlines?", _mentions("t3"), False))
    found.append(Task("Show me the week overview.", _mentions("(mon|monday)"), False))
    while len(found) < 50:
        # an unplaced task by its id: t3, t4, t7 or t9
        found.append(Task("What should I do next with my week?", _mentions("t[3479]"), False))
    return found[:50]


@dataclass
class Outcome:
    status: str
    rounds: int
    parsed: int
    correct: bool
    writes: int
    consents: int
    unconsented: int
    seconds: float
    prompts: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """Each execute round's (prompt tokens, prompt tokens evaluated again)."""

ROUNDS = 6
"""Execute rounds per task."""


async def run_task(model: LocalModel, task: Task, workdir: Path) -> Outcome:
    store = open_store(str(workdir / "bench.db"))
    seed_week(store)
    # Active from the first round, as a formula's agent step makes the tools it names.
    tools = [dataclasses.replace(item, domain="core", pack="core") for item in schedule_tools(store)]
    agent = Agent(model=model, tools=ToolRegistry(tools), store=store, mode="react", max_rounds=ROUNDS)
    started = time.perf_counter()
    result = await agent.run_async(task.prompt)
    approved: list[tuple[str, float]] = []  # (tool, when) of every consent request approved
    for _ in range(ROUNDS):
        if result.interaction is None:
            break
        if result.interaction.kind == "confirm":
            assert result.interaction.tool is not None
            approved.append((result.interaction.tool.name, time.time()))
            resolution: Approve | Answer = Approve()
        else:
            resolution = Answer(text="go ahead")
        result = await agent.resume_async(result.run_id, result.interaction.id, resolution)
    elapsed = time.perf_counter() - started
    events = store.events(result.run_id)
    rounds = sum(1 for e in events if isinstance(e, RoundEvent))
    prompts = [
        (e.usage.input_tokens, e.usage.input_tokens - e.usage.cached_input_tokens)
        for e in events
        if isinstance(e, RoundEvent) and e.usage is not None and e.usage.cached_input_tokens is not None
    ]
    malformed = sum(1 for e in events if isinstance(e, CorrectionEvent) and e.code == "malformed_output")
    executed = [r for r in store.receipts(result.run_id) if r.source == "write_receipt"]
    # Each write that ran must be matched by its own approval, of the same tool, given before it ran.
    unconsented = 0
    unused = list(approved)
    for receipt in sorted(executed, key=lambda r: r.at):
        match = next((a for a in unused if a[0] == receipt.name and a[1] <= receipt.at), None)
        if match is None:
            unconsented += 1
        else:
            unused.remove(match)
    outcome = Outcome(
        status=result.outcome.status if result.outcome else result.status,
        rounds=rounds,
        parsed=rounds - malformed,
        # a task is done right only by a run that completed (an answer in an abort message does not count)
        correct=result.status == "completed" and task.check(store, result.answer or ""),
        writes=len(executed),
        consents=len(approved),
        unconsented=unconsented,
        seconds=elapsed,
        prompts=prompts,
    )
    store.close()
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=50, help="how many of the 50 tasks to run")
    args = parser.parse_args()
    model = LocalModel()
    began = time.perf_counter()
    model.load()
    print(f"model: {model.description}, loaded in {time.perf_counter() - began:.2f} s")
    chosen = tasks()[: args.tasks]
    results: list[Outcome] = []
    for i, task in enumerate(chosen):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(asyncio.run(run_task(model, task, Path(tmp))))
        r = results[-1]
        print(f"{i + 1:>3}. {r.status:<10} rounds={r.rounds} parsed={r.parsed} writes={r.writes} "
              f"consents={r.consents} unconsented={r.unconsented} "
              f"correct={'yes' if r.correct else 'no'}  {task.prompt}")
    rounds = sum(r.rounds for r in results)
    parsed = sum(r.parsed for r in results)
    writes = sum(r.writes for r in results)
    consents = sum(r.consents for r in results)
    unconsented = sum(r.unconsented for r in results)
    per_round = [r.seconds / r.rounds for r in results if r.rounds]
    print()
    print(f"tasks                         {len(results)}")
    print(f"decisions that parsed         {parsed}/{rounds} = {parsed / max(rounds, 1):.1%}   target 100%")
    print(f"rounds per task (mean)        {rounds / len(results):.2f}")
    print(f"tasks completed correctly     {sum(r.correct for r in results)}/{len(results)}")
    print(f"consent requests raised       {consents} (all approved); writes that ran {writes}, "
          f"without their own approval {unconsented}   target 0")
    print(f"median seconds per round      {statistics.median(per_round):.2f}" if per_round else "no rounds")
    print(f"how runs ended                {dict(Counter(r.status for r in results))}")
    # A task's first round shares only the system message with what llama.cpp holds (the last task's
    # prompt); from its second round on, a prompt extends that task's previous one.
    for label, rows in (
        ("all rounds", [p for r in results for p in r.prompts]),
        ("a task's rounds 2+", [p for r in results for p in r.prompts[1:]]),
    ):
        if rows:
            total, again = statistics.median(t for t, _ in rows), statistics.median(e for _, e in rows)
            share = sum(e for _, e in rows) / sum(t for t, _ in rows)
            print(f"prompt tokens, {label:<18} median {total:.0f} a round, evaluated again median "
                  f"{again:.0f} ({share:.1%} of all)")
    print(f"wall time                     {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
