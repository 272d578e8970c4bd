"""Benchmark: how the offline default model (SmolLM2-135M on llama.cpp) does as an agent on the week planner.

50 small, self-checking tasks (and 16 of new kinds, below) on the built-in ``schedule`` toolkit ("place t9 on
Tuesday at 10:00", "what is free on Wednesday", "move t8 to Friday 11:00", ...). Each runs as a ReAct agent
(``mode="react"``, at most 6 rounds) on a fresh copy of the example week, with the toolkit's tools active from
the first round (as an agent step of a formula has the tools it names), and with its goal stated the way a
user states it to the runtime: a ``done_when`` condition naming the tool whose success finishes the task
(``receipts.any(tool == 'place' and success)``; ``--no-done-when`` leaves it out, so the model must declare
``done`` itself). Every consent request is approved and every question answered with "go ahead", as a
cooperative person would. Reported, honestly, per the issue:

- decisions that parsed (execute rounds without a ``malformed_output`` correction; target 100%);
- rounds per task; tasks completed correctly (the run completed, and the planner's state or the closing
  answer is what the task asks for; target at least 50%);
- consent: consent requests raised, writes that ran, and writes that ran without an approval of their own
  (same tool, given before the write; target 0, i.e. every write asked first);
- median seconds per round (a task's wall time over its execute rounds, the closing message included;
  target at most 2 s on two cores), with the machine's load average before and after, and the CPU seconds
  per round the process used (with ``PLANGATE_LOCAL_THREADS=1`` about what a round takes on an idle core,
  whatever else the machine runs);
- how every run ended (every run must end with an outcome);
- prompt tokens per execute round, how many of them llama.cpp evaluated again (the rest it kept from the
  previous call: the prefix they share), and tokens generated per decision;
- reliability as tau-bench reports it: with ``--repeat K`` every task runs K times, and pass^k (k = 1..K) is
  the share of tasks solved in all of k runs drawn from its K (the unbiased estimate C(c, k) / C(K, k) for a
  task solved c times, averaged over the tasks; pass^1 is the mean success rate). Greedy decoding would
  repeat the same run K times, so repeats sample at ``--temperature`` (default 0.3 when K > 1) with the seed
  ``--seed + r`` for the r-th repeat: independent draws of one model, not of K models.

The held-out set (27 tasks) has tasks of the same kinds with other task ids, days, slots and wording
("Book t9 on Saturday 10:00, please.", "When am I free on Thursday?"); the prompts, the worked example and
the grammar were not tuned on it, so it says what a user's own tasks would get. It is run and reported
apart from the 50 (``--set bench`` or ``--set held-out`` runs one of them).

New kinds (issue 23): the bench adds 16 requests put as users put them, with no ``done_when`` (so the
runtime must infer the goal: a question answered by a read, N changes proven by N writes): questions,
moves, swaps and two-step requests; 66 tasks in all. The second held-out set, ``held-out-kinds`` (21 tasks
in ``bench/local_model_held_out.py``, committed alone before any tuning for these kinds and never to be
used for it), has the same four kinds in other wording (its questions without ``done_when``, its writes
with the ``done_when`` a user would state). A question is correct only if no write ran. Every report says
how many of each kind were right. ``--model test`` runs the harness on ``TestModel``, with no model: a dry
run that checks the sets and the harness, whose figures mean nothing.

Run:  .venv/bin/python bench/local_model.py                 (all three sets, greedy: the default)
      .venv/bin/python bench/local_model.py --repeat 3      (every figure, with pass^1 and pass^3, sampled)
      .venv/bin/python bench/local_model.py --every 5       (a quicker look: every 5th task of each set)
      .venv/bin/python bench/local_model.py --model test    (a dry run of the harness, no model: seconds)
On a machine busy with other work, set PLANGATE_LOCAL_THREADS=1 (see ``plangate.models.local``); the model's
thread count and the load average are printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_model_held_out import HELD_OUT_KINDS
from plangate.agent import Agent
from plangate.events import CorrectionEvent, RoundEvent
from plangate.interactions import Answer, Approve
from plangate.models import Model, TestModel
from plangate.models.local import LocalModel
from plangate.store import Store, open_store
from plangate.tools import ToolRegistry
from plangate.tools.schedule import ScheduleStore, schedule_tools, seed_week
from plangate.tools.schedule.errors import ScheduleRefused
from plangate.tools.schedule.example import example_week
from plangate.tools.schedule.planner import Planner

DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
Check = Callable[[Store, str], bool]


@dataclass(frozen=True)
class Task:
    prompt: str
    check: Check
    writes: bool
    goal: str | None
    """The tool whose successful call finishes the task, as the task's ``done_when`` names it; None: the
    request is put as a user puts it, with no ``done_when`` (the runtime infers its goal, or the model must
    declare ``done``)."""
    kind: str = ""
    """``place``, ``move``, ``unplace``, ``question``, ``swap``, ``two_step``, ... (reported apart)."""
    condition: str | None = None
    """A ``done_when`` of its own (a two-step request's), instead of the one ``goal`` names."""

    @property
    def done_when(self) -> str | None:
        if self.condition is not None:
            return self.condition
        return None if self.goal is None else f"receipts.any(tool == '{self.goal}' and success)"


@dataclass(frozen=True)
class Placed:
    """The task is placed at (day, slot) afterwards; to reach it, the planner places or moves it."""

    task: str
    day: int
    slot: int

    def __call__(self, store: Store, answer: str) -> bool:
        state = ScheduleStore(store, "default").load()[0].state
        task = next(t for t in state.tasks if t.id == self.task)
        return task.placement is not None and (task.placement.day, task.placement.slot) == (
            self.day,
            self.slot,
        )

    def apply(self, planner: Planner) -> None:
        placed = next(t for t in planner.tasks() if t.id == self.task).placement is not None
        (planner.move if placed else planner.place)(self.task, self.day, self.slot)


@dataclass(frozen=True)
class Unplaced:
    """The task is off the calendar afterwards."""

    task: str

    def __call__(self, store: Store, answer: str) -> bool:
        state = ScheduleStore(store, "default").load()[0].state
        return next(t for t in state.tasks if t.id == self.task).placement is None

    def apply(self, planner: Planner) -> None:
        planner.unplace(self.task)


@dataclass(frozen=True)
class Swapped:
    """Both tasks moved: ``first`` to ``at_first`` and ``second`` to ``at_second``, by one swap."""

    first: str
    second: str
    at_first: tuple[int, int]
    at_second: tuple[int, int]

    def __call__(self, store: Store, answer: str) -> bool:
        one, two = Placed(self.first, *self.at_first), Placed(self.second, *self.at_second)
        return one(store, answer) and two(store, answer)

    def apply(self, planner: Planner) -> None:
        planner.swap(self.first, self.second)


@dataclass(frozen=True)
class All:
    """Every check holds; to reach them, each is applied in turn."""

    checks: tuple[Check, ...]

    def __call__(self, store: Store, answer: str) -> bool:
        return all(check(store, answer) for check in self.checks)

    def apply(self, planner: Planner) -> None:
        for check in self.checks:
            apply = getattr(check, "apply", None)
            if apply is not None:
                apply(planner)


def refusal(check: Check) -> str | None:
    """What the planner says when the state ``check`` expects cannot be reached from the example week as
    asked (a deadline, an overlap), or None when it can (or ``check`` reads an answer, not the week).

    A request the planner refuses is done right by a run that does not claim it done and tells why: the
    oracle comes from the planner's own rules, for every set alike, so a task that asks for the impossible
    is not scored as if the impossible were right."""
    apply = getattr(check, "apply", None)
    if apply is None:
        return None
    try:
        apply(Planner(example_week()))
    except ScheduleRefused as refused:
        return refused.reason
    return None


def _placed(task_id: str, day: int, slot: int) -> Check:
    return Placed(task_id, day, slot)


def _unplaced(task_id: str) -> Check:
    return Unplaced(task_id)


def _mentions(*patterns: str) -> Check:
    """An answer that matches every pattern (whole words, any case); the run must also have completed."""

    def check(store: Store, answer: str) -> bool:
        return all(re.search(rf"\b{pattern}\b", answer, re.IGNORECASE) for pattern in patterns)

    return check


def _swapped(first: str, second: str, at_first: tuple[int, int], at_second: tuple[int, int]) -> Check:
    return Swapped(first, second, at_first, at_second)


def _all(*checks: Check) -> Check:
    return All(checks)


def _day(day: int) -> str:
    name = DAYS[day]
    return f"({name[:3]}|{name})"


# Whole-word patterns an answer must hold. A count must not be a duration ("4 slots"); a list of tasks with
# deadlines must name all five; an overview covers the whole week; free time on a day names a time.
_TIME = r"\d\d:00"
_FOUR = r"(4|four)\b(?!\s+slots?\b)"
_DEADLINES = ("t1", "t3", "t4", "t7", "t10")
_UNPLACED = ("t3", "t4", "t7", "t9")
_TARGETS, _HEALTH = "query_target_tasks", "analyze_health"


def tasks() -> list[Task]:
    """Fifty tasks over the example week (t9 grocery 1h and t4 expenses 1h are unplaced; t8 is Fri 08:00)."""
    found: list[Task] = []
    free = [(1, 4), (1, 5), (2, 0), (2, 1), (3, 4), (4, 2), (4, 3), (4, 5)]  # (day, slot) free in the week
    for day, slot in free:
        hhmm = f"{8 + slot:02d}:00"
        found.append(
            Task(f"Place task t9 on {DAYS[day].title()} at {hhmm}.", _placed("t9", day, slot), True, "place")
        )
        found.append(
            Task(
                f"Put the expense report (t4) on {DAYS[day].title()} at {hhmm}.",
                _placed("t4", day, slot),
                True,
                "place",
            )
        )
    for day, slot in free[:6]:
        hhmm = f"{8 + slot:02d}:00"
        found.append(
            Task(f"Move task t8 to {DAYS[day].title()} {hhmm}.", _placed("t8", day, slot), True, "move")
        )
    for task_id in ("t2", "t5", "t6", "t8"):
        found.append(Task(f"Unplace task {task_id}.", _unplaced(task_id), True, "unplace"))
    for day in range(5):
        found.append(
            Task(
                f"What is free on {DAYS[day].title()}?",
                _mentions(_day(day), _TIME),
                False,
                "query_available_slots",
            )
        )
    for _ in range(3):
        found.append(Task("How many tasks are not placed yet?", _mentions(_FOUR), False, _TARGETS))
    found.append(Task("Is my week feasible? Check its health.", _mentions("free"), False, _HEALTH))
    found.append(Task("Which tasks have deadlines?", _mentions("due", *_DEADLINES), False, _TARGETS))
    found.append(
        Task("Show me the week overview.", _mentions("(mon|monday)", "(sun|sunday)"), False, "get_overview")
    )
    while len(found) < 50:
        # an unplaced task by its id: t3, t4, t7 or t9
        found.append(Task("What should I do next with my week?", _mentions("t[3479]"), False, _HEALTH))
    return [_kind_of(task) for task in found[:50]] + new_kinds()


def _kind_of(task: Task) -> Task:
    kind = task.goal if task.goal in ("place", "move", "unplace") else "read (done_when)"
    return dataclasses.replace(task, kind=kind)


def new_kinds() -> list[Task]:
    """Sixteen requests as users put them, with no ``done_when``: questions, moves, swaps, two-step requests
    (the issue's "Which slots are open on Thursday?" and "Shift t8 to Tuesday 13:00." among them)."""
    q, m, s, two = "question", "move", "swap", "two_step"
    return [
        Task("Which slots are open on Thursday?", _mentions(_day(3), _TIME), False, None, q),
        Task("Count the tasks that still need a slot.", _mentions(_FOUR), False, None, q),
        Task("Give me an overview of this week.", _mentions("(mon|monday)", "(sun|sunday)"), False, None, q),
        Task("What is free on Monday?", _mentions(_day(0), _TIME), False, None, q),
        Task("Which tasks are unplaced?", _mentions(*_UNPLACED), False, None, q),
        Task("How does my week look?", _mentions("(mon|monday)", "(sun|sunday)"), False, None, q),
        Task("Shift t8 to Tuesday 13:00.", _placed("t8", 1, 5), True, None, m),
        Task("Move t5 to Thursday 12:00.", _placed("t5", 3, 4), True, None, m),
        Task("Move t6 to Saturday 09:00.", _placed("t6", 5, 1), True, None, m),
        Task("Swap t8 and t5.", _swapped("t8", "t5", (2, 3), (4, 0)), True, None, s),
        Task("Swap t6 and t2.", _swapped("t6", "t2", (1, 0), (1, 9)), True, None, s),
        Task("Swap t1 with t10.", _swapped("t1", "t10", (3, 1), (0, 1)), True, None, s),
        Task(
            "Unplace t8 and place t4 on Friday at 08:00.",
            _all(_unplaced("t8"), _placed("t4", 4, 0)),
            True,
            None,
            two,
        ),
        Task(
            "Place t9 on Saturday 10:00 and t4 on Saturday 11:00.",
            _all(_placed("t9", 5, 2), _placed("t4", 5, 3)),
            True,
            None,
            two,
        ),
        Task(
            "Move t5 to Monday 12:00 and unplace t6.",
            _all(_placed("t5", 0, 4), _unplaced("t6")),
            True,
            None,
            two,
        ),
        Task(
            "Take t2 off the calendar, then put t7 on Tuesday at 08:00.",
            _all(_unplaced("t2"), _placed("t7", 1, 0)),
            True,
            None,
            two,
        ),
    ]


def held_out_tasks() -> list[Task]:
    """Thirty tasks of the same kinds with other ids, days, slots and wording (not used for tuning).

    Unplaced in the example week: t3 (4 slots), t4, t7 (2 slots), t9; placed: t1 mon 09:00 (3), t2 tue 08:00
    (2), t5 wed 11:00, t6 tue 17:00 (2), t8 fri 08:00, t10 thu 09:00 (3).
    """
    found: list[Task] = []
    places = [  # (task, day, slot), each free for the task's duration
        ("t9", 0, 7),
        ("t9", 5, 2),
        ("t9", 6, 3),
        ("t4", 1, 6),
        ("t4", 3, 5),
        ("t4", 2, 8),
        ("t7", 1, 3),
        ("t7", 0, 8),
        ("t3", 2, 8),
        ("t3", 3, 4),
    ]
    wordings = [
        "Schedule task {t} for {d} at {h}.",
        "Book {t} on {d} {h}, please.",
        "Can you put {t} on {d} at {h}?",
        "Add task {t} to my calendar on {d} at {h}.",
        "I want {t} on {d} starting {h}.",
    ]
    for i, (task_id, day, slot) in enumerate(places):
        text = wordings[i % len(wordings)].format(t=task_id, d=DAYS[day].title(), h=f"{8 + slot:02d}:00")
        found.append(Task(text, _placed(task_id, day, slot), True, "place"))
    moves = [
        ("t5", 0, 4, "Shift task {t} to {d} at {h}."),
        ("t2", 4, 7, "Reschedule {t} to {d} {h}."),
        ("t6", 6, 9, "Move {t} over to {d} at {h}, please."),
        ("t10", 4, 1, "Move task {t} to {d} {h}."),
        ("t1", 1, 5, "Could you move {t} to {d} at {h}?"),
    ]
    for task_id, day, slot, wording in moves:
        text = wording.format(t=task_id, d=DAYS[day].title(), h=f"{8 + slot:02d}:00")
        found.append(Task(text, _placed(task_id, day, slot), True, "move"))
    for task_id, wording in (
        ("t10", "Take task {t} off the calendar."),
        ("t1", "Unplace {t}, please."),
        ("t6", "Clear {t} from the calendar (unplace it)."),
    ):
        found.append(Task(wording.format(t=task_id), _unplaced(task_id), True, "unplace"))
    for day, wording in (
        (5, "Which slots are open on {d}?"),
        (3, "When am I free on {d}?"),
        (6, "Show the free time on {d}."),
    ):
        found.append(
            Task(
                wording.format(d=DAYS[day].title()),
                _mentions(_day(day), _TIME),
                False,
                "query_available_slots",
            )
        )
    found.append(Task("List the tasks that still need a slot.", _mentions(*_UNPLACED), False, _TARGETS))
    found.append(Task("Which of my tasks are unplaced?", _mentions(*_UNPLACED), False, _TARGETS))
    found.append(
        Task(
            "Give me an overview of my week.",
            _mentions("(mon|monday)", "(sun|sunday)"),
            False,
            "get_overview",
        )
    )
    found.append(Task("Are there any deadline risks this week?", _mentions("risks?"), False, _HEALTH))
    found.append(Task("What is the best next move for my week?", _mentions("t[3479]"), False, _HEALTH))
    found.append(Task("Does my week still fit? Run a health check.", _mentions("free"), False, _HEALTH))
    return [_kind_of(task) for task in found]


def held_out_kinds() -> list[Task]:
    """The second held-out set (``bench/local_model_held_out.py``): questions, moves, swaps and two-step
    requests, written before any tuning for these kinds."""
    found: list[Task] = []
    for kind, prompt, done_when, expected in HELD_OUT_KINDS:
        checks: list[Check] = []
        if kind == "swap":  # the two placements a swap leaves, reached by one swap
            (_, first, *at_first), (_, second, *at_second) = expected
            swap = _swapped(
                str(first),
                str(second),
                (int(at_first[0]), int(at_first[1])),
                (int(at_second[0]), int(at_second[1])),
            )
            found.append(Task(prompt, swap, True, None, kind, done_when))
            continue
        for item in expected:
            if item[0] == "placed":
                checks.append(_placed(str(item[1]), int(item[2]), int(item[3])))
            elif item[0] == "unplaced":
                checks.append(_unplaced(str(item[1])))
            else:
                checks.append(_mentions(*(str(pattern) for pattern in item[1:])))
        found.append(Task(prompt, _all(*checks), kind != "question", None, kind, done_when))
    return found


@dataclass
class Outcome:
    kind: str
    status: str
    rounds: int
    parsed: int
    correct: bool
    writes: int
    consents: int
    unconsented: int
    seconds: float
    cpu_seconds: float
    """CPU time this process spent on the task (llama.cpp's threads included): what its wall time would be
    with one thread on a core of its own."""
    prompts: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """Each execute round's (prompt tokens, prompt tokens evaluated again)."""
    generated: list[int] = dataclasses.field(default_factory=list)
    """Each execute round's generated tokens."""


ROUNDS = 6
"""Execute rounds per task."""

TARGETS = {"bench": 0.9, "held-out": 0.8, "held-out-kinds": 0.8}
"""The share of tasks each set must get right: 90 % of the tuning set, 80 % of each held-out set."""

ROUND_SECONDS = 1.5
"""The median seconds per round a quiet two-core machine must stay within."""


async def run_task(model: Model, task: Task, workdir: Path, *, goal: bool) -> Outcome:
    store = open_store(str(workdir / "bench.db"))
    seed_week(store)
    # Active from the first round, as a formula's agent step makes the tools it names.
    tools = [dataclasses.replace(item, domain="core", pack="core") for item in schedule_tools(store)]
    agent = Agent(
        model=model,
        tools=ToolRegistry(tools),
        store=store,
        mode="react",
        max_rounds=ROUNDS,
        done_when=task.done_when if goal else None,
    )
    started, cpu_started = time.perf_counter(), time.process_time()
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
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    events = store.events(result.run_id)
    rounds = sum(1 for e in events if isinstance(e, RoundEvent))
    usages = [e.usage for e in events if isinstance(e, RoundEvent) and e.usage is not None]
    prompts = [
        (usage.input_tokens, usage.input_tokens - usage.cached_input_tokens)
        for usage in usages
        if usage.cached_input_tokens is not None
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
        kind=task.kind,
        status=result.outcome.status if result.outcome else result.status,
        rounds=rounds,
        parsed=rounds - malformed,
        correct=_correct(task, result.status, result.answer or "", store, bool(executed)),
        writes=len(executed),
        consents=len(approved),
        unconsented=unconsented,
        seconds=elapsed,
        cpu_seconds=cpu,
        prompts=prompts,
        generated=[usage.output_tokens for usage in usages],
    )
    store.close()
    return outcome


def _correct(task: Task, status: str, answer: str, store: Store, wrote: bool) -> bool:
    """A task is done right only by a run that completed (an answer in an abort message does not count), a
    question only by one that changed nothing, and a request the planner refuses only by a run that did not
    claim it done and quotes the planner's reason (``refusal``)."""
    if not task.writes and wrote:
        return False
    refused = refusal(task.check)
    if refused is not None:
        return status != "completed" and refused.split(":")[0].casefold() in answer.casefold()
    return status == "completed" and task.check(store, answer)


def pass_hat(successes: list[int], trials: int, k: int) -> float:
    """tau-bench's pass^k: the mean over tasks of C(c, k) / C(trials, k), c the task's successes."""
    return sum(math.comb(c, k) for c in successes) / (len(successes) * math.comb(trials, k))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def _prompt_lines(results: list[Outcome]) -> None:
    # A task's first round shares only the system message with what llama.cpp holds (the last task's
    # prompt); from its second round on, a prompt extends that task's previous one.
    for name, rows in (
        ("all rounds", [p for r in results for p in r.prompts]),
        ("a task's rounds 2+", [p for r in results for p in r.prompts[1:]]),
    ):
        if rows:
            total, again = statistics.median(t for t, _ in rows), statistics.median(e for _, e in rows)
            share = sum(e for _, e in rows) / sum(t for t, _ in rows)
            print(
                f"prompt tokens, {name:<18} median {total:.0f} a round, re-evaluated median "
                f"{again:.0f} a round ({share:.1%} of all)"
            )
    generated = [g for r in results for g in r.generated]
    if generated:
        print(f"tokens generated per decision median {statistics.median(generated):.0f}")


def _report(results: list[Outcome], label: str, target: float) -> None:
    rounds = sum(r.rounds for r in results)
    parsed = sum(r.parsed for r in results)
    writes = sum(r.writes for r in results)
    consents = sum(r.consents for r in results)
    unconsented = sum(r.unconsented for r in results)
    per_round = [r.seconds / r.rounds for r in results if r.rounds]
    cpu_per_round = [r.cpu_seconds / r.rounds for r in results if r.rounds]
    correct = sum(r.correct for r in results)
    print(f"-- {label}")
    print(f"decisions that parsed         {parsed}/{rounds} = {parsed / max(rounds, 1):.1%}   target 100%")
    print(f"rounds per task (mean)        {rounds / len(results):.2f}")
    print(
        f"tasks completed correctly     {correct}/{len(results)} = {correct / len(results):.0%}"
        f"   target >= {target:.0%}"
    )
    print(
        f"consent requests raised       {consents} (all approved); writes that ran {writes}, "
        f"without their own approval {unconsented}   target 0"
    )
    if per_round:
        print(
            f"seconds per round             median {statistics.median(per_round):.2f}, "
            f"p90 {_percentile(per_round, 0.9):.2f}   target median <= {ROUND_SECONDS}"
        )
        # On a machine shared with other work, wall time measures the machine; CPU time measures the model.
        print(
            f"CPU seconds per round         median {statistics.median(cpu_per_round):.2f}, "
            f"p90 {_percentile(cpu_per_round, 0.9):.2f}   (one thread: ~ wall time, idle core)"
        )
    print(f"how runs ended                {dict(Counter(r.status for r in results))}")
    by_kind = Counter(r.kind for r in results)
    right = Counter(r.kind for r in results if r.correct)
    shares = ", ".join(f"{kind} {right[kind]}/{count}" for kind, count in sorted(by_kind.items()))
    print(f"correct by kind               {shares}")
    _prompt_lines(results)


def _reliability(runs: list[list[Outcome]]) -> str:
    successes = [sum(results[i].correct for results in runs) for i in range(len(runs[0]))]
    return "   ".join(f"pass^{k} {pass_hat(successes, len(runs), k):.0%}" for k in range(1, len(runs) + 1))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--set",
        choices=("all", "bench", "held-out", "held-out-kinds"),
        default="all",
        help="which tasks: the bench's 66, the held-out 27, the held-out kinds' 21, or all "
        "three (default), reported apart",
    )
    parser.add_argument(
        "--model",
        choices=("local", "test"),
        default="local",
        help="local: the bundled model (the figures); test: TestModel, a dry run of the "
        "harness with no model (its figures mean nothing)",
    )
    parser.add_argument("--every", type=int, default=1, help="every Nth task (a quick look at all kinds)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each task, for pass^k (k <= repeat)")
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (default 0, greedy; 0.3 when --repeat > 1)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the first repeat's sampling seed")
    parser.add_argument("--no-done-when", action="store_true", help="no goal: the model must declare done")
    parser.add_argument("--verbose", action="store_true", help="print every task of every repeat")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    temperature = args.temperature if args.temperature is not None else (0.3 if args.repeat > 1 else 0.0)
    if args.repeat > 1 and temperature == 0:
        print("note: greedy decoding repeats the same run; pass^k then equals pass^1")
    sets = {
        "bench": tasks()[:: args.every],
        "held-out": held_out_tasks()[:: args.every],
        "held-out-kinds": held_out_kinds()[:: args.every],
    }
    chosen = {name: found for name, found in sets.items() if args.set in ("all", name)}
    began = time.perf_counter()
    print(f"load average before: {load()}")
    print(
        f"tasks: {', '.join(f'{name} {len(found)}' for name, found in chosen.items())}; "
        f"goal: {'none' if args.no_done_when else 'done_when'}; repeats {args.repeat}, "
        f"temperature {temperature}, seeds {args.seed}..{args.seed + args.repeat - 1}"
    )
    model: Model
    if args.model == "test":
        model = TestModel()
        print("model: TestModel (a dry run of the harness: no figure below is the local model's)")
    else:
        local = model = LocalModel(temperature=temperature)
        loaded = time.perf_counter()
        local.load()
        print(
            f"model: {local.description}, {local.n_threads} threads, "
            f"loaded in {time.perf_counter() - loaded:.2f} s"
        )
    runs: dict[str, list[list[Outcome]]] = {name: [] for name in chosen}
    for repeat in range(args.repeat):
        if isinstance(model, LocalModel):
            model.seed = args.seed + repeat
        for name, found in chosen.items():
            results: list[Outcome] = []
            for i, task in enumerate(found):
                with tempfile.TemporaryDirectory() as tmp:
                    results.append(asyncio.run(run_task(model, task, Path(tmp), goal=not args.no_done_when)))
                r = results[-1]
                if args.verbose or args.repeat == 1:
                    print(
                        f"{name} {i + 1:>3}. {r.status:<10} rounds={r.rounds} parsed={r.parsed} "
                        f"writes={r.writes} consents={r.consents} unconsented={r.unconsented} "
                        f"correct={'yes' if r.correct else 'no'}  {task.prompt}"
                    )
            runs[name].append(results)
            print(
                f"{name}, run {repeat + 1} of {args.repeat} (seed {args.seed + repeat}): "
                f"{sum(r.correct for r in results)}/{len(results)} correct; load {load()}"
            )
    for name, repeats in runs.items():
        print()
        _report(
            [r for results in repeats for r in results],
            f"{name} tasks, {len(repeats[0])} x {len(repeats)} run(s)",
            TARGETS[name],
        )
        print(f"reliability                   {_reliability(repeats)}")
    print()
    print(f"load average after: {load()}")
    print(f"wall time                     {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
