"""Prometheus metrics of the runs a process advances, counted from what its commits stored.

For: ``enable`` (what the server and ``plangate worker --metrics-port`` call: the collectors, in a registry
of their own, built on first call; ``prometheus-client`` is imported then and only then), ``current`` (the
enabled metrics, or None: the runtime's hooks cost one ``None`` check when metrics are off), and
``Metrics.committed`` / ``Metrics.model_call``, which the engines call after each commit and each model call.
A run's events are committed once, by the process that holds its lease, so a process's counters count each
event once, and the sum over processes counts it once too. Not for: serving the text (``server/routes``,
``cli/_worker.py``).

Metrics: ``plangate_runs_started_total{kind}``, ``plangate_runs_ended_total{kind,status,code}``,
``plangate_rounds_total{kind}``, ``plangate_tool_calls_total{tool,status}``,
``plangate_consents_total{kind,resolution}`` (writes by their consent path: approved, edited, rejected),
``plangate_wait_seconds{kind}`` (time waiting on a person), ``plangate_model_seconds{model,purpose}``,
``plangate_model_tokens_total{model,type}``, ``plangate_lease_takeovers_total`` (runs this process took
over from a holder that stopped), ``plangate_queue_depth`` (runs enqueued for the workers and taken by none
yet, read from the broker at each scrape, where a queue is given: ``watch_queue``, ``serve_pool``) and, on
the server, ``plangate_sse_subscribers``.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from plangate.errors import ConfigError
from plangate.events import (
    Event,
    InteractionResolvedEvent,
    OutcomeEvent,
    RoundEvent,
    StatusEvent,
    ToolResultEvent,
)
from plangate.store import run_lease

if TYPE_CHECKING:
    from plangate.models import Usage
    from plangate.store import Store

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_WAIT_BUCKETS = (1.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0, 7 * 24 * 3600.0)
_lock = threading.Lock()
_current: Metrics | None = None


class Metrics:
    """The collectors of one process, in their own registry (``registry``)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry()
        into: dict[str, Any] = {"registry": registry}
        self.runs_started = Counter("plangate_runs_started", "Runs started", ["kind"], **into)
        self.runs_ended = Counter("plangate_runs_ended", "Runs ended", ["kind", "status", "code"], **into)
        self.rounds = Counter("plangate_rounds", "Execute rounds", ["kind"], **into)
        self.tool_calls = Counter("plangate_tool_calls", "Tool calls", ["tool", "status"], **into)
        self.consents = Counter("plangate_consents", "People's answers", ["kind", "resolution"], **into)
        self.wait = Histogram(
            "plangate_wait_seconds", "Time waiting on a person", ["kind"], buckets=_WAIT_BUCKETS, **into
        )
        self.model_seconds = Histogram("plangate_model_seconds", "Model calls", ["model", "purpose"], **into)
        self.model_tokens = Counter("plangate_model_tokens", "Model tokens", ["model", "type"], **into)
        self.sse_subscribers = Gauge("plangate_sse_subscribers", "Open event streams", **into)
        self.takeovers = Counter(
            "plangate_lease_takeovers", "Runs taken over from a holder that stopped", **into
        )
        run_lease.on_takeover = lambda _run_id: self.takeovers.inc()
        self.queue_depth = QueueDepth(None)
        registry.register(self.queue_depth)

    def watch_queue(self, read: Callable[[], int | None]) -> None:
        """Report ``plangate_queue_depth`` from ``read()`` (the broker's count) at each scrape."""
        self.queue_depth.read = read

    def committed(self, kind: str, events: Sequence[Event], store: Store | None = None) -> None:
        """Count what one commit of a ``kind`` run stored."""
        for event in events:
            if isinstance(event, StatusEvent) and event.code == "started":
                self.runs_started.labels(kind).inc()
            elif isinstance(event, OutcomeEvent):
                self.runs_ended.labels(kind, event.status, event.code).inc()
            elif isinstance(event, RoundEvent):
                self.rounds.labels(kind).inc()
            elif isinstance(event, ToolResultEvent):
                self.tool_calls.labels(event.tool, event.status).inc()
            elif isinstance(event, InteractionResolvedEvent):
                self.consents.labels(event.kind, event.resolution).inc()
                self._waited(event, store)

    def _waited(self, event: InteractionResolvedEvent, store: Store | None) -> None:
        if store is None:
            return
        try:
            opened = store.get_interaction(event.interaction_id).created_at
        except Exception:  # a metric never fails a run
            return
        self.wait.labels(event.kind).observe(max(event.at - opened, 0.0))

    def model_call(self, model: str, purpose: str, seconds: float, usage: Usage | None) -> None:
        """Count one model call: its latency, and its tokens when the provider counted them."""
        self.model_seconds.labels(model, purpose).observe(seconds)
        if usage is not None:
            self.model_tokens.labels(model, "input").inc(usage.input_tokens)
            self.model_tokens.labels(model, "output").inc(usage.output_tokens)
            if usage.cached_input_tokens:
                self.model_tokens.labels(model, "cached").inc(usage.cached_input_tokens)

    def gauge(self, gauge: Any, read: Callable[[], float]) -> None:
        """Have ``gauge`` read ``read()`` at each scrape."""
        gauge.set_function(read)

    def text(self) -> bytes:
        """The metrics in Prometheus's text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class QueueDepth:
    """``plangate_queue_depth``: runs enqueued for the workers that none took yet, read at each scrape (NaN
    when the broker cannot say)."""

    def __init__(self, read: Callable[[], int | None] | None) -> None:
        self.read = read

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        if self.read is None:  # no queue in this process
            return
        depth = self.read()
        yield GaugeMetricFamily(
            "plangate_queue_depth",
            "Runs enqueued for the workers and taken by none yet",
            value=math.nan if depth is None else float(depth),
        )


def enable() -> Metrics:
    """This process's metrics, made on first call.

    Raises:
        ConfigError: the ``metrics`` extra (``prometheus-client``) is not installed.
    """
    global _current
    with _lock:
        if _current is None:
            try:
                _current = Metrics()
            except ImportError:
                raise ConfigError('metrics need the metrics extra: pip install "plangate[metrics]"') from None
        return _current


def serve_pool(
    port: int, host: str = "127.0.0.1", queue_depth: Callable[[], int | None] | None = None
) -> None:
    """Serve on ``host:port`` the metrics of this process's pool processes (a Celery worker's): each counts
    into files under ``$PROMETHEUS_MULTIPROC_DIR`` (made here when unset), and ``/metrics`` adds them up,
    with ``plangate_queue_depth`` read by ``queue_depth`` at each scrape when given.

    Must run before ``prometheus-client`` is first imported, so that the pool processes forked afterwards
    count in that mode.

    Raises:
        ConfigError: the ``metrics`` extra is missing, or the port cannot be bound.
    """
    folder = os.environ.get(MULTIPROC_ENV) or tempfile.mkdtemp(prefix="plangate-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector
    except ImportError:
        raise ConfigError('metrics need the metrics extra: pip install "plangate[metrics]"') from None
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    if queue_depth is not None:
        registry.register(QueueDepth(queue_depth))
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror})") from None


def pooled() -> bool:
    """Whether this process counts for a pool's ``/metrics`` (``serve_pool`` ran in its parent)."""
    return bool(os.environ.get(MULTIPROC_ENV))


def current() -> Metrics | None:
    """The enabled metrics, or None (metrics off)."""
    return _current


def timer() -> float:
    """A monotonic clock reading, for a model call's latency."""
    return time.monotonic()


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

__all__ = ["CONTENT_TYPE", "Metrics", "current", "enable", "pooled", "serve_pool", "timer"]
