"""Why the week planner refused a request: :class:`ScheduleRefused`, carrying a tool status and a reason.

For: the planner's rules and parsers to say no precisely (``would overlap e2 'Sprint planning' (fixed)``),
and for the tools to turn that into a ``failed`` or ``blocked`` result. Not for: store failures, which stay
``StoreError``.
"""

from __future__ import annotations

from typing import Literal

from plangate.errors import UserError

RefusalStatus = Literal["failed", "blocked"]


class ScheduleRefused(UserError):
    """The planner refused a request and changed nothing.

    Attributes:
        status: ``blocked`` when the request could not be tried (a bad day, an unknown task, an infeasible
            week), ``failed`` when it was tried against the week and broke a rule (an overlap, a missed
            deadline, the end of the day).
        code: a stable code (``overlap``, ``outside_day``, ``unknown_task``, ...).
        reason: what was asked, what stood in the way, and where.
    """

    def __init__(self, status: RefusalStatus, code: str, reason: str) -> None:
        self.status: RefusalStatus = status
        self.code = code
        self.reason = reason
        super().__init__(reason)


__all__ = ["RefusalStatus", "ScheduleRefused"]
