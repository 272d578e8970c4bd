"""The scheduler every server runs: each schedule's due slots claimed, and their runs started, exactly once.

For: ``Scheduler`` (one pass over the active schedules: ``run_pass``; the background task: ``forever``).
Every server on a store runs one and none is special: a slot's run starts only in the process that claimed
the slot's row (``runs/schedules.py``), so servers that race start one run per slot. Not for: storing
schedules (``runs/schedules.py``) or advancing the runs (the ``Runs`` facade: here, or on the workers).

A pass looks at the slots after a schedule's ``last_slot`` up to now. A slot at most ``grace`` seconds old is
on time and fires; older ones were missed while nothing ran: with ``missed = "catch_up"`` the latest of them
fires once (its input says how many slots it stands for), with ``skip`` they are passed over. Before a slot
fires, the run of the schedule's previous slot is looked at: still going, the slot is skipped, queued (it
fires once that run ended; one slot waits at most) or fired anyway, as the schedule's ``overlap`` says. A
slot claimed by a process that died before it stored the run is given its run by the next pass (the run's
id was named in the claim, so it is made once).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets

from pydantic import JsonValue

from plangate._offloop import off_loop
from plangate.errors import ConfigError, NotFoundError, UserError
from plangate.formulas.engine import FormulaEngine
from plangate.runs import Runs
from plangate.runs.schedules import Schedule, Schedules, due_slots
from plangate.store import TERMINAL_STATUSES, Store

logger = logging.getLogger(__name__)

TICK = 0.5
"""Seconds between two passes."""
GRACE = 10.0
"""Seconds a slot may be late and still fire as on time (a busy server's pass lags)."""
ORPHAN_AFTER = 10.0
"""Seconds after which a claimed slot without its run is given one by another pass."""


class Scheduler:
    """Fires the schedules of ``store`` through ``formulas`` (which stores each run) and ``runs`` (which
    advances it).

    Args:
        tick: seconds between two passes.
        grace: how late a slot may fire and still be on time (``GRACE``).
    """

    def __init__(
        self,
        store: Store,
        formulas: FormulaEngine,
        runs: Runs,
        *,
        tick: float = TICK,
        grace: float | None = None,
    ) -> None:
        self.store = store
        self.formulas = formulas
        self.runs = runs
        self.tick = tick
        self.grace = GRACE if grace is None else grace
        self._schedules: Schedules | None = None

    async def forever(self) -> None:
        """Pass after pass, every ``tick`` seconds, advancing each run a pass started; a failed pass is
        logged and the next one tries again."""
        while True:
            try:
                started = await off_loop(self.run_pass)
                for run_id in started:
                    await self.runs.advance(run_id)
            except ConfigError as exc:  # a store without a database (a test double): nothing to schedule
                logger.info("no schedules on this store: %s", exc)
                return
            except Exception as exc:
                logger.warning("schedule pass failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self.tick)

    def run_pass(self) -> list[str]:
        """One pass over the active schedules; the ids of the runs it stored."""
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
            self.formulas.create(
                schedule.formula, schedule.owner, vars=schedule.vars, run_id=run_id, schedule=origin
            )
        except ConfigError as exc:
            if "exists already" in str(exc):
                return []  # another pass gave the orphaned slot its run first
            return self._failed(schedules, schedule, slot, exc)
        except UserError as exc:
            return self._failed(schedules, schedule, slot, exc)
        return [run_id]

    def _failed(self, schedules: Schedules, schedule: Schedule, slot: float, exc: Exception) -> list[str]:
        logger.warning(
            "schedule %s (%s): the slot's run could not start: %s", schedule.name, schedule.id, exc
        )
        schedules.settle(schedule.id, slot, "fired", "failed", str(exc))
        return []


def _note(missed: int) -> str:
    return f"caught up {missed} missed slot(s)" if missed else ""


__all__ = ["GRACE", "ORPHAN_AFTER", "TICK", "Scheduler"]
