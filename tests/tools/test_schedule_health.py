"""What the schedule's read side shows: the overview, free windows, task filters and the health report."""

from __future__ import annotations

import pytest

from plangate.tools.schedule import (
    FixedEvent,
    Placement,
    Planner,
    ScheduleRefused,
    ScheduleState,
    Task,
    analyze,
    example_week,
)
from plangate.tools.schedule._views import available, overview, select


def task(id: str, duration: int = 1, *, due: int | None = None, at: tuple[int, int] | None = None) -> Task:
    placement = None if at is None else Placement(day=at[0], slot=at[1])
    return Task(id=id, title=id.upper(), duration=duration, kind="deep", deadline=due, placement=placement)


def event(id: str, day: int, start: int, duration: int = 1) -> FixedEvent:
    return FixedEvent(id=id, title=id.upper(), day=day, start=start, duration=duration)


def week(*tasks: Task, events: tuple[FixedEvent, ...] = ()) -> Planner:
    return Planner(ScheduleState(tasks=tasks, events=events))


BUSY = tuple(event(f"b{day}", day, 0, 12) for day in range(1, 7))
"""Every day but Monday fully booked, so that tests reason about Monday alone."""


# -- overview ------------------------------------------------------------------------------------------------


def test_the_overview_of_the_example_week() -> None:
    assert overview(Planner(example_week()), "default").splitlines() == [
        "week 'default': 10 tasks (6 placed, 4 unplaced), 6 fixed events; 61 of 84 slots free",
        "mon: 08:00-09:00 e1 Team standup (fixed) · 09:00-12:00 t1 Write Q3 roadmap (deep) · "
        "12:00-13:00 free · 13:00-15:00 e2 Sprint planning (fixed) · 15:00-20:00 free",
        "tue: 08:00-10:00 t2 Review pull requests (admin) · 10:00-11:00 e3 1:1 with Dana (fixed) · "
        "11:00-17:00 free · 17:00-19:00 t6 Gym (personal) · 19:00-20:00 free",
        "wed: 08:00-11:00 free · 11:00-12:00 t5 Interview candidate (meeting) · 12:00-14:00 free · "
        "14:00-16:00 e4 Client call (fixed) · 16:00-20:00 free",
        "thu: 08:00-09:00 free · 09:00-12:00 t10 Quarterly planning doc (deep) · 12:00-16:00 free · "
        "16:00-18:00 e5 Dentist (fixed) · 18:00-20:00 free",
        "fri: 08:00-09:00 t8 Inbox zero (admin) · 09:00-20:00 free",
        "sat: 08:00-17:00 free · 17:00-20:00 e6 Family dinner (fixed)",
        "sun: 08:00-20:00 free",
        "unplaced: t3 Prepare board slides (4 slots, deep, due thu) · "
        "t4 Expense report (1 slot, admin, due fri) · "
        "t7 Design review prep (2 slots, deep, due tue) · t9 Grocery run (1 slot, personal)",
    ]


def test_the_overview_marks_shared_slots_as_a_conflict() -> None:
    text = overview(week(task("t1", 2, at=(0, 0)), events=(event("e1", 0, 1, 2),)), "w")
    assert text.splitlines()[1] == (
        "mon: 08:00-09:00 t1 T1 (deep) · 09:00-10:00 CONFLICT e1 E1 (fixed) + t1 T1 (deep) · "
        "10:00-11:00 e1 E1 (fixed) · 11:00-20:00 free"
    )


# -- free windows and filters --------------------------------------------------------------------------------


def test_available_windows_list_where_a_task_of_that_length_can_start() -> None:
    planner = week(task("t1", 2, at=(0, 3)), events=(event("e1", 0, 0), *BUSY))
    text, data = available(planner, "monday", 3)
    assert text == "free windows on mon for a 3-slot task:\nmon: 13:00-20:00 (7 slots), start 13:00-17:00"
    assert data == [{"day": "mon", "start": 5, "end": 12, "slots": 7, "starts": [5, 6, 7, 8, 9]}]
    text, data = available(planner, None, None)
    assert text == "free windows on this week:\nmon: 09:00-11:00 (2 slots) · 13:00-20:00 (7 slots)"
    assert [window["starts"] for window in data] == [[1, 2], [5, 6, 7, 8, 9, 10, 11]]  # type: ignore[index]


def test_available_says_none_when_nothing_fits() -> None:
    planner = week(events=(event("e1", 0, 1), event("e2", 0, 4), event("e3", 0, 8), *BUSY))
    assert available(planner, 0, 4) == ("free windows on mon for a 4-slot task: none", [])
    assert available(planner, 0, 2)[0] == (
        "free windows on mon for a 2-slot task:\nmon: 10:00-12:00 (2 slots), start at 10:00 · "
        "13:00-16:00 (3 slots), start 13:00-14:00 · 17:00-20:00 (3 slots), start 17:00-18:00"
    )


@pytest.mark.parametrize(
    ("spec", "ids"),
    [
        ("all", ["t1", "t2", "t3"]),
        ("", ["t1", "t2", "t3"]),
        ("unplaced", ["t2"]),
        ("PLACED", ["t1", "t3"]),
        ("class=deep", ["t1", "t2"]),
        ("class = Admin", ["t3"]),
        ("class=none", []),
        ("day=tue", ["t3"]),
        ("day=wednesday", []),
    ],
)
def test_task_filters(spec: str, ids: list[str]) -> None:
    planner = Planner(
        ScheduleState(
            tasks=(
                task("t1", at=(0, 0)),
                task("t2"),
                Task(id="t3", title="T3", duration=1, kind="admin", placement=Placement(day=1, slot=0)),
            )
        )
    )
    assert [found.id for found in select(planner, spec)] == ids


