"""The planner's calendar: 7 days of 12 one-hour slots, and how days and slots are written and read back.

For: turning what a model writes (``tue``, ``Tuesday``, ``1``; ``3``, ``"11:00"``) into a day index 0-6 and a
slot index 0-11, refusing anything else with a message that says what is accepted. Not for: occupancy or
rules (``planner.py``).
"""

from __future__ import annotations

import re

from plangate.tools.schedule.errors import ScheduleRefused

DAYS_PER_WEEK = 7
SLOTS_PER_DAY = 12
FIRST_HOUR = 8
"""Slot 0 starts at 08:00; slot 11 starts at 19:00 and the day ends at 20:00."""

DAY_CODES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_TIME = re.compile(r"^(?P<hour>\d{1,2}):(?P<minute>\d{2})$")
DAY_HELP = "mon..sun, monday..sunday or 0-6 (0 = mon)"
SLOT_HELP = "0-11 or a start time 08:00-19:00 on the hour"


def day_code(day: int) -> str:
    """``0`` → ``mon``."""
    return DAY_CODES[day]


def slot_time(slot: int) -> str:
    """The time a slot starts at, ``0`` → ``08:00``; ``12`` gives ``20:00``, the end of the day."""
    return f"{FIRST_HOUR + slot:02d}:00"


def slots_text(count: int) -> str:
    """``1 slot``, ``3 slots``."""
    return "1 slot" if count == 1 else f"{count} slots"


def span_text(day: int, start: int, duration: int) -> str:
    """``tue 10:00-12:00``."""
    return f"{day_code(day)} {slot_time(start)}-{slot_time(start + duration)}"


def parse_day(value: object) -> int:
    """A day index 0-6 from ``mon``..``sun``, ``monday``..``sunday`` (any case) or ``0``-``6``.

    Raises:
        ScheduleRefused: ``blocked`` with code ``invalid_day``.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < DAYS_PER_WEEK:
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in DAY_CODES:
            return DAY_CODES.index(text)
        if text in DAY_NAMES:
            return DAY_NAMES.index(text)
        if text.isdigit() and int(text) < DAYS_PER_WEEK:
            return int(text)
    raise ScheduleRefused("blocked", "invalid_day", f"expected a day {DAY_HELP}, got {value!r}")


def parse_slot(value: object) -> int:
    """A slot index 0-11 from ``0``-``11`` or a start time ``08:00``-``19:00`` on the hour (``9:00`` too).

    Raises:
        ScheduleRefused: ``blocked`` with code ``invalid_slot``.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SLOTS_PER_DAY:
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit() and int(text) < SLOTS_PER_DAY:
            return int(text)
        match = _TIME.match(text)
        if match:
            hour, minute = int(match["hour"]), int(match["minute"])
            if minute == 0 and FIRST_HOUR <= hour < FIRST_HOUR + SLOTS_PER_DAY:
                return hour - FIRST_HOUR
            if minute != 0 and minute < 60 and FIRST_HOUR <= hour < FIRST_HOUR + SLOTS_PER_DAY:
                raise ScheduleRefused(
                    "blocked",
                    "invalid_slot",
                    f"slots are whole hours: expected a slot {SLOT_HELP}, got {value!r} "
                    f"(try {slot_time(hour - FIRST_HOUR)!r})",
                )
    raise ScheduleRefused("blocked", "invalid_slot", f"expected a slot {SLOT_HELP}, got {value!r}")
