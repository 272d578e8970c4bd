"""The built-in ``schedule`` toolkit: a week planner kept in the run store, and the tools that use it.

A week has 7 days of 12 one-hour slots (08:00-20:00), tasks of 1-4 slots with a class and an optional
deadline, and fixed events that never move. Example::

    from plangate.store import open_store
    from plangate.tools import ToolRegistry
    from plangate.tools.schedule import schedule_tools, seed_week

    store = open_store(":memory:")
    seed_week(store)  # the example week, under planner id "default"
    registry = ToolRegistry(schedule_tools(store))
    assert registry.needs_consent("place") and not registry.needs_consent("get_overview")
"""

from __future__ import annotations

from plangate.tools.schedule._calendar import (
    DAY_CODES,
    DAYS_PER_WEEK,
    SLOTS_PER_DAY,
    parse_day,
    parse_slot,
    slot_time,
)
from plangate.tools.schedule._health import Health, Risk, Suggestion, analyze
from plangate.tools.schedule.errors import ScheduleRefused
from plangate.tools.schedule.example import example_week, seed_week
from plangate.tools.schedule.models import (
    STATE_VERSION,
    AppliedWrite,
    FixedEvent,
    Placement,
    ScheduleState,
    Task,
)
from plangate.tools.schedule.planner import (
    MAX_BATCH_MOVES,
    Capacity,
    Change,
    Conflict,
    Planner,
    Window,
)
from plangate.tools.schedule.store import NAMESPACE, ScheduleStore
from plangate.tools.schedule.toolkit import DOMAIN, EDIT_PACK, READ_PACK, Move, schedule_tools

__all__ = [
    "DAYS_PER_WEEK",
    "DAY_CODES",
    "DOMAIN",
    "EDIT_PACK",
    "MAX_BATCH_MOVES",
    "NAMESPACE",
    "READ_PACK",
    "SLOTS_PER_DAY",
    "STATE_VERSION",
    "AppliedWrite",
    "Capacity",
    "Change",
    "Conflict",
    "FixedEvent",
    "Health",
    "Move",
    "Placement",
    "Planner",
    "Risk",
    "ScheduleRefused",
    "ScheduleState",
    "ScheduleStore",
    "Suggestion",
    "Task",
    "Window",
    "analyze",
    "example_week",
    "parse_day",
    "parse_slot",
    "schedule_tools",
    "seed_week",
    "slot_time",
]
