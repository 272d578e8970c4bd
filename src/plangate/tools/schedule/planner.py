"""The week planner's rules: where tasks may go, and the writes that move them, each all-or-nothing.

For: pure domain logic with no I/O, so every rule can be tested line by line: occupancy, free windows,
capacity, conflicts, and ``place`` / ``move`` / ``swap`` / ``unplace`` / ``batch_move``, each of which either
applies whole or raises :class:`~plangate.tools.schedule.errors.ScheduleRefused` and changes nothing. Not for:
storing the week (``store.py``), health analysis (``_health.py``) or tool results (``toolkit.py``).

Example::

    from plangate.tools.schedule import Planner, ScheduleState, Task

    planner = Planner(ScheduleState(tasks=(Task(id="t1", title="Write spec", duration=2, kind="deep"),)))
    change = planner.place("t1", "tue", "10:00")
    assert change.text == "placed t1 'Write spec' on tue 10:00-12:00"
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from plangate.errors import ConfigError
from plangate.tools.registry import closest_name
from plangate.tools.schedule._calendar import (
    DAYS_PER_WEEK,
    SLOTS_PER_DAY,
    day_code,
    parse_day,
    parse_slot,
    slot_time,
    span_text,
)
from plangate.tools.schedule.errors import ScheduleRefused
from plangate.tools.schedule.models import AppliedWrite, FixedEvent, Placement, ScheduleState, Task

MAX_BATCH_MOVES = 2
MAX_APPLIED = 200
"""How many idempotency keys a week remembers; an older key is forgotten, and its write is then reported as
of unknown outcome by the runtime (which asks a person) rather than run twice."""

Occupant = Task | FixedEvent


@dataclass(frozen=True, slots=True)
class Window:
    """A run of free slots on one day: ``length`` slots from ``start``."""

    day: int
    start: int
    length: int

    def starts(self, duration: int) -> range:
        """The slots a task of ``duration`` slots may start at inside this window."""
        return range(self.start, self.start + self.length - duration + 1)


@dataclass(frozen=True, slots=True)
class Capacity:
    """Free slots in the week against the slots the unplaced tasks need."""

    free: int
    demand: int

    @property
    def feasible(self) -> bool:
        """Whether the unplaced tasks could fit by count (the free slots may still be too fragmented)."""
        return self.demand <= self.free


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two occupants that share at least one slot (only a stored week can hold one; writes never make one)."""

    first: Occupant
    second: Occupant
    day: int
    slots: tuple[int, ...]

    def text(self) -> str:
        """``t2 'Review PRs' overlaps e3 '1:1 with Dana' on tue 10:00-11:00``."""
        return (
            f"{label(self.first)} overlaps {label(self.second)} on "
            f"{span_text(self.day, self.slots[0], len(self.slots))}"
        )


@dataclass(frozen=True, slots=True)
class Change:
    """What a write did: a sentence for the model and the tasks as they are now."""

    text: str
    tasks: tuple[Task, ...]


def label(item: Occupant) -> str:
    """``t1 'Write spec'``, or ``e2 'Sprint planning' (fixed)`` for an event."""
    suffix = " (fixed)" if isinstance(item, FixedEvent) else ""
    return f"{item.id} {item.title!r}{suffix}"


def where(item: Occupant) -> str:
    """Where an occupant is: ``tue 10:00-12:00``, or ``unplaced``."""
    if isinstance(item, FixedEvent):
        return span_text(item.day, item.start, item.duration)
    if item.placement is None:
        return "unplaced"
    return span_text(item.placement.day, item.placement.slot, item.duration)


def cells(item: Occupant) -> list[tuple[int, int]]:
    """The ``(day, slot)`` cells an occupant covers; none for an unplaced task."""
    if isinstance(item, FixedEvent):
        return [(item.day, slot) for slot in range(item.start, item.start + item.duration)]
    if item.placement is None:
        return []
    day, start = item.placement.day, item.placement.slot
    return [(day, slot) for slot in range(start, start + item.duration)]


