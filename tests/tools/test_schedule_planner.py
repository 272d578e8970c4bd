"""The week planner's rules, one by one: each write applies whole or refuses precisely and changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.errors import ConfigError
from plangate.tools.schedule import (
    AppliedWrite,
    Change,
    FixedEvent,
    Placement,
    Planner,
    ScheduleRefused,
    ScheduleState,
    Task,
    Window,
    example_week,
)
from plangate.tools.schedule.planner import MAX_APPLIED


def task(
    id: str,
    duration: int = 1,
    *,
    kind: str = "deep",
    due: int | None = None,
    at: tuple[int, int] | None = None,
) -> Task:
    placement = None if at is None else Placement(day=at[0], slot=at[1])
    return Task(id=id, title=id.upper(), duration=duration, kind=kind, deadline=due, placement=placement)


def event(id: str, day: int, start: int, duration: int = 1) -> FixedEvent:
    return FixedEvent(id=id, title=id.upper(), day=day, start=start, duration=duration)


def week(*tasks: Task, events: tuple[FixedEvent, ...] = ()) -> Planner:
    return Planner(ScheduleState(tasks=tasks, events=events))


def refusal(action: Callable[[], Change]) -> ScheduleRefused:
    with pytest.raises(ScheduleRefused) as caught:
        action()
    return caught.value


def refused_unchanged(planner: Planner, action: Callable[[], Change]) -> ScheduleRefused:
    """The refusal ``action`` meets, after checking that it left the week exactly as it was."""
    before = planner.state
    found = refusal(action)
    assert planner.state == before
    return found


# -- the week itself -----------------------------------------------------------------------------------------


def test_ids_are_unique_across_tasks_and_events() -> None:
    with pytest.raises(ConfigError, match="the id 'x1' is used twice"):
        week(task("x1"), events=(event("x1", 0, 0),))


def test_tasks_and_events_must_fit_inside_the_day() -> None:
    with pytest.raises(ValueError, match="task 't1' of 3 slots cannot start at slot 10"):
        task("t1", 3, at=(0, 10))
    with pytest.raises(ValueError, match="event 'e1' of 2 slots cannot start at slot 11"):
        event("e1", 0, 11, 2)
    with pytest.raises(ValueError, match="less than or equal to 4"):
        task("t1", 5)


def test_free_windows_and_capacity() -> None:
    planner = week(task("t1", 2, at=(0, 2)), task("t2", 3), events=(event("e1", 0, 0), event("e2", 1, 0, 12)))
    assert planner.free_windows("mon") == [Window(0, 1, 1), Window(0, 4, 8)]
    assert planner.free_windows(1) == []
    assert len(planner.free_windows()) == 2 + 5
    capacity = planner.capacity()
    assert (capacity.free, capacity.demand, capacity.feasible) == (84 - 1 - 12 - 2, 3, True)
    assert list(Window(0, 4, 8).starts(3)) == [4, 5, 6, 7, 8, 9]


def test_spots_list_every_start_that_fits_earliest_first() -> None:
    planner = week(task("t1", 4, due=0), events=(event("e1", 0, 3, 2),))
    assert [(spot.day, spot.slot) for spot in planner.spots(planner.task("t1"))] == [
        (0, 5),
        (0, 6),
        (0, 7),
        (0, 8),
    ]


def test_unknown_ids_suggest_the_closest_task() -> None:
    planner = week(task("t10"), task("t2"))
    found = refusal(lambda: planner.place("t1", 0, 0))
    assert (found.status, found.code) == ("blocked", "unknown_task")
    assert found.reason == "no task 't1' in this week (did you mean 't10'?)"
    assert refusal(lambda: planner.place("zzz", 0, 0)).reason == "no task 'zzz' in this week (tasks: t10, t2)"


# -- place ---------------------------------------------------------------------------------------------------


def test_place_puts_an_unplaced_task_on_the_calendar() -> None:
    planner = week(task("t1", 2))
    change = planner.place("t1", "tue", "10:00")
    assert change.text == "placed t1 'T1' on tue 10:00-12:00"
    assert planner.task("t1").placement == Placement(day=1, slot=2)
    assert change.tasks == (planner.task("t1"),)


def test_place_refuses_an_overlap_naming_what_is_in_the_way() -> None:
    planner = week(task("t1", 3), task("t2", at=(0, 4)), events=(event("e1", 0, 2, 2),))
    found = refused_unchanged(planner, lambda: planner.place("t1", "mon", 2))
    assert (found.status, found.code) == ("failed", "overlap")
    assert found.reason == (
        "t1 on mon 10:00-13:00 would overlap e1 'E1' (fixed) (mon 10:00-12:00); t2 'T2' (mon 12:00-13:00)"
    )


def test_place_refuses_a_task_that_would_run_past_the_end_of_the_day() -> None:
    planner = week(task("t1", 3))
    found = refused_unchanged(planner, lambda: planner.place("t1", "wed", "18:00"))
    assert (found.status, found.code) == ("failed", "outside_day")
    assert found.reason == (
        "t1 takes 3 slots: starting at 18:00 on wed it would end at 21:00, after the day ends at 20:00 "
        "(latest start 17:00)"
    )


def test_place_respects_the_deadline_day_inclusive() -> None:
    planner = week(task("t1", due=2))
    found = refused_unchanged(planner, lambda: planner.place("t1", "thu", 0))
    assert (found.status, found.code, found.reason) == (
        "failed",
        "past_deadline",
        "t1 is due by wed: thu is after its deadline",
    )
    assert planner.place("t1", "wed", 11).text == "placed t1 'T1' on wed 19:00-20:00"


def test_place_refuses_a_placed_task_and_a_fixed_event() -> None:
    planner = week(task("t1", at=(0, 0)), events=(event("e1", 1, 1),))
    found = refused_unchanged(planner, lambda: planner.place("t1", 2, 0))
    assert (found.status, found.code) == ("failed", "already_placed")
    assert found.reason == "t1 is already on mon 08:00-09:00: use move to change that"
    fixed = refused_unchanged(planner, lambda: planner.place("e1", 2, 0))
    assert (fixed.status, fixed.code) == ("blocked", "fixed_event")
    assert fixed.reason == "e1 'E1' on tue 09:00-10:00 is a fixed event: it cannot be moved"


def test_place_refuses_an_unreadable_day_or_slot() -> None:
    planner = week(task("t1"))
    assert refused_unchanged(planner, lambda: planner.place("t1", "someday", 0)).code == "invalid_day"
    assert refused_unchanged(planner, lambda: planner.place("t1", 0, "21:00")).code == "invalid_slot"


# -- move, swap, unplace -------------------------------------------------------------------------------------


def test_move_shifts_a_task_even_onto_its_own_slots() -> None:
    planner = week(task("t1", 3, at=(0, 0)))
    assert planner.move("t1", "mon", 1).text == "moved t1 'T1' from mon 08:00-11:00 to mon 09:00-12:00"
    assert planner.task("t1").placement == Placement(day=0, slot=1)


def test_move_to_where_it_already_is_changes_nothing() -> None:
    planner = week(task("t1", 2, at=(3, 4)))
    before = planner.state
    assert (
        planner.move("t1", "thursday", "12:00").text
        == "t1 'T1' is already on thu 12:00-14:00; nothing changed"
    )
    assert planner.state == before


def test_move_refuses_an_unplaced_task_and_an_overlap() -> None:
    planner = week(task("t1"), task("t2", 2, at=(0, 0)), events=(event("e1", 0, 5),))
    found = refused_unchanged(planner, lambda: planner.move("t1", 0, 0))
    assert (found.status, found.code, found.reason) == (
        "failed",
        "not_placed",
        "t1 is not placed yet: use place",
    )
    overlap = refused_unchanged(planner, lambda: planner.move("t2", 0, 4))
    assert overlap.reason == "t2 on mon 12:00-14:00 would overlap e1 'E1' (fixed) (mon 13:00-14:00)"


def test_swap_exchanges_two_placed_tasks_of_the_same_duration() -> None:
    planner = week(task("t1", 2, at=(0, 0)), task("t2", 2, at=(4, 6)))
    change = planner.swap("t1", "t2")
    assert change.text == "swapped t1 'T1' (now fri 14:00-16:00) and t2 'T2' (now mon 08:00-10:00)"
    assert planner.task("t1").placement == Placement(day=4, slot=6)
    assert planner.task("t2").placement == Placement(day=0, slot=0)


def test_swap_refuses_different_durations() -> None:
    planner = week(task("t1", 2, at=(0, 0)), task("t2", 3, at=(1, 0)))
    found = refused_unchanged(planner, lambda: planner.swap("t1", "t2"))
    assert (found.status, found.code) == ("failed", "wrong_duration")
    assert found.reason == (
        "swap needs tasks of the same duration: t1 takes 2 slots, t2 takes 3; use batch_move to move both"
    )


def test_swap_refuses_one_task_twice_an_unplaced_task_and_a_missed_deadline() -> None:
    planner = week(task("t1", at=(0, 0), due=0), task("t2", at=(3, 0)), task("t3"))
    same = refused_unchanged(planner, lambda: planner.swap("t1", "t1"))
    assert (same.status, same.code, same.reason) == (
        "blocked",
        "same_task",
        "swap needs two different tasks, got t1 twice",
    )
    unplaced = refused_unchanged(planner, lambda: planner.swap("t1", "t3"))
    assert (unplaced.code, unplaced.reason) == (
        "not_placed",
        "t3 is not placed: swap exchanges two placed tasks",
    )
    late = refused_unchanged(planner, lambda: planner.swap("t1", "t2"))
    assert (late.code, late.reason) == ("past_deadline", "t1 is due by mon: thu is after its deadline")


def test_unplace_takes_a_task_off_and_refuses_an_unplaced_one() -> None:
    planner = week(task("t1", 2, at=(6, 10)))
    assert planner.unplace("t1").text == "unplaced t1 'T1' (was sun 18:00-20:00)"
    assert planner.task("t1").placement is None
    found = refused_unchanged(planner, lambda: planner.unplace("t1"))
    assert (found.status, found.code, found.reason) == (
        "failed",
        "not_placed",
        "t1 is not placed; nothing to unplace",
    )


# -- batch_move ----------------------------------------------------------------------------------------------


def test_batch_move_trades_places_of_tasks_with_different_durations() -> None:
    planner = week(task("t1", 3, at=(0, 0)), task("t2", 1, at=(0, 3)), events=(event("e1", 0, 4),))
    change = planner.batch_move([("t1", 0, 1), ("t2", 0, 0)])
    assert change.text == "moved t1 'T1' to mon 09:00-12:00; moved t2 'T2' to mon 08:00-09:00"
    assert [planner.task(name).placement for name in ("t1", "t2")] == [
        Placement(day=0, slot=1),
        Placement(day=0, slot=0),
    ]


def test_batch_move_can_clear_a_spot_and_fill_it() -> None:
    planner = week(task("t1", 2, at=(2, 0)), task("t2", 2, due=2))
    change = planner.batch_move([("t1", "sat", 0), ("t2", "wed", "08:00")])
    assert change.text == "moved t1 'T1' to sat 08:00-10:00; placed t2 'T2' on wed 08:00-10:00"


def test_batch_move_is_all_or_nothing() -> None:
    planner = week(task("t1", at=(0, 0)), task("t2", at=(1, 0)), events=(event("e1", 2, 0),))
    found = refused_unchanged(planner, lambda: planner.batch_move([("t1", 5, 5), ("t2", "wed", 0)]))
    assert (found.status, found.code) == ("failed", "overlap")
    assert found.reason == (
        "moves[1]: t2 on wed 08:00-09:00 would overlap e1 'E1' (fixed) (wed 08:00-09:00); nothing was moved"
    )
    unknown = refused_unchanged(planner, lambda: planner.batch_move([("t1", 5, 5), ("t9", 0, 0)]))
    assert (unknown.status, unknown.code) == ("blocked", "unknown_task")
    assert unknown.reason.startswith("moves[1]: no task 't9'")


def test_batch_move_refuses_two_moves_onto_the_same_slots() -> None:
    planner = week(task("t1", 2, at=(0, 0)), task("t2", 2, at=(1, 0)))
    found = refused_unchanged(planner, lambda: planner.batch_move([("t1", 4, 3), ("t2", 4, 4)]))
    assert found.reason == (
        "moves[0]: t1 on fri 11:00-13:00 would overlap t2, moved to fri 12:00-14:00 in the same batch; "
        "nothing was moved"
    )


@pytest.mark.parametrize(
    ("moves", "code", "reason"),
    [
        ([], "no_moves", "batch_move needs at least one move, got none"),
        (
            [("t1", 0, 0), ("t2", 0, 1), ("t3", 0, 2)],
            "too_many_moves",
            "batch_move takes at most 2 moves, got 3: split it into batches",
        ),
        ([("t1", 0, 5), ("t1", 0, 6)], "duplicate_task", "moves[1]: t1 is named twice; nothing was moved"),
    ],
)
def test_batch_move_refuses_malformed_batches(
    moves: list[tuple[str, int, int]], code: str, reason: str
) -> None:
    planner = week(task("t1", at=(0, 0)), task("t2", at=(1, 0)), task("t3", at=(2, 0)))
    found = refused_unchanged(planner, lambda: planner.batch_move(moves))
    assert (found.status, found.code, found.reason) == ("blocked", code, reason)


# -- infeasible weeks and conflicts --------------------------------------------------------------------------


def test_an_infeasible_week_blocks_every_write_with_the_numbers() -> None:
    full = tuple(event(f"e{day}", day, 0, 12) for day in range(6))
    planner = week(task("t1", 4, at=(6, 0)), task("t2", 4), task("t3", 4), task("t4", 3), events=full)
    capacity = planner.capacity()
    assert (capacity.free, capacity.demand, capacity.feasible) == (8, 11, False)
    reason = (
        "the week is infeasible: the unplaced tasks need 11 slots but only 8 are free (3 short); placing or "
        "moving tasks cannot change that: remove or shorten tasks first"
    )
    writes: list[Callable[[], Change]] = [
        lambda: planner.place("t2", 6, 4),
        lambda: planner.move("t1", 6, 1),
        lambda: planner.unplace("t1"),
        lambda: planner.swap("t1", "t2"),
        lambda: planner.batch_move([("t2", 6, 4)]),
    ]
    for write in writes:
        found = refused_unchanged(planner, write)
        assert (found.status, found.code, found.reason) == ("blocked", "infeasible_plan", reason)


def test_a_stored_conflict_is_reported_and_writes_avoid_it() -> None:
    planner = week(task("t1", 2, at=(1, 1)), task("t2", 1), events=(event("e1", 1, 2, 2),))
    [conflict] = planner.conflicts()
    assert conflict.text() == "e1 'E1' (fixed) overlaps t1 'T1' on tue 10:00-11:00"
    assert planner.grid()[1][2] == [planner.events()[0], planner.task("t1")]
    found = refused_unchanged(planner, lambda: planner.place("t2", 1, 2))
    assert found.reason == (
        "t2 on tue 10:00-11:00 would overlap t1 'T1' (tue 09:00-11:00); e1 'E1' (fixed) (tue 10:00-12:00)"
    )
    planner.move("t1", 1, 4)
    assert planner.conflicts() == []


# -- idempotency records -------------------------------------------------------------------------------------


def _write(key: str, tool: str = "place") -> AppliedWrite:
    return AppliedWrite(
        key=key, tool=tool, arguments_digest="d", result={"status": "done", "observation": key}
    )


def test_recorded_writes_are_found_by_key_and_replaced_not_duplicated() -> None:
    planner = week()
    planner.record(_write("k1"))
    planner.record(_write("k2"))
    planner.record(_write("k1", tool="move"))
    assert [write.key for write in planner.state.applied] == ["k2", "k1"]
    found = planner.applied("k1")
    assert found is not None and found.tool == "move"
    assert planner.applied("k3") is None


def test_only_the_most_recent_keys_are_remembered() -> None:
    planner = week()
    for index in range(MAX_APPLIED + 5):
        planner.record(_write(f"k{index}"))
    assert len(planner.state.applied) == MAX_APPLIED
    assert planner.applied("k4") is None
    assert planner.applied("k5") is not None and planner.applied(f"k{MAX_APPLIED + 4}") is not None


# -- every write, any arguments ------------------------------------------------------------------------------

# Operations are drawn as small integers and decoded here: much cheaper to generate than nested
# one_of/sampled_from strategies, which matters at the CI profile's example count.
_IDS: list[str] = [f"t{n}" for n in range(1, 11)] + ["e1", "t99"]
_DAYS: list[int | str] = [-1, 0, 3, 6, 7, "mon", "Friday", "sun", "x"]
_SLOTS: list[int | str] = [-1, 0, 5, 11, 12, "08:00", "19:00", "12:30"]
_OPERATION = st.tuples(
    st.integers(0, 4),
    st.integers(0, len(_IDS) - 1),
    st.integers(0, len(_IDS) - 1),
    st.integers(0, len(_DAYS) - 1),
    st.integers(0, len(_SLOTS) - 1),
    st.integers(0, 3),
)
EXAMPLE = example_week()


def _apply(planner: Planner, operation: tuple[int, int, int, int, int, int]) -> None:
    kind, a, b, day, slot, count = operation
    if kind == 0:
        planner.place(_IDS[a], _DAYS[day], _SLOTS[slot])
    elif kind == 1:
        planner.move(_IDS[a], _DAYS[day], _SLOTS[slot])
    elif kind == 2:
        planner.swap(_IDS[a], _IDS[b])
    elif kind == 3:
        planner.unplace(_IDS[a])
    else:
        moves = [
            (
                _IDS[(a + index * b) % len(_IDS)],
                _DAYS[(day + index) % len(_DAYS)],
                _SLOTS[(slot + 3 * index) % len(_SLOTS)],
            )
            for index in range(count)
        ]
        planner.batch_move(moves)


def _spare(planner: Planner) -> int:
    capacity = planner.capacity()
    return capacity.free - capacity.demand


@given(operations=st.lists(_OPERATION, max_size=4))
def test_writes_never_create_overlaps_and_keep_spare_capacity(
    operations: list[tuple[int, int, int, int, int, int]],
) -> None:
    planner = Planner(EXAMPLE)
    spare = _spare(planner)
    for operation in operations:
        before = planner.state
        try:
            _apply(planner, operation)
        except ScheduleRefused as exc:
            assert exc.status in ("failed", "blocked") and exc.reason
            assert planner.state == before
        assert planner.conflicts() == []
        assert _spare(planner) == spare
