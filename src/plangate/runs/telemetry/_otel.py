"""Spans handed to the OpenTelemetry SDK with the ids plangate derived, and exported the standard way.

For: ``OtelTracing``, imported only once tracing is on: a ``TracerProvider`` of its own (the application's
global provider is left alone) whose id generator gives each span the id ``_spans`` derived for it, with the
OTLP exporter (HTTP/protobuf; ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and
``OTEL_EXPORTER_OTLP_HEADERS`` as the exporter reads them, else ``[telemetry] endpoint``) behind a batch
processor flushed when the process exits, or the console exporter, or a given exporter (tests) behind a
simple one. ``OTEL_SERVICE_NAME`` names the service (else ``[telemetry] service_name``).
"""

from __future__ import annotations

import atexit
import contextvars
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from plangate.config import TelemetryConfig
from plangate.errors import ConfigError
from plangate.runs.telemetry._spans import SpanData, Tracing

_NEXT: contextvars.ContextVar[tuple[int, int]] = contextvars.ContextVar("plangate_span_ids")
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}


class _DerivedIds(IdGenerator):
    """Gives the span being started the ids set for it (``_NEXT``)."""

    def generate_span_id(self) -> int:
        return _NEXT.get()[1]

    def generate_trace_id(self) -> int:
        return _NEXT.get()[0]


class OtelTracing(Tracing):
    """Spans through the SDK, with derived ids."""

    def __init__(self, provider: TracerProvider, *, capture: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("plangate")
        self.capture = capture
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls, settings: TelemetryConfig, chosen: str, exporter: object | None, *, capture: bool
    ) -> OtelTracing:
        """The tracing ``chosen`` (``otlp``, ``console``) asks for, or one sending to ``exporter``."""
        name = os.environ.get("OTEL_SERVICE_NAME") or settings.service_name
        provider = TracerProvider(
            resource=Resource.create({"service.name": name}), id_generator=_DerivedIds()
        )
        if exporter is not None:
            if not isinstance(exporter, SpanExporter):
                raise ConfigError(
                    f"telemetry exporter: expected a SpanExporter; found {type(exporter).__name__}"
                )
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        elif chosen == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(_otlp(settings)))
        tracing = cls(provider, capture=capture)
        atexit.register(tracing.shutdown)
        return tracing

    def export(self, span: SpanData) -> None:
        """Start and end the span at its own times, with its derived ids and its parent."""
        context = None
        if span.parent_id is not None:
            parent = SpanContext(span.trace_id, span.parent_id, is_remote=True, trace_flags=TraceFlags(1))
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        with self._lock:
            token = _NEXT.set((span.trace_id, span.span_id))
            try:
                started = self.tracer.start_span(
                    span.name,
                    context=context,
                    kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
                    attributes=span.attributes,
                    start_time=int(span.start * 1e9),
                )
            finally:
                _NEXT.reset(token)
        if span.error is not None:
            started.set_status(Status(StatusCode.ERROR, span.error))
        started.end(end_time=int(span.end * 1e9))

    def shutdown(self) -> None:
        """Flush the spans still buffered, then stop the exporter."""
        self.provider.shutdown()


def _otlp(settings: TelemetryConfig) -> SpanExporter:
    if settings.protocol == "grpc" or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").startswith("grpc"):
        raise ConfigError(
            "OTLP over gRPC is not bundled: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (Phoenix, Jaeger, "
            "Tempo and the OpenTelemetry Collector all take it)"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    env = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    if settings.endpoint is not None and not any(os.environ.get(name) for name in env):
        return OTLPSpanExporter(endpoint=settings.endpoint.rstrip("/") + "/v1/traces")
    return OTLPSpanExporter()


__all__ = ["OtelTracing"]
