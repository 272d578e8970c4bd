"""What the read tools show: the week as compact text, free windows, and task lists with their filter.

For: turning a :class:`~plangate.tools.schedule.planner.Planner` into short text a model reads well, and JSON
for programs. Not for: rules (``planner.py``) or health analysis (``_health.py``).
"""

from __future__ import annotations

from pydantic import JsonValue

from plangate.tools.schedule._calendar import (
    DAYS_PER_WEEK,
    SLOTS_PER_DAY,
    day_code,
    parse_day,
    slot_time,
    slots_text,
)
from plangate.tools.schedule.errors import ScheduleRefused
from plangate.tools.schedule.models import FixedEvent, Task
from plangate.tools.schedule.planner import Occupant, Planner, Window, where

FILTER_HELP = "all, unplaced, placed, class=<class> or day=<day>"


def overview(planner: Planner, name: str) -> str:
    """The week, one line per day: each run of slots with its occupant (``free`` when none), then the
    unplaced tasks. Slots held by two occupants at once are marked ``CONFLICT``."""
    tasks = planner.tasks()
    placed = sum(1 for task in tasks if task.placement is not None)
    capacity = planner.capacity()
    lines = [
        f"week {name!r}: {len(tasks)} tasks ({placed} placed, {len(tasks) - placed} unplaced), "
        f"{len(planner.events())} fixed events; {capacity.free} of {DAYS_PER_WEEK * SLOTS_PER_DAY} slots free"
    ]
    grid = planner.grid()
    for day in range(DAYS_PER_WEEK):
        runs: list[str] = []
        start = 0
        for slot in range(1, SLOTS_PER_DAY + 1):
            if slot == SLOTS_PER_DAY or _ids(grid[day][slot]) != _ids(grid[day][start]):
                runs.append(f"{slot_time(start)}-{slot_time(slot)} {_occupancy(grid[day][start])}")
                start = slot
        lines.append(f"{day_code(day)}: " + " · ".join(runs))
    unplaced = [task for task in tasks if task.placement is None]
    if unplaced:
        lines.append("unplaced: " + " · ".join(_task_brief(task) for task in unplaced))
    return "\n".join(lines)


def _ids(occupants: list[Occupant]) -> list[str]:
    return [item.id for item in occupants]


def _occupancy(occupants: list[Occupant]) -> str:
    if not occupants:
        return "free"
    if len(occupants) > 1:
        return "CONFLICT " + " + ".join(_name(item) for item in occupants)
    return _name(occupants[0])


def _name(item: Occupant) -> str:
    if isinstance(item, FixedEvent):
        return f"{item.id} {item.title} (fixed)"
    return f"{item.id} {item.title} ({item.kind})"


def _task_brief(task: Task) -> str:
    due = f", due {day_code(task.deadline)}" if task.deadline is not None else ""
    return f"{task.id} {task.title} ({slots_text(task.duration)}, {task.kind}{due})"


def available(planner: Planner, day: int | str | None, duration: int | None) -> tuple[str, list[JsonValue]]:
    """Free windows long enough for ``duration`` slots (1 when None), as text and as JSON.

    Raises:
        ScheduleRefused: ``blocked`` for a day that cannot be read.
    """
    need = duration or 1
    windows = [window for window in planner.free_windows(day) if window.length >= need]
    scope = "this week" if day is None else day_code(parse_day(day))
    head = f"free windows on {scope}" + (f" for a {need}-slot task" if duration else "")
    if not windows:
        return f"{head}: none", []
    by_day: dict[int, list[str]] = {}
    for window in windows:
        by_day.setdefault(window.day, []).append(_window_text(window, duration))
    lines = [f"{head}:"] + [f"{day_code(index)}: " + " · ".join(parts) for index, parts in by_day.items()]
    data: list[JsonValue] = [
        {
            "day": day_code(window.day),
            "start": window.start,
            "end": window.start + window.length,
            "slots": window.length,
            "starts": list(window.starts(need)),
        }
        for window in windows
    ]
    return "\n".join(lines), data


def _window_text(window: Window, duration: int | None) -> str:
    end = window.start + window.length
    text = f"{slot_time(window.start)}-{slot_time(end)} ({slots_text(window.length)})"
    if duration:
        starts = window.starts(duration)
        first, last = slot_time(starts[0]), slot_time(starts[-1])
        text += f", start at {first}" if len(starts) == 1 else f", start {first}-{last}"
    return text


def select(planner: Planner, spec: str) -> list[Task]:
    """The tasks that match a filter: ``all``, ``unplaced``, ``placed``, ``class=<class>``, ``day=<day>``.

    Raises:
        ScheduleRefused: ``blocked`` with ``invalid_filter`` (or ``invalid_day``) when it cannot be read.
    """
    text = spec.strip()
    tasks = planner.tasks()
    if text.lower() in ("", "all"):
        return tasks
    if text.lower() == "unplaced":
        return [task for task in tasks if task.placement is None]
    if text.lower() == "placed":
        return [task for task in tasks if task.placement is not None]
    field, sep, value = text.partition("=")
    field, value = field.strip().lower(), value.strip()
    if sep and field == "class" and value:
        return [task for task in tasks if task.kind.lower() == value.lower()]
    if sep and field == "day" and value:
        day = parse_day(value)
        return [task for task in tasks if task.placement is not None and task.placement.day == day]
    raise ScheduleRefused("blocked", "invalid_filter", f"expected a filter {FILTER_HELP}, got {spec!r}")


def task_line(task: Task) -> str:
    """``t3 Prepare board slides · 4 slots · deep · due thu · unplaced``."""
    due = f" · due {day_code(task.deadline)}" if task.deadline is not None else ""
    return f"{task.id} {task.title} · {slots_text(task.duration)} · {task.kind}{due} · {where(task)}"


def task_json(task: Task) -> dict[str, JsonValue]:
    """A task for programs, with day names rather than indexes."""
    return {
        "id": task.id,
        "title": task.title,
        "duration": task.duration,
        "class": task.kind,
        "deadline": None if task.deadline is None else day_code(task.deadline),
        "day": None if task.placement is None else day_code(task.placement.day),
        "slot": None if task.placement is None else task.placement.slot,
    }