class Planner:
    """A week of 7 days × 12 one-hour slots (08:00-20:00), its tasks and fixed events, and its rules.

    Every write checks first and changes nothing when it refuses. A week whose unplaced tasks need more slots
    than are free is infeasible: no placement can fix that (writes keep free minus needed slots constant), so
    every write is refused with the numbers until tasks are removed or shortened.

    Args:
        state: the week to start from; an empty week when None.

    Raises:
        ConfigError: two tasks or events share an id.
    """

    def __init__(self, state: ScheduleState | None = None) -> None:
        state = state or ScheduleState()
        seen: set[str] = set()
        everything: list[Occupant] = [*state.tasks, *state.events]
        for item in everything:
            if item.id in seen:
                raise ConfigError(
                    f"week planner: the id {item.id!r} is used twice; task and event ids must be unique"
                )
            seen.add(item.id)
        self._tasks: dict[str, Task] = {task.id: task for task in state.tasks}
        self._events: dict[str, FixedEvent] = {event.id: event for event in state.events}
        self._applied: list[AppliedWrite] = list(state.applied)

    # -- state --------------------------------------------------------------------------------------------

    @property
    def state(self) -> ScheduleState:
        """The week as an immutable, storable value."""
        return ScheduleState(
            tasks=tuple(self._tasks.values()),
            events=tuple(self._events.values()),
            applied=tuple(self._applied),
        )

    def tasks(self) -> list[Task]:
        """The tasks, in the order they were added."""
        return list(self._tasks.values())

    def events(self) -> list[FixedEvent]:
        """The fixed events."""
        return list(self._events.values())

    def task(self, task_id: str) -> Task:
        """The task called ``task_id``.

        Raises:
            ScheduleRefused: ``blocked``: it is a fixed event (``fixed_event``) or no such task
                (``unknown_task``, with the closest id).
        """
        if task_id in self._tasks:
            return self._tasks[task_id]
        if task_id in self._events:
            event = self._events[task_id]
            raise ScheduleRefused(
                "blocked",
                "fixed_event",
                f"{event.id} {event.title!r} on {where(event)} is a fixed event: it cannot be moved",
            )
        suggestion = closest_name(task_id, self._tasks)
        known = ", ".join(self._tasks) or "none"
        hint = f" (did you mean {suggestion!r}?)" if suggestion else f" (tasks: {known})"
        raise ScheduleRefused("blocked", "unknown_task", f"no task {task_id!r} in this week{hint}")

    # -- occupancy ----------------------------------------------------------------------------------------

    def grid(self) -> list[list[list[Occupant]]]:
        """``grid()[day][slot]``: the occupants of each slot (more than one only in a conflict)."""
        found: list[list[list[Occupant]]] = [[[] for _ in range(SLOTS_PER_DAY)] for _ in range(DAYS_PER_WEEK)]
        for item in self._occupants():
            for day, slot in cells(item):
                found[day][slot].append(item)
        return found

    def free_windows(self, day: int | str | None = None) -> list[Window]:
        """The maximal runs of free slots, by day then start; on one day when ``day`` is given."""
        grid = self.grid()
        days = range(DAYS_PER_WEEK) if day is None else [parse_day(day)]
        windows: list[Window] = []
        for index in days:
            start: int | None = None
            for slot in range(SLOTS_PER_DAY + 1):
                free = slot < SLOTS_PER_DAY and not grid[index][slot]
                if free and start is None:
                    start = slot
                elif not free and start is not None:
                    windows.append(Window(index, start, slot - start))
                    start = None
        return windows

    def capacity(self) -> Capacity:
        """Free slots against the slots unplaced tasks need."""
        occupied = {cell for item in self._occupants() for cell in cells(item)}
        free = DAYS_PER_WEEK * SLOTS_PER_DAY - len(occupied)
        demand = sum(task.duration for task in self._tasks.values() if task.placement is None)
        return Capacity(free=free, demand=demand)

    def conflicts(self) -> list[Conflict]:
        """Each pair of occupants sharing slots, with the shared run, in calendar order."""
        shared: dict[tuple[str, str], tuple[Occupant, Occupant, int, list[int]]] = {}
        for day, slots in enumerate(self.grid()):
            for slot, here in enumerate(slots):
                for i, first in enumerate(here):
                    for second in here[i + 1 :]:
                        entry = shared.setdefault((first.id, second.id), (first, second, day, []))
                        entry[3].append(slot)
        return [Conflict(first, second, day, tuple(slots)) for first, second, day, slots in shared.values()]

    def check_fits(self, task: Task, day: int, slot: int, *, ignore: Iterable[str] = ()) -> None:
        """Whether ``task`` may start at ``slot`` on ``day``, the occupants in ``ignore`` aside.

        Raises:
            ScheduleRefused: ``failed`` with ``outside_day``, ``past_deadline`` or ``overlap``.
        """
        self._check_span(task, day, slot)
        skip = {task.id, *ignore}
        wanted = set(range(slot, slot + task.duration))
        blocking = [
            item
            for item in self._occupants()
            if item.id not in skip and any(d == day and s in wanted for d, s in cells(item))
        ]
        if blocking:
            blocking.sort(key=lambda item: cells(item)[0])
            others = "; ".join(f"{label(item)} ({where(item)})" for item in blocking)
            raise ScheduleRefused(
                "failed",
                "overlap",
                f"{task.id} on {span_text(day, slot, task.duration)} would overlap {others}",
            )

    def fits(self, task: Task, day: int, slot: int, *, ignore: Iterable[str] = ()) -> bool:
        """:meth:`check_fits` as a yes or no."""
        try:
            self.check_fits(task, day, slot, ignore=ignore)
        except ScheduleRefused:
            return False
        return True

    def spots(self, task: Task) -> list[Placement]:
        """Every place ``task`` could go now (its own slots count as free), earliest first."""
        return [
            Placement(day=day, slot=slot)
            for day in range(DAYS_PER_WEEK)
            for slot in range(SLOTS_PER_DAY)
            if self.fits(task, day, slot)
        ]

    def require_feasible(self) -> None:
        """Refuse writes while the unplaced tasks need more slots than are free.

        Raises:
            ScheduleRefused: ``blocked`` with ``infeasible_plan`` and the numbers.
        """
        capacity = self.capacity()
        if not capacity.feasible:
            raise ScheduleRefused(
                "blocked",
                "infeasible_plan",
                f"the week is infeasible: the unplaced tasks need {capacity.demand} slots but only "
                f"{capacity.free} are free ({capacity.demand - capacity.free} short); placing or moving "
                "tasks cannot change that: remove or shorten tasks first",
            )

    # -- writes -------------------------------------------------------------------------------------------

    def place(self, task_id: str, day: int | str, slot: int | str) -> Change:
        """Put an unplaced task at ``slot`` on ``day``."""
        self.require_feasible()
        task = self.task(task_id)
        target = Placement(day=parse_day(day), slot=parse_slot(slot))
        if task.placement is not None:
            raise ScheduleRefused(
                "failed", "already_placed", f"{task.id} is already on {where(task)}: use move to change that"
            )
        self.check_fits(task, target.day, target.slot)
        placed = self._put(task, target)
        return Change(f"placed {label(placed)} on {where(placed)}", (placed,))

    def move(self, task_id: str, day: int | str, slot: int | str) -> Change:
        """Move a placed task to start at ``slot`` on ``day``."""
        self.require_feasible()
        task = self.task(task_id)
        target = Placement(day=parse_day(day), slot=parse_slot(slot))
        if task.placement is None:
            raise ScheduleRefused("failed", "not_placed", f"{task.id} is not placed yet: use place")
        if task.placement == target:
            return Change(f"{label(task)} is already on {where(task)}; nothing changed", (task,))
        before = where(task)
        self.check_fits(task, target.day, target.slot)
        moved = self._put(task, target)
        return Change(f"moved {label(moved)} from {before} to {where(moved)}", (moved,))

    def swap(self, task_a: str, task_b: str) -> Change:
        """Exchange the places of two placed tasks of the same duration."""
        self.require_feasible()
        first, second = self.task(task_a), self.task(task_b)
        if first.id == second.id:
            raise ScheduleRefused(
                "blocked", "same_task", f"swap needs two different tasks, got {first.id} twice"
            )
        for item in (first, second):
            if item.placement is None:
                raise ScheduleRefused(
                    "failed", "not_placed", f"{item.id} is not placed: swap exchanges two placed tasks"
                )
        first_at, second_at = first.placement, second.placement
        if first_at is None or second_at is None:  # refused just above, one by one; this tells the types
            raise ScheduleRefused("failed", "not_placed", "swap exchanges two placed tasks")
        if first.duration != second.duration:
            raise ScheduleRefused(
                "failed",
                "wrong_duration",
                f"swap needs tasks of the same duration: {first.id} takes {first.duration} slots, "
                f"{second.id} takes {second.duration}; use batch_move to move both",
            )
        pair = (first.id, second.id)
        self.check_fits(first, second_at.day, second_at.slot, ignore=pair)
        self.check_fits(second, first_at.day, first_at.slot, ignore=pair)
        a = self._put(first, second_at)
        b = self._put(second, first_at)
        return Change(f"swapped {label(a)} (now {where(a)}) and {label(b)} (now {where(b)})", (a, b))

    def unplace(self, task_id: str) -> Change:
        """Take a placed task off the calendar."""
        self.require_feasible()
        task = self.task(task_id)
        if task.placement is None:
            raise ScheduleRefused("failed", "not_placed", f"{task.id} is not placed; nothing to unplace")
        before = where(task)
        freed = self._put(task, None)
        return Change(f"unplaced {label(freed)} (was {before})", (freed,))

    def batch_move(self, moves: Sequence[tuple[str, int | str, int | str]]) -> Change:
        """Move (or place) up to two tasks at once: all of the moves happen, or none.

        Each target is checked against the week as it will be: the tasks being moved leave their old slots,
        so two tasks may trade places even when their durations differ.

        Args:
            moves: ``(task, day, slot)`` for each task, at most two, each task once.
        """
        self.require_feasible()
        if not moves:
            raise ScheduleRefused("blocked", "no_moves", "batch_move needs at least one move, got none")
        if len(moves) > MAX_BATCH_MOVES:
            raise ScheduleRefused(
                "blocked",
                "too_many_moves",
                f"batch_move takes at most {MAX_BATCH_MOVES} moves, got {len(moves)}: split it into batches",
            )
        planned: list[tuple[Task, Placement]] = []
        for index, (task_id, day, slot) in enumerate(moves):
            with _in_move(index):
                task = self.task(task_id)
                if any(task.id == seen.id for seen, _ in planned):
                    raise ScheduleRefused("blocked", "duplicate_task", f"{task.id} is named twice")
                planned.append((task, Placement(day=parse_day(day), slot=parse_slot(slot))))
        moving = [task.id for task, _ in planned]
        for index, (task, target) in enumerate(planned):
            with _in_move(index):
                self.check_fits(task, target.day, target.slot, ignore=moving)
                for other, other_target in planned[index + 1 :]:
                    _check_apart(task, target, other, other_target)
        parts: list[str] = []
        changed: list[Task] = []
        for task, target in planned:
            verb = "placed {} on {}" if task.placement is None else "moved {} to {}"
            updated = self._put(task, target)
            parts.append(verb.format(label(updated), where(updated)))
            changed.append(updated)
        return Change("; ".join(parts), tuple(changed))

    # -- idempotency --------------------------------------------------------------------------------------

    def applied(self, key: str) -> AppliedWrite | None:
        """The write recorded under idempotency key ``key``, if this week remembers it."""
        for write in reversed(self._applied):
            if write.key == key:
                return write
        return None

    def record(self, write: AppliedWrite) -> None:
        """Remember a write under its idempotency key (the oldest is forgotten past ``MAX_APPLIED``)."""
        self._applied = [*(item for item in self._applied if item.key != write.key), write][-MAX_APPLIED:]

    # -- internals ----------------------------------------------------------------------------------------

    def _occupants(self) -> list[Occupant]:
        return [*self._events.values(), *self._tasks.values()]

    def _check_span(self, task: Task, day: int, slot: int) -> None:
        end = slot + task.duration
        if end > SLOTS_PER_DAY:
            latest = slot_time(SLOTS_PER_DAY - task.duration)
            raise ScheduleRefused(
                "failed",
                "outside_day",
                f"{task.id} takes {task.duration} slots: starting at {slot_time(slot)} on {day_code(day)} it "
                f"would end at {slot_time(end)}, after the day ends at {slot_time(SLOTS_PER_DAY)} "
                f"(latest start {latest})",
            )
        if task.deadline is not None and day > task.deadline:
            raise ScheduleRefused(
                "failed",
                "past_deadline",
                f"{task.id} is due by {day_code(task.deadline)}: {day_code(day)} is after its deadline",
            )

    def _put(self, task: Task, placement: Placement | None) -> Task:
        updated = task.model_copy(update={"placement": placement})
        self._tasks[task.id] = updated
        return updated


@contextmanager
def _in_move(index: int) -> Iterator[None]:
    """Say which move of a batch a refusal is about, and that the batch as a whole did nothing."""
    try:
        yield
    except ScheduleRefused as exc:
        reason = f"moves[{index}]: {exc.reason}; nothing was moved"
        raise ScheduleRefused(exc.status, exc.code, reason) from None


def _check_apart(task: Task, target: Placement, other: Task, other_target: Placement) -> None:
    """Refuse two moves of one batch that would land on the same slots."""
    if target.day != other_target.day:
        return
    if target.slot < other_target.slot + other.duration and other_target.slot < target.slot + task.duration:
        raise ScheduleRefused(
            "failed",
            "overlap",
            f"{task.id} on {span_text(target.day, target.slot, task.duration)} would overlap {other.id}, "
            f"moved to {span_text(other_target.day, other_target.slot, other.duration)} in the same batch",
        )


__all__ = [
    "MAX_APPLIED",
    "MAX_BATCH_MOVES",
    "Capacity",
    "Change",
    "Conflict",
    "Occupant",
    "Planner",
    "Window",
    "cells",
    "label",
    "where",
]
