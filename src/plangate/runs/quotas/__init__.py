"""Per-owner quotas: runs at once (the others wait in order), a daily token or cost budget, and the limits
each owner has (plangate.toml's ``[limits]``, overridden per owner in the store).

For: ``Limits``, ``LimitSettings``, ``LimitsOf`` and ``OwnerLimits`` (what an owner may do), ``Admissions``
(runs at once), ``DailyUsage`` (what an owner spent today) and ``COMPONENT`` (their tables; its hook counts
each ended run's spending in the run's own transaction). Every server and worker holds owners to the same
limits: the counts are in the store. Not for: requests per minute, which only servers receive
(``server/_rate.py``, with the limit said here), or a run's own budget (``runs/usage.py``).
"""

from __future__ import annotations

from plangate.runs.quotas._component import COMPONENT
from plangate.runs.quotas.admissions import STALE_START, Admissions, Standing
from plangate.runs.quotas.daily import DailyUsage, OverBudget, Spent
from plangate.runs.quotas.limits import (
    DOUBLE_TEXTING,
    KEYS,
    DoubleTexting,
    Limits,
    LimitSettings,
    LimitsOf,
    OwnerLimits,
)

__all__ = [
    "COMPONENT",
    "DOUBLE_TEXTING",
    "KEYS",
    "STALE_START",
    "Admissions",
    "DailyUsage",
    "DoubleTexting",
    "LimitSettings",
    "Limits",
    "LimitsOf",
    "OverBudget",
    "OwnerLimits",
    "Spent",
    "Standing",
]
