"""``/v1/schedules``: the caller's schedules (formula runs on a cron expression or an interval).

For: listing, adding, pausing, resuming and deleting the caller's schedules, and a schedule's latest slots
(which run each started, or why none). Every schedule belongs to its token's owner; others get 404. Not for:
firing them (``server/_schedules.py``) or storing them (``runs/schedules.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.runs.schedules import Schedule, Schedules, parse_every
from plangate.server._deps import OwnerDep, ServicesDep

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])


class ScheduleRequest(BaseModel):
    """A new schedule: ``formula`` with ``vars`` at each slot of ``cron`` (in ``timezone``) or ``every``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique among the caller's schedules.")
    formula: str = Field(description="The formula to run, by name, as the server finds it.")
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    cron: str | None = Field(default=None, description="A five-field cron expression: '0 9 * * MON'.")
    every: str | None = Field(default=None, description="An interval instead: '30s', '5m', '1h30m'.")
    timezone: str = "UTC"
    missed: Literal["skip", "catch_up"] = "skip"
    overlap: Literal["skip", "queue", "allow"] = "skip"


def _view(schedule: Schedule) -> dict[str, JsonValue]:
    return schedule.model_dump(mode="json")


@router.get("", response_model=None, summary="List the caller's schedules")
def list_schedules(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """Oldest first, paused ones included."""
    return {"items": [_view(s) for s in Schedules(services.store).listed(owner=owner)]}


@router.post("", status_code=201, response_model=None, summary="Add a schedule")
async def add_schedule(
    body: Annotated[ScheduleRequest, Body()], services: ServicesDep, owner: OwnerDep
) -> dict[str, JsonValue]:
    """A bad cron expression, interval, time zone or a name taken is a 422 saying which."""

    def add() -> Schedule:
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
    and why."""
    schedules = Schedules(services.store)
    found = schedules.get(ref, owner=owner)
    slots: list[JsonValue] = [slot.model_dump(mode="json") for slot in schedules.slots(found.id, limit=50)]
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
