"""The server's side of owners' quotas: a new run refused past its owner's daily budget, and where a waiting
run stands.

For: ``budget_left`` (an owner's limits, once the daily budget was checked: past it, a 429 problem
``daily-budget`` with ``Retry-After`` until the next UTC day, and nothing stored) and ``queue_position`` (how
many of its owner's runs wait ahead of a run waiting for a slot). Thread-pool functions: both read the
store. Not for: counting or admitting (``plangate.runs.quotas``) or requests per minute (``_rate.py``).

Why a run is refused at its start rather than cut off midway: a run's spending is counted when it ends, so
the check is exact and costs one read; a run that is going is bounded by its own ``[budget]``, and a run cut
off for what other runs spent would end at a point that depends on their timing.
"""

from __future__ import annotations

import math

from plangate.errors import ConfigError
from plangate.runs.quotas import Admissions, DailyUsage, Limits
from plangate.server._deps import Services
from plangate.server._problems import Problem


def budget_left(services: Services, owner: str) -> Limits:
    """``owner``'s limits, when it may start a run now.

    Raises:
        Problem: 429 ``daily-budget`` with ``Retry-After``: its runs spent its daily budget today.
    """
    limits = services.limits(owner)
    if limits.daily_tokens is None and limits.daily_cost is None:
        return limits
    try:
        over = DailyUsage(services.store).over_budget(owner, limits)
    except ConfigError:
        return limits  # a store double: nothing counted
    if over is None:
        return limits
    raise Problem(
        429,
        "daily-budget",
        over.message(owner),
        headers={"Retry-After": str(math.ceil(over.retry_after))},
        budget=over.budget,
        limit=over.limit,
        spent=over.spent,
    )


def queue_position(services: Services, run_id: str) -> int | None:
    """How many runs of its owner wait ahead of ``run_id`` for a slot (0: it is next); None when it does
    not wait."""
    try:
        return Admissions(services.store).position(run_id)
    except ConfigError:
        return None


__all__ = ["budget_left", "queue_position"]
