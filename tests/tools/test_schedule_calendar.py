"""How the week planner reads days and slots, and how it refuses what it cannot read."""

from __future__ import annotations

import pytest

from plangate.tools.schedule import ScheduleRefused, parse_day, parse_slot, slot_time


@pytest.mark.parametrize(
    ("value", "day"),
    [("mon", 0), ("TUE", 1), (" sun ", 6), ("Wednesday", 2), ("friday", 4), (0, 0), (6, 6), ("3", 3)],
)
def test_days_by_code_name_or_index(value: object, day: int) -> None:
    assert parse_day(value) == day


@pytest.mark.parametrize("value", ["funday", "mo", 7, -1, "7", True, 1.0, None, ""])
def test_unreadable_days_are_blocked_with_what_is_accepted(value: object) -> None:
    with pytest.raises(ScheduleRefused) as caught:
        parse_day(value)
    assert (caught.value.status, caught.value.code) == ("blocked", "invalid_day")
    assert caught.value.reason == f"expected a day mon..sun, monday..sunday or 0-6 (0 = mon), got {value!r}"


@pytest.mark.parametrize(
    ("value", "slot"),
    [(0, 0), (11, 11), ("4", 4), ("08:00", 0), ("9:00", 1), ("19:00", 11), (" 13:00 ", 5)],
)
def test_slots_by_index_or_start_time(value: object, slot: int) -> None:
    assert parse_slot(value) == slot


@pytest.mark.parametrize("value", [12, -1, "12", "20:00", "07:00", "7:00", True, 2.0, None, "noon", "25:00"])
def test_unreadable_slots_are_blocked_with_what_is_accepted(value: object) -> None:
    with pytest.raises(ScheduleRefused) as caught:
        parse_slot(value)
    assert (caught.value.status, caught.value.code) == ("blocked", "invalid_slot")
    assert (
        caught.value.reason == f"expected a slot 0-11 or a start time 08:00-19:00 on the hour, got {value!r}"
    )


def test_a_time_off_the_hour_suggests_the_hour() -> None:
    with pytest.raises(ScheduleRefused, match=r"slots are whole hours: .* got '15:30' \(try '15:00'\)"):
        parse_slot("15:30")


def test_slot_times_run_from_eight_to_twenty() -> None:
    assert [slot_time(slot) for slot in (0, 1, 11, 12)] == ["08:00", "09:00", "19:00", "20:00"]
