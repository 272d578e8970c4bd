"""A realistic example week for demos, examples and tests, and :func:`seed_week` to store it.

For: a week with ten tasks (some placed, some waiting, some with deadlines) around six fixed events, so
that every read tool has something to say and every write tool has room to act. Not for: rules or storage.
"""

from __future__ import annotations

from plangate.store import Store
from plangate.tools.schedule.models import FixedEvent, Placement, ScheduleState, Task
from plangate.tools.schedule.planner import Planner
from plangate.tools.schedule.store import ScheduleStore

MON, TUE, WED, THU, FRI, SAT = range(6)


def _task(
    id: str,
    title: str,
    duration: int,
    kind: str,
    *,
    due: int | None = None,
    at: tuple[int, int] | None = None,
) -> Task:
    placement = None if at is None else Placement(day=at[0], slot=at[1])
    return Task(id=id, title=title, duration=duration, kind=kind, deadline=due, placement=placement)


def example_week() -> ScheduleState:
    """Ten tasks (six placed, four waiting) and six fixed events; 61 of 84 slots free, 8 needed."""
    events = (
        FixedEvent(id="e1", title="Team standup", day=MON, start=0, duration=1),
        FixedEvent(id="e2", title="Sprint planning", day=MON, start=5, duration=2),
        FixedEvent(id="e3", title="1:1 with Dana", day=TUE, start=2, duration=1),
        FixedEvent(id="e4", title="Client call", day=WED, start=6, duration=2),
        FixedEvent(id="e5", title="Dentist", day=THU, start=8, duration=2),
        FixedEvent(id="e6", title="Family dinner", day=SAT, start=9, duration=3),
    )
    tasks = (
        _task("t1", "Write Q3 roadmap", 3, "deep", due=WED, at=(MON, 1)),
        _task("t2", "Review pull requests", 2, "admin", at=(TUE, 0)),
        _task("t3", "Prepare board slides", 4, "deep", due=THU),
        _task("t4", "Expense report", 1, "admin", due=FRI),
        _task("t5", "Interview candidate", 1, "meeting", at=(WED, 3)),
        _task("t6", "Gym", 2, "personal", at=(TUE, 9)),
        _task("t7", "Design review prep", 2, "deep", due=TUE),
        _task("t8", "Inbox zero", 1, "admin", at=(FRI, 0)),
        _task("t9", "Grocery run", 1, "personal"),
        _task("t10", "Quarterly planning doc", 3, "deep", due=FRI, at=(THU, 1)),
    )
    return ScheduleState(tasks=tasks, events=events)


def seed_week(store: Store, planner_id: str = "default", *, example: bool = True) -> Planner:
    """Store a fresh week under ``planner_id``, replacing what was there, and return it.

    Args:
        store: the store to write to.
        planner_id: the week's key.
        example: the example week when true, an empty week when false.
    """
    state = example_week() if example else ScheduleState()
    ScheduleStore(store, planner_id).replace(state)
    return Planner(state)


__all__ = ["example_week", "seed_week"]
