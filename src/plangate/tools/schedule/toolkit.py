"""The built-in ``schedule`` toolkit: read and edit a week planner kept in the run store.

Read tools (pack ``read``): ``get_overview``, ``query_available_slots``, ``query_target_tasks``,
``analyze_health``. Write tools (pack ``edit``, each needing consent): ``place``, ``move``, ``swap``,
``unplace``, ``batch_move``. Every refusal is a ``failed`` or ``blocked`` result whose reason names what was
in the way; nothing here raises into the agent loop.

Writes are exactly-once: a write run with an idempotency key records the key and its result in the week
itself, in the same compare-and-set save as the change, so ``reconcile(key)`` can later say whether it
happened, and a second run with that key returns the first result instead of applying twice. Not for: the
rules (``planner.py``) or how the week is stored (``store.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema

from plangate.store import DocumentConflict, Store
from plangate.tools.registry import digest_json
from plangate.tools.result import ToolResult
from plangate.tools.schedule._calendar import DAY_HELP, DAY_NAMES, SLOT_HELP, SLOTS_PER_DAY, slot_time
from plangate.tools.schedule._health import analyze
from plangate.tools.schedule._views import available, overview, select, task_json, task_line
from plangate.tools.schedule.errors import ScheduleRefused
from plangate.tools.schedule.models import AppliedWrite
from plangate.tools.schedule.planner import Change, Planner, where
from plangate.tools.schedule.store import MAX_ATTEMPTS, ScheduleStore
from plangate.tools.tool import Tool, current_call, tool

DOMAIN = "schedule"
READ_PACK = "read"
EDIT_PACK = "edit"

DayArg = int | str
SlotArg = int | str

# What the model reads of a day and a slot: the forms people write them in (``tuesday``, ``14:00``), as enums
# a grammar holds a small model to; the tools still accept the others their descriptions name (``tue``,
# ``1``, ``Tuesday``, slot ``6``). With an example of each value, in the schemas: a model shown what an id, a
# day and a time look like writes them in the right places (a small one writes a day for the task's id, or
# a time for the day, without them).
_DAY_SCHEMA: dict[str, JsonValue] = {"enum": list(DAY_NAMES), "examples": ["monday"]}
_SLOT_SCHEMA: dict[str, JsonValue] = {
    "enum": [slot_time(slot) for slot in range(SLOTS_PER_DAY)],
    "examples": ["09:00"],
}
TaskId = Annotated[str, Field(examples=["t1"])]
OtherTaskId = Annotated[str, Field(examples=["t2"])]
Day = Annotated[DayArg, WithJsonSchema(_DAY_SCHEMA)]
Slot = Annotated[SlotArg, WithJsonSchema(_SLOT_SCHEMA)]


class Move(BaseModel):
    """One move of a batch_move."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="the id of the task to move (or to place, if it is unplaced)")
    day: DayArg = Field(description=f"the day: {DAY_HELP}")
    slot: SlotArg = Field(description=f"the first slot: {SLOT_HELP}")


def refused(exc: ScheduleRefused) -> ToolResult:
    """The result of a call the planner refused."""
    if exc.status == "blocked":
        return ToolResult.blocked(exc.code, exc.reason)
    return ToolResult.failed(exc.code, exc.reason)


def schedule_tools(store: Store, planner_id: str = "default") -> list[Tool]:
    """Build the schedule tools for the week stored under ``planner_id``.

    Args:
        store: the run store that holds the week (namespace ``schedule``).
        planner_id: which week; seed one with :func:`~plangate.tools.schedule.seed_week`.

    Returns:
        Four read tools (pack ``read``) and five write tools (pack ``edit``), domain ``schedule``.
    """
    week = _Week(ScheduleStore(store, planner_id))
    return [*_read_tools(week), *_write_tools(week)]


