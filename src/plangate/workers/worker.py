"""``run_worker``: a Celery worker that advances plangate runs (what ``plangate worker`` runs).

For: building the worker's Celery application (the one task, ``plangate.advance``), giving each worker
process its own store connections (opened after the fork, never shared with the parent), and running the
background threads in the worker's main process. Not for: what advancing does (``advance.py``) or which
runs are orphaned (``reaper.py``).

Each task runs one advance to completion in the worker process that took it, on that process's one event
loop (made once: not a loop and a thread pool made and torn down for every message); the pool is
Celery's default (prefork), so a crash of one process loses only its own run's work in flight, which its
lease then hands to another worker. The main process runs the reaper, the schedules, the owners' slots
and webhook deliveries on threads of its own (``_background.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from celery import signals

from plangate.errors import UsageError
from plangate.runs.telemetry import metrics
from plangate.runs.telemetry.logs import JsonFormatter
from plangate.workers._app import ADVANCE_TASK, QUEUE, celery_app
from plangate.workers._background import Background
from plangate.workers.advance import Advancer, WorkerSettings
from plangate.workers.queue import RunQueue

logger = logging.getLogger("plangate.workers")


class _Process:
    """What one worker process holds: its advancer and its event loop (made in the process that uses them)
    and, in the main process, the background threads (the reaper, the schedules and slots, webhook
    deliveries)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self._advancer: Advancer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._background: Background | None = None
        self._main = os.getpid()

    def advancer(self) -> Advancer:
        if self._advancer is None or self._pid != os.getpid():
            # A forked child must not use its parent's connections: it opens its own.
            self._advancer = Advancer(self.settings)
            self._loop = asyncio.new_event_loop()
            if metrics.pooled():
                metrics.enable()  # counted into the files the worker's /metrics adds up
            self._pid = os.getpid()
        return self._advancer

    def advance(self, run_id: str) -> str:
        """Advance the run on this process's event loop; what the advance started and left (a lease's
        renewer being cancelled) is cancelled and awaited, as ``asyncio.run`` would, before it returns."""
        advancer = self.advancer()
        loop = self._loop
        if loop is None:  # made with the advancer: never, unless the process was torn down meanwhile
            raise UsageError("the worker process is stopping: no event loop to advance a run on")
        try:
            return loop.run_until_complete(advancer.advance(run_id))
        finally:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))

    def start_background(self) -> None:
        if self._background is None:
            self._background = Background(self.settings)
            self._background.start()

    def stop(self) -> None:
        if self._background is not None and self._main == os.getpid():
            self._background.stop()
            self._background = None
        if self._advancer is not None and self._pid == os.getpid():
            self._advancer.close()
            if self._loop is not None:
                self._loop.run_until_complete(self._loop.shutdown_default_executor())
                self._loop.close()
                self._loop = None


def build_app(settings: WorkerSettings) -> Any:
    """The worker's Celery application: plangate's delivery settings and the advance task."""
    app = celery_app(
        settings.broker, visibility_timeout=settings.visibility_timeout, transport=dict(settings.transport)
    )
    process = _Process(settings)

    @app.task(name=ADVANCE_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def advance(run_id: str) -> str:
        line = process.advance(run_id)
        logger.info("%s", line)
        return line

    def on_ready(**_: object) -> None:
        process.start_background()

    def on_shutdown(**_: object) -> None:
        process.stop()

    # weak=False: these closures live as long as the app, which nothing else references
    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutdown.connect(on_shutdown, weak=False)
    signals.worker_process_shutdown.connect(on_shutdown, weak=False)
    app.plangate_process = process
    return app


def run_worker(
    settings: WorkerSettings,
    *,
    loglevel: str = "INFO",
    pool: str = "prefork",
    name: str | None = None,
    log_format: str = "text",
    metrics_port: int | None = None,
) -> None:
    """Run a Celery worker on ``settings`` until it is stopped (SIGTERM or Ctrl-C: a warm shutdown, which
    finishes the advances in flight); ``log_format="json"``: one JSON object a line, with the run's id;
    ``metrics_port``: Prometheus metrics of its pool processes on that loopback port."""
    if metrics_port is not None:
        depth = RunQueue(settings.broker, visibility_timeout=settings.visibility_timeout)
        metrics.serve_pool(metrics_port, queue_depth=depth.waiting)
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_app(settings)
    if log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
        app.conf.worker_hijack_root_logger = False  # Celery's lines go through the JSON handler too
    argv = ["worker", f"--loglevel={loglevel}", "-Q", QUEUE, f"--pool={pool}"]
    argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    if settings.concurrency is not None:
        argv.append(f"--concurrency={settings.concurrency}")
    if name is not None:
        argv.append(f"--hostname={name}")
    app.worker_main(argv)


__all__ = ["build_app", "run_worker"]
