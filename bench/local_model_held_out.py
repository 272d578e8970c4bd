"""The second held-out set of ``bench/local_model.py``: questions, moves, swaps and two-step requests.

Written before any tuning of prompts, grammar or routing for these kinds, and never to be used to tune them:
it says what a user's own requests of these kinds would get. Data only (the bench interprets it), so that
nothing in it depends on code written after it.

Each task is ``(kind, prompt, done_when, expected)``:

- ``kind``: ``question`` (read-only, asked with no ``done_when``: the runtime must tell it is a question and
  complete it from a successful read), ``move``, ``swap`` or ``two_step``;
- ``done_when``: the goal a user states with a write request, or None;
- ``expected``: what must hold afterwards, a tuple of checks: ``("placed", task, day, slot)`` (day 0 = Monday,
  slot 0 = 08:00), ``("unplaced", task)``, or ``("mentions", pattern, ...)`` (whole-word regular expressions
  the closing answer must all match, any case). A question is also wrong if any write ran.

The example week: unplaced t3 (4 slots), t4, t7 (2 slots), t9; placed t1 Mon 09:00 (3), t2 Tue 08:00 (2),
t5 Wed 11:00, t6 Tue 17:00 (2), t8 Fri 08:00, t10 Thu 09:00 (3).
"""

from __future__ import annotations

Check = tuple[str, ...] | tuple[str, str, int, int]
HeldOut = tuple[str, str, str | None, tuple[Check, ...]]

_TIME = r"\d\d:00"


def _any(*tools: str) -> str:
    return " and ".join(f"receipts.any(tool == '{name}' and success)" for name in tools)


HELD_OUT_KINDS: list[HeldOut] = [
    # questions: no done_when, no write may run
    (
        "question",
        "What does Friday look like? Which hours are still open?",
        None,
        (("mentions", "(fri|friday)", _TIME),),
    ),
    (
        "question",
        "How many tasks are waiting for a slot?",
        None,
        (("mentions", r"(4|four)\b(?!\s+slots?\b)"),),
    ),
    ("question", "Is there room on Saturday morning?", None, (("mentions", "(sat|saturday)", _TIME),)),
    (
        "question",
        "Tell me which tasks are already on the calendar.",
        None,
        (("mentions", "t1", "t2", "t5", "t6", "t8", "t10"),),
    ),
    ("question", "Which tasks are due this week?", None, (("mentions", "t1", "t3", "t4", "t7", "t10"),)),
    (
        "question",
        "What's planned for my week overall?",
        None,
        (("mentions", "(mon|monday)", "(sun|sunday)"),),
    ),
    ("question", "Are any of my deadlines at risk?", None, (("mentions", "risks?"),)),
    ("question", "Where is task t10 scheduled?", None, (("mentions", "(thu|thursday)", "09:00"),)),
    # moves
    ("move", "Push t5 back to Saturday at 14:00.", _any("move"), (("placed", "t5", 5, 6),)),
    ("move", "Could t8 go to Wednesday 09:00 instead?", _any("move"), (("placed", "t8", 2, 1),)),
    ("move", "Relocate task t2 to Friday, 15:00.", _any("move"), (("placed", "t2", 4, 7),)),
    ("move", "Let's have t6 on Sunday at 10:00.", _any("move"), (("placed", "t6", 6, 2),)),
    ("move", "Bump t10 to Saturday 08:00.", _any("move"), (("placed", "t10", 5, 0),)),
    # swaps (tasks of one duration)
    ("swap", "Swap t5 and t8.", _any("swap"), (("placed", "t5", 4, 0), ("placed", "t8", 2, 3))),
    ("swap", "Trade the slots of t2 and t6.", _any("swap"), (("placed", "t2", 1, 9), ("placed", "t6", 1, 0))),
    (
        "swap",
        "Exchange t10 with t1, please.",
        _any("swap"),
        (("placed", "t1", 3, 1), ("placed", "t10", 0, 1)),
    ),
    # two-step requests
    (
        "two_step",
        "Take t8 off the calendar and put t9 on Friday at 08:00.",
        _any("unplace", "place"),
        (("unplaced", "t8"), ("placed", "t9", 4, 0)),
    ),
    (
        "two_step",
        "Place t4 on Thursday 12:00 and t9 on Thursday 13:00.",
        _any("place") + " and receipts.count(tool == 'place' and success) >= 2",
        (("placed", "t4", 3, 4), ("placed", "t9", 3, 5)),
    ),
    (
        "two_step",
        "Move t5 to Friday 10:00, then unplace t6.",
        _any("move", "unplace"),
        (("placed", "t5", 4, 2), ("unplaced", "t6")),
    ),
    (
        "two_step",
        "Unplace t2 and then place t7 on Tuesday at 08:00.",
        _any("unplace", "place"),
        (("unplaced", "t2"), ("placed", "t7", 1, 0)),
    ),
    (
        "two_step",
        "Put t9 on Sunday 09:00 and move t8 to Sunday 10:00.",
        _any("place", "move"),
        (("placed", "t9", 6, 1), ("placed", "t8", 6, 2)),
    ),
]

__all__ = ["HELD_OUT_KINDS", "Check", "HeldOut"]
