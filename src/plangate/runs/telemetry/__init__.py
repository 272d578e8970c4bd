"""Traces of runs on OpenTelemetry: off by default, turned on the standard way, and free when off.

For: ``tracing()`` (the process's tracing, or None when it is off: ``OTEL_TRACES_EXPORTER`` — ``otlp``,
``console`` or ``none`` — wins over ``[telemetry] traces`` of ``plangate.toml``, given to ``configure``),
``configure`` (what the command line calls with the file's settings; tests pass an exporter of their own)
and ``run_trace`` (the spans of one run, ``_spans.RunTrace``, or None when tracing is off). Nothing of
OpenTelemetry is imported until tracing is on (``_otel.py`` does it), so a process without the ``otel``
extra, or with tracing off, pays one ``None`` check per commit. Not for: the spans themselves
(``_spans.py``) or their attribute names (``_semconv.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plangate.config import TelemetryConfig
from plangate.errors import ConfigError
from plangate.runs.telemetry import _semconv as semconv
from plangate.runs.telemetry import metrics
from plangate.runs.telemetry._spans import RunTrace, SpanData, Tracing

if TYPE_CHECKING:
    from plangate.events import Event
    from plangate.models import Model
    from plangate.store import Store

EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_UNSET = object()
_current: object = _UNSET


def tracing() -> Tracing | None:
    """This process's tracing, set up from the environment on first use unless ``configure`` ran; None when
    tracing is off."""
    global _current
    if _current is _UNSET:
        _current = _build(TelemetryConfig(), None)
    return _current if isinstance(_current, Tracing) else None


def configure(settings: TelemetryConfig | None = None, *, exporter: object | None = None) -> Tracing | None:
    """Set up this process's tracing from ``settings`` (``[telemetry]``), the ``OTEL_*`` variables winning.

    Args:
        settings: the file's settings (defaults: off).
        exporter: a span exporter to send every span to at once (tests: the SDK's in-memory exporter),
            whatever the settings say.

    Raises:
        ConfigError: tracing is asked for and the ``otel`` extra is missing, or an exporter is unknown.
    """
    global _current
    previous = _current
    _current = _build(settings or TelemetryConfig(), exporter)
    if isinstance(previous, Tracing) and previous is not _current:
        previous.shutdown()
    return _current if isinstance(_current, Tracing) else None


def reset() -> None:
    """Forget the process's tracing (flushing it): the next ``tracing()`` reads the environment again."""
    global _current
    if isinstance(_current, Tracing):
        _current.shutdown()
    _current = _UNSET


def run_trace(store: Store, run_id: str, kind: str, name: str) -> RunTrace | None:
    """The spans of run ``run_id`` (a ``kind`` run called ``name``), or None when tracing is off."""
    current = tracing()
    if current is None:
        return None
    return RunTrace(current, store, run_id, kind, name)


def committed(trace: RunTrace | None, kind: str, events: Sequence[Event], store: Store) -> None:
    """After a commit of a ``kind`` run: its spans (``trace``, None when tracing is off) and its metrics
    (when enabled) from the ``events`` it stored."""
    if trace is not None:
        trace.committed(events)
    counted = metrics.current()
    if counted is not None:
        counted.committed(kind, events, store)


def observed(model: Model, trace: RunTrace | None, parent: tuple[object, ...] | None = None) -> Model:
    """``model``, each call counted by the metrics and kept in ``trace`` as a ``chat`` span under the span
    ``parent`` names (None: the run's); ``model`` itself when metrics and tracing are both off."""
    if trace is None and metrics.current() is None:
        return model
    from plangate.runs.telemetry._observed import ObservedModel

    return ObservedModel(model, trace, parent)


def _build(settings: TelemetryConfig, exporter: object | None) -> Tracing | None:
    chosen = os.environ.get(EXPORTER_ENV, "").strip().lower() or settings.traces
    capture = _capture(settings)
    if exporter is None and chosen in ("", "none"):
        return None
    if exporter is None and chosen not in ("otlp", "console"):
        raise ConfigError(f"${EXPORTER_ENV}: expected otlp, console or none; found {chosen!r}")
    try:
        from plangate.runs.telemetry._otel import OtelTracing
    except ImportError:
        raise ConfigError(
            f'tracing ({EXPORTER_ENV}={chosen}) needs the otel extra: pip install "plangate[otel]"'
        ) from None
    return OtelTracing.create(settings, chosen, exporter, capture=capture)


def _capture(settings: TelemetryConfig) -> bool:
    value = os.environ.get(CAPTURE_ENV)
    if value is None:
        return settings.capture_content
    return value.strip().lower() in ("1", "true", "yes", "on")


__all__ = [
    "RunTrace",
    "SpanData",
    "Tracing",
    "committed",
    "configure",
    "metrics",
    "observed",
    "reset",
    "run_trace",
    "semconv",
    "tracing",
]