class _Week:
    """What the tools share: one stored week, read for views and updated for writes."""

    def __init__(self, week: ScheduleStore) -> None:
        self.store = week
        self.name = week.planner_id

    def read(self, view: Callable[[Planner], ToolResult]) -> ToolResult:
        planner, _ = self.store.load()
        try:
            return view(planner)
        except ScheduleRefused as exc:
            return refused(exc)

    def reconcile(self, key: str) -> ToolResult | None:
        """The result of the write made under ``key``, if this week recorded one."""
        planner, _ = self.store.load()
        earlier = planner.applied(key)
        return None if earlier is None else ToolResult.model_validate(earlier.result)

    def write(self, name: str, apply: Callable[[Planner], Change]) -> ToolResult:
        """Apply a change under the call's idempotency key, compare-and-set, and report it."""
        call = current_call()
        key = None if call is None else call.idempotency_key
        digest = "" if call is None else digest_json(call.arguments)
        try:
            return self.store.update(lambda planner: _apply_once(planner, name, key, digest, apply))
        except ScheduleRefused as exc:
            return refused(exc)
        except DocumentConflict:
            message = (
                f"the week {self.name!r} kept changing under this write ({MAX_ATTEMPTS} tries); nothing "
                "was changed: read it again and retry"
            )
            return ToolResult.failed("conflict", message)


def _apply_once(
    planner: Planner, name: str, key: str | None, digest: str, apply: Callable[[Planner], Change]
) -> ToolResult:
    """Apply a write unless its key was applied already, in which case return that earlier result."""
    if key is not None:
        earlier = planner.applied(key)
        if earlier is not None:
            if (earlier.tool, earlier.arguments_digest) != (name, digest):
                raise ScheduleRefused(
                    "blocked",
                    "idempotency_key_reused",
                    f"the idempotency key {key!r} belongs to an earlier {earlier.tool} call with other "
                    "arguments; nothing changed",
                )
            return ToolResult.model_validate(earlier.result)
    done = apply(planner)
    summary = f"{name} " + ", ".join(f"{task.id} {where(task)}" for task in done.tasks)
    data: JsonValue = {"tasks": [task_json(task) for task in done.tasks]}
    result = ToolResult.done(done.text, summary=summary, data=data)
    if key is not None:
        # Recorded in the same save as the change itself: either both are stored or neither is.
        stored = result.model_dump(mode="json")
        planner.record(AppliedWrite(key=key, tool=name, arguments_digest=digest, result=stored))
    return result


