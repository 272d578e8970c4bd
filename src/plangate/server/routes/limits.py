"""``/v1/limits``: what the caller may do, and where it stands today.

For: the caller's limits (``[limits]`` of the server's plangate.toml, its own overrides there or set with
``plangate owner set``), what its runs that ended today spent, and its runs going and waiting for a slot.
Not for: holding owners to them (``plangate.runs.quotas``, ``_rate.py``, ``_quotas.py``).
"""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter
from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.runs.quotas import Admissions, DailyUsage
from plangate.server._deps import OwnerDep, ServicesDep

router = APIRouter(prefix="/v1/limits", tags=["limits"])


@router.get("", response_model=None, summary="The caller's limits, today's spending, its runs going")
def get_limits(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """``limits`` (null: no limit), ``today`` (the UTC day's ``runs``, ``tokens`` and ``cost`` of the runs
    that ended), ``runs`` (``going``: holding a slot; ``waiting``: queued for one, oldest first)."""
    data: dict[str, JsonValue] = {"owner": owner, "limits": services.limits(owner).view()}
    try:
        spent = DailyUsage(services.store).today(owner)
        standing = Admissions(services.store).standing(owner)
    except ConfigError:
        return data  # a store double: nothing counted
    waiting: list[JsonValue] = list(standing.waiting)
    data["today"] = dataclasses.asdict(spent)
    data["runs"] = {"going": standing.going, "waiting": waiting}
    return data


__all__ = ["router"]
