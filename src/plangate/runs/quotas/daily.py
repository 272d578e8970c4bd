"""What each owner's runs spent each UTC day, and whether a new run is past the owner's daily budget.

For: ``DailyUsage`` (an owner's day: runs, tokens, cost; counted by the component's hook as each run ends,
``_component.py``) and ``over_budget`` (the budget a new run would go past, with the seconds until the next
day, when the owner spent its ``daily_tokens`` or ``daily_cost``). Not for: a run's own budget, checked
before each model call (``runs/usage.py``).

A run's spending is counted when it ends, with its outcome: a run is refused at start once the day's ended
runs reached the budget, and a run that is going is never cut off for it (its own ``[budget]`` bounds it).
So a day may end past the budget by what the runs going at that moment spend, never more.
"""

from __future__ import annotations

from dataclasses import dataclass

from plangate.runs.quotas._component import COMPONENT
from plangate.runs.quotas._tables import day_of, next_day
from plangate.runs.quotas.limits import Limits
from plangate.store import Store
from plangate.store.repository import database_of


@dataclass(frozen=True, slots=True)
class Spent:
    """What an owner's runs that ended on one UTC day spent.

    Attributes:
        day: the day (``2025-06-01``).
        runs: runs that spent anything.
        tokens: their input and output tokens.
        cost: their cost (by ``[prices]``; 0 without).
    """

    day: str
    runs: int
    tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class OverBudget:
    """Why a new run is refused: the budget spent, and when the next day begins.

    Attributes:
        budget: ``daily_tokens`` or ``daily_cost``.
        limit: its value.
        spent: what the day's runs spent of it.
        retry_after: seconds until the next UTC day.
    """

    budget: str
    limit: float
    spent: float
    retry_after: float

    def message(self, owner: str) -> str:
        """The refusal, as the owner reads it."""
        return (
            f"owner {owner!r} spent its {self.budget} of {self.limit:g} today ({self.spent:g}); new runs "
            f"start again at 00:00 UTC, in {int(self.retry_after) + 1} s"
        )


class DailyUsage:
    """Owners' spending per UTC day in a store.

    Raises:
        ConfigError: ``store`` offers no database.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def today(self, owner: str) -> Spent:
        """What ``owner``'s runs that ended today spent."""
        day = day_of(self._database.now())
        with self._database.reading("owner_usage") as db:
            row = db.one(
                "SELECT runs, tokens, cost FROM owner_usage WHERE owner = ? AND day = ?", (owner, day)
            )
        if row is None:
            return Spent(day, 0, 0, 0.0)
        return Spent(day, int(row["runs"]), int(row["tokens"]), float(row["cost"]))

    def over_budget(self, owner: str, limits: Limits) -> OverBudget | None:
        """The daily budget of ``owner`` that its runs spent today, or None (no budget, or some left)."""
        if limits.daily_tokens is None and limits.daily_cost is None:
            return None
        spent = self.today(owner)
        wait = next_day(self._database.now()) - self._database.now()
        if limits.daily_tokens is not None and spent.tokens >= limits.daily_tokens:
            return OverBudget("daily_tokens", limits.daily_tokens, spent.tokens, wait)
        if limits.daily_cost is not None and spent.cost >= limits.daily_cost:
            return OverBudget("daily_cost", limits.daily_cost, round(spent.cost, 6), wait)
        return None

    def prune(self, keep_days: int = 35) -> int:
        """Forget days older than ``keep_days``; how many rows went."""
        cutoff = day_of(self._database.now() - keep_days * 86_400)
        with self._database.writing("prune_owner_usage") as db:
            return db.run("DELETE FROM owner_usage WHERE day < ?", (cutoff,))


__all__ = ["DailyUsage", "OverBudget", "Spent"]
