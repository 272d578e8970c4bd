"""The quotas' component: its tables' migrations, and the hook that adds each ended run's spending to its
owner's day.

For: ``COMPONENT`` (registered: every store opened later has its tables) and ``count_spending``, its
``on_commit`` hook: when a transaction ends a run with no parent, the tokens (and the cost, when
``[prices]`` gave one) its outcome's usage says are added to the owner's row of the day, in that very
transaction, so a run is counted once whatever process ends it (``runs``: the runs that spent anything). A
run's usage includes its sub-runs' (``runs/usage.py``), which are not counted again. Not for: reading the
days (``daily.py``).
"""

from __future__ import annotations

from plangate.runs.quotas._tables import OWNER_LIMITS, OWNER_LOCKS, OWNER_USAGE, RUN_SLOTS, day_of
from plangate.store.base import RunChange
from plangate.store.ddl import Create
from plangate.store.repository import Component, Db, register


def count_spending(db: Db, change: RunChange) -> None:
    """Add the spending of the run ``change`` ended to its owner's day (the component's ``on_commit``)."""
    if not change.ended or change.run.parent_run_id is not None:
        return
    usage = (change.outcome or {}).get("usage")
    tokens, cost = 0, 0.0
    if isinstance(usage, dict):
        for key in ("input_tokens", "output_tokens"):
            value = usage.get(key)
            tokens += value if isinstance(value, int) and not isinstance(value, bool) else 0
        spent = usage.get("cost")
        cost = float(spent) if isinstance(spent, int | float) and not isinstance(spent, bool) else 0.0
    if not tokens and not cost:
        return  # a run that called no model: nothing to count, no statement on the run's commit
    db.run(
        "INSERT INTO owner_usage (owner, day, runs, tokens, cost) VALUES (?, ?, 1, ?, ?) "
        "ON CONFLICT (owner, day) DO UPDATE SET runs = owner_usage.runs + 1, "
        "tokens = owner_usage.tokens + excluded.tokens, cost = owner_usage.cost + excluded.cost",
        (change.run.owner, day_of(change.at), tokens, cost),
    )


COMPONENT = register(
    Component(
        "quotas",
        (
            # 1: owners' own limits, their runs holding or waiting for a slot, what they spent each day
            (Create(OWNER_LIMITS), Create(OWNER_LOCKS), Create(RUN_SLOTS), Create(OWNER_USAGE)),
        ),
        on_commit=count_spending,
    )
)

__all__ = ["COMPONENT", "count_spending"]
