"""The work every server and every worker does on a store besides advancing runs: schedules fired, slots of
owners' runs handed out, and the components whose hooks act on runs' commits kept up to date.

For: ``attach`` (the webhooks' outbox and the owners' daily spending brought up to date on a store, so that
the runs this process commits feed them: ``plangate.engines.build`` calls it) and ``Operations``, one pass of
the scheduler (``scheduler.py``) and of the runs-at-once slots (``quotas/admissions.py``), which returns the
runs its caller starts (a server advances them, a worker enqueues them). None of the processes is special:
the store decides which one creates a slot's run and which one starts an admitted run. Not for: the loop
around the passes (``server/app.py``, ``workers/worker.py``) or webhook deliveries (``webhooks/deliver.py``,
on a thread of their own).
"""

from __future__ import annotations

import logging

from plangate.errors import ConfigError
from plangate.runs import quotas, webhooks
from plangate.runs.quotas import Admissions, LimitsOf
from plangate.runs.scheduler import CreateRun, Scheduler
from plangate.store import Store
from plangate.store.repository import database_of

logger = logging.getLogger("plangate.runs")


def attach(store: Store) -> None:
    """Bring the components whose ``on_commit`` hooks act on runs (webhooks, quotas) up to date on
    ``store``: a store opened before their modules were imported would commit runs without them."""
    for component in (webhooks.COMPONENT, quotas.COMPONENT):
        try:
            database_of(store, component)
        except ConfigError:
            return  # a store that offers no database (a test double): no hooks


class Operations:
    """The passes of one process on ``store``.

    Args:
        create: stores a schedule's formula run (``FormulaEngine.create``); None: this process fires no
            schedules.
        limits: each owner's limits.
        grace: how late a slot may fire and still be on time (``scheduler.GRACE``).
    """

    def __init__(
        self,
        store: Store,
        create: CreateRun | None,
        limits: LimitsOf | None = None,
        *,
        grace: float | None = None,
    ) -> None:
        self.store = store
        self.scheduler = None if create is None else Scheduler(store, create, grace=grace, limits=limits)
        self._admissions: Admissions | None = None
        try:
            self._admissions = Admissions(store)
        except ConfigError:
            self._admissions = None  # a store double: no slots to hand out

    def run_pass(self) -> list[str]:
        """Fire the schedules' due slots and hand out free slots; the runs this process must start now."""
        started: list[str] = []
        if self.scheduler is not None:
            try:
                started.extend(self.scheduler.run_pass())
            except ConfigError as exc:  # a store without a database: nothing to schedule
                logger.info("no schedules on this store: %s", exc)
                self.scheduler = None
        if self._admissions is not None:
            started.extend(run_id for run_id in self._admissions.hand_out() if run_id not in started)
        return started


__all__ = ["Operations", "attach"]
