"""What a worker's main process does besides handing messages to its pool: the reaper, the schedules and the
slots of owners' runs, and webhook deliveries, each on a thread of its own.

For: ``Background``, started once the worker is ready and stopped with it. Every worker (and every server)
on a store runs the same passes and none is special: the store gives each slot of a schedule, each run
admitted to a slot and each attempt of a delivery to one process. The runs a pass must start are enqueued
for the pool. Not for: advancing runs (``advance.py``), finding orphaned runs (``reaper.py``), firing or
admitting (``plangate.runs.operations``) or sending (``plangate.runs.webhooks.deliver``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from plangate.engines import build
from plangate.runs.operations import Operations
from plangate.runs.quotas import LimitsOf
from plangate.store import Store, open_store
from plangate.workers.advance import Advancer, WorkerSettings
from plangate.workers.queue import RunQueue
from plangate.workers.reaper import Reaper

logger = logging.getLogger("plangate.workers")


class Background:
    """The threads of a worker's main process, on a store and a queue of their own.

    Args:
        settings: the worker's settings.
    """

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._closers: list[Callable[[], None]] = []

    def start(self) -> None:
        """Start the threads (once)."""
        if self._threads:
            return
        settings = self.settings
        store = open_store(settings.store)
        queue = RunQueue(settings.broker, visibility_timeout=settings.visibility_timeout)
        self._closers += [queue.close, store.close]
        if settings.reap_every > 0:
            reaper = Reaper(store, queue, every=settings.reap_every, grace=settings.unleased_grace)
            self._thread("plangate-reaper", reaper.run)
        if settings.operations_every > 0:
            operations = Operations(
                store, self._create(store), LimitsOf(store, settings.limits), grace=settings.schedule_grace
            )
            self._thread("plangate-operations", lambda stop: _passes(operations, queue, stop, settings))
        if settings.webhooks is not None:
            from plangate.runs.webhooks.deliver import Deliverer

            deliverer = Deliverer(store, settings.webhooks)
            self._closers.insert(0, deliverer.close)
            self._thread("plangate-webhooks", deliverer.forever)

    def stop(self) -> None:
        """Stop the threads and close what they used."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for close in self._closers:
            try:
                close()
            except Exception as exc:  # closing on the way out: say so, go on with the rest
                logger.warning("worker: closing failed: %s: %s", type(exc).__name__, exc)

    def _thread(self, name: str, target: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _create(self, store: Store) -> Callable[..., str] | None:
        """How this worker creates a schedule's run: with its own tools and formulas, as it advances them."""
        if not self.settings.schedules:
            return None
        advancer = Advancer(self.settings, store)
        self._closers.insert(0, lambda: advancer.close_tools())
        engines = build(
            store,
            advancer.tools,
            search_paths=[Path(p) for p in self.settings.paths] or None,
            tool_specs=list(self.settings.tools),
        )
        return engines.formulas.create


def _passes(operations: Operations, queue: RunQueue, stop: threading.Event, settings: WorkerSettings) -> None:
    """Pass after pass until ``stop`` is set, enqueueing the runs each pass starts; a failed pass is logged
    and the next one tries again."""
    while not stop.wait(settings.operations_every):
        try:
            for run_id in operations.run_pass():
                if not queue.enqueue(run_id):
                    logger.warning("could not enqueue run %s; the reaper sends it later", run_id)
        except Exception as exc:  # a store or broker that is down: the next pass tries again
            logger.warning("schedules and slots pass failed: %s: %s", type(exc).__name__, exc)


__all__ = ["Background"]