@pytest.mark.parametrize(
    ("spec", "code", "reason"),
    [
        (
            "late",
            "invalid_filter",
            "expected a filter all, unplaced, placed, class=<class> or day=<day>, got 'late'",
        ),
        (
            "class=",
            "invalid_filter",
            "expected a filter all, unplaced, placed, class=<class> or day=<day>, got 'class='",
        ),
        (
            "day=someday",
            "invalid_day",
            "expected a day mon..sun, monday..sunday or 0-6 (0 = mon), got 'someday'",
        ),
    ],
)
def test_unreadable_filters_are_blocked(spec: str, code: str, reason: str) -> None:
    with pytest.raises(ScheduleRefused) as caught:
        select(week(task("t1")), spec)
    assert (caught.value.status, caught.value.code, caught.value.reason) == ("blocked", code, reason)


# -- health --------------------------------------------------------------------------------------------------


def test_the_health_of_the_example_week() -> None:
    health = analyze(Planner(example_week()))
    assert health.text().splitlines() == [
        "capacity: 61 slots free, unplaced tasks need 8 (53 to spare)",
        "conflicts: none",
        "deadline risks: none",
        'next move: place {"task": "t7", "day": "mon", "slot": 7} '
        "(earliest free window for t7 'Design review prep' (2 slots, due tue))",
    ]
    assert health.data()["suggestion"] == {
        "tool": "place",
        "arguments": {"task": "t7", "day": "mon", "slot": 7},
    }


def test_an_infeasible_week_says_by_how_much_and_suggests_nothing() -> None:
    planner = week(task("t1", 4), task("t2", 4), events=(event("e0", 0, 0, 7), *BUSY))
    health = analyze(planner)
    assert health.suggestion is None
    assert health.text().splitlines()[0] == (
        "capacity: INFEASIBLE: unplaced tasks need 8 slots but only 5 are free (3 short); writes are blocked "
        "until tasks are removed or shortened"
    )
    assert health.text().splitlines()[-1] == "next move: none while the week is infeasible"
    assert health.data()["feasible"] is False


def test_a_conflict_comes_first_and_its_fix_is_accepted() -> None:
    planner = week(task("t1", 2, at=(0, 0)), task("t2", due=0), events=(event("e1", 0, 1), *BUSY))
    health = analyze(planner)
    assert health.data()["conflicts"] == ["e1 'E1' (fixed) overlaps t1 'T1' on mon 09:00-10:00"]
    assert health.suggestion is not None
    assert health.suggestion.call() == 'move {"task": "t1", "day": "mon", "slot": 2}'
    assert health.suggestion.why == "resolves: e1 'E1' (fixed) overlaps t1 'T1' on mon 09:00-10:00"
    planner.move("t1", "mon", 2)
    assert planner.conflicts() == []


def test_deadline_risks_late_tight_and_missed() -> None:
    planner = week(
        task("t1", at=(3, 0), due=1),
        task("t2", 4, due=0),
        task("t3", 3, due=0),
        task("t4", 4),
        events=(event("e1", 0, 3), event("e2", 0, 6, 3), *BUSY[:2]),
    )
    health = analyze(planner)
    assert [(risk.task.id, risk.kind) for risk in health.risks] == [
        ("t1", "late"),
        ("t2", "cannot_meet"),
        ("t3", "tight"),
    ]
    assert [risk.text for risk in health.risks] == [
        "t1 is on thu 08:00-09:00, after its deadline tue",
        "t2 (4 slots) is due mon and no free window fits it by then",
        "t3 (3 slots) is due mon: 2 possible starts left",
    ]
    assert health.suggestion is not None
    assert health.suggestion.call() == 'move {"task": "t1", "day": "mon", "slot": 0}'


def test_a_task_that_fits_nowhere_is_named_with_the_longest_free_run() -> None:
    planner = week(task("t1", 4), events=(event("e1", 0, 3), event("e2", 0, 6), event("e3", 0, 9), *BUSY))
    health = analyze(planner)
    assert health.unfit == ("t1 needs 4 consecutive free slots; the longest free run is 3",)
    assert health.suggestion is None
    assert health.text().splitlines()[-1] == (
        "next move: none found: no free window fits what is left; move tasks by hand to make room"
    )


def test_a_settled_week_needs_no_move() -> None:
    health = analyze(week(task("t1", at=(0, 0))))
    assert health.text().splitlines()[-1] == (
        "next move: none needed: every task is placed, nothing overlaps and no deadline is at risk"
    )


def test_following_the_suggestions_settles_the_example_week() -> None:
    planner = Planner(example_week())
    for _ in range(10):
        suggestion = analyze(planner).suggestion
        if suggestion is None:
            break
        arguments = suggestion.arguments
        assert suggestion.tool == "place"
        planner.place(str(arguments["task"]), str(arguments["day"]), int(arguments["slot"]))  # type: ignore[arg-type]
    assert [task.id for task in planner.tasks() if task.placement is None] == []
    assert planner.conflicts() == [] and analyze(planner).risks == ()