def _read_tools(week: _Week) -> list[Tool]:
    @tool(domain=DOMAIN, pack=READ_PACK, idempotent=True)
    def get_overview() -> ToolResult:
        """Show the week: for each day (mon-sun, 08:00-20:00 in 12 one-hour slots) who holds each slot, then
        the tasks not placed yet."""

        def view(planner: Planner) -> ToolResult:
            tasks = planner.tasks()
            placed = sum(1 for task in tasks if task.placement is not None)
            summary = f"{placed}/{len(tasks)} tasks placed, {planner.capacity().free} slots free"
            data: JsonValue = {"tasks": [task_json(task) for task in tasks]}
            return ToolResult.done(overview(planner, week.name), summary=summary, data=data)

        return week.read(view)

    @tool(domain=DOMAIN, pack=READ_PACK, idempotent=True)
    def query_available_slots(
        day: Day | None = None,
        duration: Annotated[int, Field(ge=1, le=SLOTS_PER_DAY)] | None = None,
    ) -> ToolResult:
        """List the free windows, with the slots a task of the given duration could start at.

        Args:
            day: only this day (mon..sun, monday..sunday or 0-6); the whole week when omitted.
            duration: only windows with room for this many consecutive slots.
        """

        def view(planner: Planner) -> ToolResult:
            text, data = available(planner, day, duration)
            return ToolResult.done(text, summary=f"{len(data)} free windows", data=data)

        return week.read(view)

    @tool(domain=DOMAIN, pack=READ_PACK, idempotent=True)
    def query_target_tasks(filter: str = "all") -> ToolResult:
        """List tasks with their duration, class, deadline and place.

        Args:
            filter: all, unplaced, placed, class=<class> (e.g. class=deep) or day=<day> (placed that day).
        """

        def view(planner: Planner) -> ToolResult:
            found = select(planner, filter)
            if not found:
                classes = ", ".join(sorted({task.kind for task in planner.tasks()})) or "none"
                text = f"no task matches {filter!r} (classes in this week: {classes})"
                return ToolResult.done(text, summary="0 tasks", data=[])
            data: JsonValue = [task_json(task) for task in found]
            unplaced = [task.id for task in found if task.placement is None]
            # The counts first: what "how many ..." asks, and what a reader of a long list wants.
            head = f"{len(found)} tasks: {len(found) - len(unplaced)} placed, {len(unplaced)} unplaced"
            if unplaced:
                head += f" ({', '.join(unplaced)})"
            text = "\n".join([head, *(task_line(task) for task in found)])
            return ToolResult.done(text, summary=f"{len(found)} tasks", data=data)

        return week.read(view)

    @tool(domain=DOMAIN, pack=READ_PACK, idempotent=True)
    def analyze_health() -> ToolResult:
        """Check the week: free capacity against what unplaced tasks need, overlaps, deadline risks, and the
        next move to make, written as the call to make."""

        def view(planner: Planner) -> ToolResult:
            health = analyze(planner)
            summary = (
                f"{len(health.conflicts)} conflicts, {len(health.risks)} risks"
                if health.capacity.feasible
                else "infeasible"
            )
            return ToolResult.done(health.text(), summary=summary, data=health.data())

        return week.read(view)

    return [get_overview, query_available_slots, query_target_tasks, analyze_health]


def _write_tools(week: _Week) -> list[Tool]:
    edit = tool(effect="write", domain=DOMAIN, pack=EDIT_PACK, idempotent=False, reconcile=week.reconcile)

    @edit
    def place(task: TaskId, day: Day, slot: Slot) -> ToolResult:
        """Put an unplaced task on the calendar.

        Args:
            task: the task's id.
            day: mon..sun, monday..sunday or 0-6 (0 = mon).
            slot: the first slot: 0-11 or a start time 08:00-19:00 on the hour.
        """
        return week.write("place", lambda planner: planner.place(task, day, slot))

    @edit
    def move(task: TaskId, day: Day, slot: Slot) -> ToolResult:
        """Move a placed task to another day or time.

        Args:
            task: the task's id.
            day: mon..sun, monday..sunday or 0-6 (0 = mon).
            slot: the new first slot: 0-11 or a start time 08:00-19:00 on the hour.
        """
        return week.write("move", lambda planner: planner.move(task, day, slot))

    @edit
    def swap(task_a: TaskId, task_b: OtherTaskId) -> ToolResult:
        """Exchange the places of two placed tasks of the same duration.

        Args:
            task_a: the first task's id.
            task_b: the second task's id.
        """
        return week.write("swap", lambda planner: planner.swap(task_a, task_b))

    @edit
    def unplace(task: TaskId) -> ToolResult:
        """Take a placed task off the calendar (it stays in the week, unplaced).

        Args:
            task: the task's id.
        """
        return week.write("unplace", lambda planner: planner.unplace(task))

    @edit
    def batch_move(moves: list[Move]) -> ToolResult:
        """Move or place one or two tasks at once: both moves happen or neither does. Use it to trade two
        tasks of different durations, or to clear a spot and fill it in one step.

        Args:
            moves: at most 2 moves, each {task, day, slot}; each task once.
        """
        planned = [(item.task, item.day, item.slot) for item in moves]
        return week.write("batch_move", lambda planner: planner.batch_move(planned))

    return [place, move, swap, unplace, batch_move]


__all__ = ["DOMAIN", "EDIT_PACK", "READ_PACK", "Move", "refused", "schedule_tools"]
