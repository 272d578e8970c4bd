"""``/v1/schedules``: the caller's schedules (formula runs on a cron expression or an interval).

For: listing, adding, pausing, resuming and deleting the caller's schedules, and a schedule's latest slots
(which run each started, or why none). Every schedule belongs to its token's owner; others get 404. Not for:
firing them (``runs/scheduler.py``) or storing them (``runs/schedules.py``).
"""

from __future__ import annotations

import contextlib
import time
from typing import Annotated, Literal

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.errors import NotFoundError
from plangate.runs.schedules import Schedule, Schedules, Slot, next_slot, parse_every
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._formulas import checked_plan
from plangate.server.schemas import FormulaName
from plangate.store import Store

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])


class ScheduleRequest(BaseModel):
    """A new schedule: ``formula`` with ``vars`` at each slot of ``cron`` (in ``timezone``) or ``every``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique among the caller's schedules.")
    formula: FormulaName = Field(description="The formula to run, by name, on the server's search path.")
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    cron: str | None = Field(default=None, description="A five-field cron expression: '0 9 * * MON'.")
    every: str | None = Field(default=None, description="An interval instead: '30s', '5m', '1h30m'.")
    timezone: str = "UTC"
    missed: Literal["skip", "catch_up"] = "skip"
    overlap: Literal["skip", "queue", "allow"] = "skip"


def _view(schedule: Schedule, now: float | None = None) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = schedule.model_dump(mode="json")
    data["next_slot"] = next_slot(schedule, time.time() if now is None else now)
    return data


def _slot(store: Store, slot: Slot) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = slot.model_dump(mode="json")
    status: str | None = None
    if slot.run_id is not None:
        with contextlib.suppress(NotFoundError):  # pruned since (or not stored yet)
            status = store.get_run(slot.run_id).status
    data["run_status"] = status
    return data


@router.get("", response_model=None, summary="List the caller's schedules")
def list_schedules(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """Oldest first, paused ones included; ``next_slot``: when each fires next (null while paused)."""
    return {"items": [_view(s) for s in Schedules(services.store).listed(owner=owner)]}


@router.post("", status_code=201, response_model=None, summary="Add a schedule")
async def add_schedule(
    body: Annotated[ScheduleRequest, Body()], services: ServicesDep, owner: OwnerDep
) -> dict[str, JsonValue]:
    """A bad cron expression, interval, time zone or a name taken is a 422 saying which; so is a formula
    that cannot be found or does not pass check with ``vars`` (``formula-check-failed``, with its issues)."""

    def add() -> Schedule:
        checked_plan(services.engines.formulas.runner, body.formula, body.vars)
        every = parse_every(body.every, "every") if body.every is not None else None
        return Schedules(services.store).add(
            owner,
            body.name,
            body.formula,
            vars=body.vars,
            cron=body.cron,
            every=every,
            timezone=body.timezone,
            missed=body.missed,
            overlap=body.overlap,
        )

    return {"schedule": _view(await run_in_threadpool(add))}


@router.get("/{ref}", response_model=None, summary="A schedule and its latest slots")
def get_schedule(ref: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """``slots``: newest first, each with its state (``fired``, ``skipped``, ``queued``, ``failed``), its run
    (``run_status``: where that run stands; null once pruned) and why."""
    schedules = Schedules(services.store)
    found = schedules.get(ref, owner=owner)
    listed = schedules.slots(found.id, limit=50)
    slots: list[JsonValue] = [_slot(services.store, slot) for slot in listed]
    return {"schedule": _view(found), "slots": slots}


@router.post("/{ref}/pause", response_model=None, summary="Pause a schedule")
def pause_schedule(ref: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """No slot fires until it is resumed."""
    return {"schedule": _view(Schedules(services.store).set_paused(ref, True, owner=owner))}


@router.post("/{ref}/resume", response_model=None, summary="Resume a schedule from now")
def resume_schedule(ref: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The slots while it was paused never run."""
    return {"schedule": _view(Schedules(services.store).set_paused(ref, False, owner=owner))}


@router.delete("/{ref}", status_code=204, summary="Delete a schedule")
def delete_schedule(ref: str, services: ServicesDep, owner: OwnerDep) -> None:
    """The runs it started stay."""
    Schedules(services.store).delete(ref, owner=owner)


__all__ = ["router"]
