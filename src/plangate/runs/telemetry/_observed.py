"""A model seen by telemetry: each call timed and counted (metrics) and kept as a ``chat`` span (traces).

For: ``ObservedModel``, what ``telemetry.observed`` wraps a model in for the calls that do not go through an
agent run's meter (a formula's ``llm`` steps, a copilot turn's generation and review), only when metrics or
tracing is on. Its span waits in the run's ``RunTrace`` for the commit of the work that made the call, under
the span ``parent`` names (a step's, a copilot phase's). Not for: an agent run's calls (``agent/_tokens.py``
meters those, with the run's tally and the prompt budget).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from plangate.models import Model, ModelChunk, ModelRequest, ModelWrapper, TextDelta, Usage
from plangate.runs.telemetry import metrics
from plangate.runs.telemetry._spans import ModelCall, RunTrace


class ObservedModel(ModelWrapper):
    """``inner``, with each call's latency and tokens counted and its span kept in ``trace``."""

    def __init__(self, inner: Model, trace: RunTrace | None, parent: tuple[object, ...] | None) -> None:
        self.inner = inner
        self.trace = trace
        self.parent = parent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The inner model's stream, unchanged."""
        trace, counted_by = self.trace, metrics.current()
        parent = self.parent if self.parent is not None or trace is None else trace.scope
        started = time.time()
        text: list[str] | None = [] if trace is not None and trace.capture else None
        usage: Usage | None = None
        failure: str | None = None
        try:
            async for chunk in self.inner.stream(request):
                if isinstance(chunk, Usage):
                    usage = chunk if usage is None else usage + chunk
                elif text is not None and isinstance(chunk, TextDelta):
                    text.append(chunk.text)
                yield chunk
        except Exception as exc:
            failure = type(exc).__name__
            raise
        finally:
            ended = time.time()
            if counted_by is not None:
                counted_by.model_call(self.inner.name, request.purpose, ended - started, usage)
            if trace is not None:
                name = self.inner.name
                call = ModelCall(name, request.purpose, started, ended, usage, failure, parent=parent)
                if text is not None:
                    call = replace(call, request=request, output="".join(text))
                trace.model_call(call)


__all__ = ["ObservedModel"]
