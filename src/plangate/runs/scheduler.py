"""The scheduler every server and every worker runs: each schedule's due slots claimed, and their runs
created, exactly once.

For: ``Scheduler``, one pass over the active schedules (``run_pass``), which returns the runs its caller
starts: a server advances them (the ``Runs`` facade), a worker enqueues them. Every process on a store
runs one and none is special: a slot's run is created only in the process that claimed the slot's row
(``runs/schedules.py``), so processes that race create one run per slot. Not for: storing schedules
(``runs/schedules.py``), the loop around the passes (``server/app.py``, ``workers/worker.py``) or
creating a formula run (the ``create`` it is given: ``FormulaEngine.create``).

A pass looks at the slots after a schedule's ``last_slot`` up to now. A slot at most ``grace`` seconds old is
on time and fires; older ones were missed while nothing ran: with ``missed = "catch_up"`` the latest of them
fires once (its input says how many slots it stands for), with ``skip`` they are passed over. Before a slot
fires, the run of the schedule's previous slot is looked at: still going, the slot is skipped, queued (it
fires once that run ended; one slot waits at most) or fired anyway, as the schedule's ``overlap`` says. A
slot claimed by a process that died before it stored the run is given its run by the next pass (the run's
id was named in the claim, so it is made once).

Quotas: a slot whose owner spent its daily budget is skipped, saying so; a slot's run counts against its
owner's ``runs_at_once`` as any other run (past it, it waits ``queued`` and starts when a slot frees).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Mapping
from typing import Protocol

from pydantic import JsonValue

from plangate.errors import ConfigError, NotFoundError, UserError
from plangate.runs.quotas import Admissions, DailyUsage, LimitsOf
from plangate.runs.schedules import Schedule, Schedules, due_slots
from plangate.store import TERMINAL_STATUSES, Store

logger = logging.getLogger(__name__)

TICK = 0.5
"""Seconds between two passes."""
GRACE = 10.0
"""Seconds a slot may be late and still fire as on time (a busy server's pass lags)."""
ORPHAN_AFTER = 10.0
"""Seconds after which a claimed slot without its run is given one by another pass."""


class CreateRun(Protocol):
    """Stores a new formula run (``FormulaEngine.create``), ``queued``; returns its id.

    Raises:
        ConfigError: a run with ``run_id`` exists already.
        UserError: the formula cannot be found, or does not pass check (nothing stored).
    """

    def __call__(
        self,
        formula: str,
        owner: str,
        *,
        vars: Mapping[str, object] | None = None,
        run_id: str | None = None,
        schedule: Mapping[str, object] | None = None,
    ) -> str: ...


class Scheduler:
    """Fires the schedules of ``store``, creating each slot's run with ``create``.

    Args:
        grace: how late a slot may fire and still be on time (``GRACE``).
        limits: each owner's limits (daily budget, runs at once); None: none.
    """

    def __init__(
        self, store: Store, create: CreateRun, *, grace: float | None = None, limits: LimitsOf | None = None
    ) -> None:
        self.store = store
        self.create = create
        self.grace = GRACE if grace is None else grace
        self.limits = limits
        self._schedules: Schedules | None = None

    def run_pass(self) -> list[str]:
        """One pass over the active schedules; the ids of the runs it stored that may start now (the caller
        starts them; a run waiting for a slot of its owner is started when one frees).

        Raises:
            ConfigError: the store offers no database (a test double): it holds no schedules.
        """
        if self._schedules is None:
            self._schedules = Schedules(self.store)
        schedules = self._schedules
        started: list[str] = []
        for schedule in schedules.listed(active=True):
            started.extend(self._schedule(schedules, schedule, schedules.now()))
        return started

    def _schedule(self, schedules: Schedules, schedule: Schedule, now: float) -> list[str]:
        started = self._release_queued(schedules, schedule)
        due = due_slots(schedule, schedule.last_slot, now)
        missed = [slot for slot in due if now - slot > self.grace]
        if missed and schedule.missed == "catch_up":
            started += self._fire(schedules, schedule, missed[-1], len(missed))
        elif missed:
            schedules.pass_over(schedule, missed[-1])
        for slot in due[len(missed) :]:
            started += self._fire(schedules, schedule, slot, 0)
        return started

    def _fire(self, schedules: Schedules, schedule: Schedule, slot: float, missed: int) -> list[str]:
        busy, queued = self._previous(schedules, schedule)
        run_id = "run_" + secrets.token_urlsafe(12)
        over = self._over_budget(schedule.owner)
        if over is not None:
            schedules.claim(schedule, slot, "skipped", None, over)
            return []
        if busy and (schedule.overlap == "skip" or (schedule.overlap == "queue" and queued)):
            why = "one slot waits already" if queued else "the run of an earlier slot was still going"
            schedules.claim(schedule, slot, "skipped", None, why)
            return []
        if busy and schedule.overlap == "queue":
            schedules.claim(schedule, slot, "queued", run_id, "waits for the run of an earlier slot")
            return []
        if not schedules.claim(schedule, slot, "fired", run_id, _note(missed)):
            return []  # another process claimed it first
        return self._start(schedules, schedule, slot, run_id, missed)

    def _previous(self, schedules: Schedules, schedule: Schedule) -> tuple[bool, bool]:
        """Whether the run of the schedule's latest fired slot still goes, and whether a slot is queued; a
        fired slot whose run was never stored (its claimer died) gets it now."""
        queued = bool(schedules.slots(schedule.id, state="queued", limit=1))
        fired = schedules.slots(schedule.id, state="fired", limit=1)
        if not fired or fired[0].run_id is None:
            return False, queued
        last = fired[0]
        try:
            status = self.store.get_run(last.run_id).status  # type: ignore[arg-type]
        except NotFoundError:
            if schedules.now() - last.created_at > ORPHAN_AFTER:
                self._start(schedules, schedule, last.slot, str(last.run_id), 0)
            return True, queued
        return status not in TERMINAL_STATUSES, queued

    def _release_queued(self, schedules: Schedules, schedule: Schedule) -> list[str]:
        waiting = schedules.slots(schedule.id, state="queued", limit=1)
        if not waiting or waiting[0].run_id is None:
            return []
        fired = schedules.slots(schedule.id, state="fired", limit=1)
        if fired and fired[0].run_id is not None:
            try:
                if self.store.get_run(fired[0].run_id).status not in TERMINAL_STATUSES:
                    return []
            except NotFoundError:
                return []
        slot = waiting[0]
        if not schedules.settle(schedule.id, slot.slot, "queued", "fired", "queued behind an earlier run"):
            return []
        return self._start(schedules, schedule, slot.slot, slot.run_id or "", 0)

    def _start(
        self, schedules: Schedules, schedule: Schedule, slot: float, run_id: str, missed: int
    ) -> list[str]:
        origin: dict[str, JsonValue] = {
            "id": schedule.id,
            "name": schedule.name,
            "slot": dt.datetime.fromtimestamp(slot, dt.UTC).isoformat(),
            "missed": missed,
            "missed_policy": schedule.missed,
        }
        try:
            self.create(schedule.formula, schedule.owner, vars=schedule.vars, run_id=run_id, schedule=origin)
        except ConfigError as exc:
            if "exists already" in str(exc):
                return []  # another pass gave the orphaned slot its run first
            return self._failed(schedules, schedule, slot, exc)
        except UserError as exc:
            return self._failed(schedules, schedule, slot, exc)
        at_once = None if self.limits is None else self.limits(schedule.owner).runs_at_once
        if at_once is not None and not Admissions(self.store).enter(run_id, schedule.owner, at_once):
            return []  # it waits for a slot of its owner's
        return [run_id]

    def _over_budget(self, owner: str) -> str | None:
        if self.limits is None:
            return None
        over = DailyUsage(self.store).over_budget(owner, self.limits(owner))
        return None if over is None else over.message(owner)

    def _failed(self, schedules: Schedules, schedule: Schedule, slot: float, exc: Exception) -> list[str]:
        logger.warning(
            "schedule %s (%s): the slot's run could not start: %s", schedule.name, schedule.id, exc
        )
        schedules.settle(schedule.id, slot, "fired", "failed", str(exc))
        return []


def _note(missed: int) -> str:
    return f"caught up {missed} missed slot(s)" if missed else ""


__all__ = ["GRACE", "ORPHAN_AFTER", "TICK", "CreateRun", "Scheduler"]
