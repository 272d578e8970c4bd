"""The reaper: finds runs that nobody advances and nobody will, and enqueues them again.

For: takeover after a crash without waiting for the broker. A worker killed mid-advance leaves its message
unacknowledged (Redis gives it back only after the visibility timeout, hours later) and its lease in the
store: once the lease expired (or its holder is a process of this machine that is gone), the reaper enqueues
the run and the next worker takes the lease over, within the lease's ttl plus one pass. It also enqueues
runs whose message was lost (a Redis restarted without persistence, a publish that failed): queued or
running runs with no lease, as soon as the queue is empty, else after a grace period (they may still be in
the queue); and, less often, waiting runs their engine says are due (answered while nobody enqueued them). A
sub-run is enqueued (and advanced through its root) only while nobody advances its root; a run waiting for a
slot of its owner's (``runs_at_once``) is not, until it is admitted. A run whose root is
of a kind no worker advances (a copilot turn's runs: the server that took the question ends them) is never
enqueued. Every worker runs one; their duplicates are dropped by the lease. Not for: advancing runs
(``advance.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

from plangate.engines import build
from plangate.errors import ConfigError
from plangate.runs import Engines
from plangate.runs.quotas import Admissions
from plangate.store import TERMINAL_STATUSES, RunRecord, RunStatus, Store
from plangate.store.run_lease import holder_is_gone
from plangate.workers.queue import RunQueue

logger = logging.getLogger("plangate.workers")

_PAGE = 500
#: One pass in this many also looks at waiting runs (answered while no message was sent).
_WAITING_EVERY = 15


class Reaper:
    """Enqueues the runs that need a worker and have none.

    Args:
        store: the shared store.
        queue: where to enqueue them.
        every: seconds between two passes (``run``).
        grace: seconds a queued run without a lease may wait before it is enqueued again while the queue
            still holds messages.
        clock: the time (the store's clock must agree, as it does for leases).
        engines: what says whether a run is due and whether workers advance its kind (default: the
            engines of every kind, which need no tools for that).
    """

    def __init__(
        self,
        store: Store,
        queue: RunQueue,
        *,
        every: float = 2.0,
        grace: float = 60.0,
        clock: Callable[[], float] = time.time,
        engines: Engines | None = None,
    ) -> None:
        self.store = store
        self.engines = engines if engines is not None else build(store).registry
        self.queue = queue
        self.every = every
        self.grace = grace
        self.clock = clock
        self._sent: dict[str, float] = {}  # run id -> when this reaper last enqueued it
        self._passes = 0

    def reap(self) -> list[str]:
        """One pass: enqueue every run that needs it; returns their ids."""
        now = self.clock()
        self._passes += 1
        pending: int | None = None
        asked = False  # the broker is asked how many messages it holds once a pass, only when needed
        sent = []
        statuses: tuple[RunStatus, ...] = ("queued", "running")
        if self._passes % _WAITING_EVERY == 1:
            statuses = (*statuses, "waiting")
        waiting = self._waiting_for_slots()
        for run in self._runs(statuses):
            if run.id in waiting:
                continue  # it waits for a slot of its owner's: the slots' pass starts it (quotas)
            why = self._orphaned(run, now)
            if why is None or (run.parent_run_id is not None and self._root_held(run, now)):
                continue
            if why == "unleased":
                if not asked:
                    pending, asked = self.queue.pending(), True
                if pending != 0 and now - max(run.updated_at, self._sent.get(run.id, 0.0)) < self.grace:
                    continue  # it may be in the queue still
            elif now - self._sent.get(run.id, 0.0) < max(self.grace / 4, 3 * self.every):
                continue  # enqueued a moment ago: a worker may be on its way
            if self.queue.enqueue(run.id):
                self._sent[run.id] = now
                sent.append(run.id)
                logger.info("reaper: enqueued run %s (%s)", run.id, why)
        self._forget(now)
        return sent

    def run(self, stop: threading.Event) -> None:
        """Reap every ``every`` seconds until ``stop`` is set; a failing pass is logged, never fatal."""
        while not stop.wait(self.every):
            try:
                self.reap()
            except Exception as exc:  # a store or broker that is down: the next pass tries again
                logger.warning("reaper: pass failed: %s: %s", type(exc).__name__, exc)

    def _waiting_for_slots(self) -> set[str]:
        try:
            return Admissions(self.store).waiting()
        except ConfigError:
            return set()  # a store double: no slots

    def _orphaned(self, run: RunRecord, now: float) -> str | None:
        """Why nobody advances ``run`` now (None: someone does, or nobody needs to)."""
        root = run if run.parent_run_id is None else self.store.get_run(self.store.root_of(run.id))
        if root.kind not in self.engines or not self.engines.of(root).remote:
            return None  # no worker advances it: enqueued, it would only be dropped, again and again
        if run.status == "waiting" and not self.engines.of(run).due(run):
            return None
        owner, expires = run.lease_owner, run.lease_expires_at
        if owner is None:
            return "unleased"
        if expires is not None and expires <= now:
            return f"the lease of {owner} expired"
        if holder_is_gone(owner):
            return f"its holder {owner} is gone"
        return None

    def _root_held(self, run: RunRecord, now: float) -> bool:
        """Whether the root of a sub-run is advanced by someone (who advances the sub-run with it)."""
        if run.parent_run_id is not None:
            run = self.store.get_run(self.store.root_of(run.id))
        return self._orphaned(run, now) is None and run.status not in ("waiting", *TERMINAL_STATUSES)

    def _runs(self, statuses: tuple[RunStatus, ...]) -> Iterator[RunRecord]:
        for status in statuses:
            cursor: str | None = None
            while True:
                page = self.store.list_runs(status=status, limit=_PAGE, cursor=cursor)
                yield from page.items
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor

    def _forget(self, now: float) -> None:
        if len(self._sent) > 10_000:
            self._sent = {k: at for k, at in self._sent.items() if now - at < self.grace}


__all__ = ["Reaper"]
