"""The spans of one run, made from what its commits stored, so that each is emitted once however many
processes advance the run.

How it stays replay-safe: a span is emitted by the process that commits the event closing it (a tool's
``tool_result``, an interaction's ``interaction_resolved``, the run's ``outcome``), right after that commit,
with its start read from the event that opened it (from the store when another process committed that one);
a model call's span waits for the commit of the step that made the call. Every event is committed once (the
run's lease fences every commit), so every span is emitted once: a process that dies before its commit
emits nothing of that step, and the process that takes over emits the step it commits. Ids derive from the
run: the trace from the id of the run at the top of its parent chain (a formula run and its agent steps are
one trace), each span from the run, its kind and the event sequence or ids it was made from.

For: ``RunTrace`` (``model_call`` buffers a call, ``committed`` turns a commit's events into spans),
``SpanData`` (one finished span, ready to export), ``Tracing`` (what exports them: ``_otel.OtelTracing``).
Not for: setting tracing up (``__init__.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plangate.events import (
    Event,
    InteractionOpenedEvent,
    InteractionResolvedEvent,
    OutcomeEvent,
    RoundEvent,
    StepStateEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.models.errors import redact
from plangate.runs.telemetry import _semconv as sc

if TYPE_CHECKING:
    from plangate.models import ModelRequest, Usage
    from plangate.store import Store

Attributes = dict[str, str | int | float | bool]

_SECRET_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLANGATE_TOKEN")
_CONTENT_LIMIT = 8_000
_STEP_ENDS = frozenset({"complete", "failed", "skipped", "cancelled"})


@dataclass(frozen=True, slots=True)
class SpanData:
    """One finished span: its ids (``trace_id`` 128 bits, ``span_id`` and ``parent_id`` 64), name, times in
    seconds since the epoch, attributes, and whether it ended in error."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start: float
    end: float
    attributes: Attributes
    kind: str = "internal"
    error: str | None = None


class Tracing:
    """Where a process's spans go; ``capture`` says whether message and tool content may be recorded."""

    capture: bool = False

    def export(self, span: SpanData) -> None:
        """Send one finished span."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Flush what is buffered and stop."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call of a step, waiting for the step's commit to become a ``chat`` span."""

    model: str
    purpose: str
    start: float
    end: float
    usage: Usage | None
    failure: str | None = None
    request: ModelRequest | None = None
    output: str | None = None
    parent: tuple[object, ...] | None = None
    """The parts of the id of the span the call belongs under (a step's, a copilot phase's); None: the
    run's own span."""


_UNDER: ContextVar[tuple[str, int] | None] = ContextVar("plangate_span_under", default=None)
"""``(run id, span id)``: the span of that run the runs it starts now belong under (a copilot turn's ``run``
phase, for the formula run it starts), while ``RunTrace.scoped`` holds it."""


def derived_id(bits: int, *parts: object) -> int:
    """A non-zero id of ``bits`` bits derived from ``parts`` (the same parts, the same id, in any process)."""
    digest = hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).digest()
    value = int.from_bytes(digest[: bits // 8], "big")
    return value or 1


@dataclass
class RunTrace:
    """The spans of one run, made after each of its commits (see the module's docstring)."""

    tracing: Tracing
    store: Store
    run_id: str
    kind: str
    name: str
    calls: list[ModelCall] = field(default_factory=list)
    scope: tuple[object, ...] | None = None
    """The id parts of the span a model call made now belongs under when its model names none (the
    copilot phase under way); None: the run's span."""
    under: tuple[str, int] | None = field(default_factory=_UNDER.get)
    """The span of its parent run this run's span belongs under, as the parent said while it started this
    run (``scoped``); None: the parent's run span."""
    _opened: dict[str, Event] = field(default_factory=dict)
    _loaded: bool = False
    _trace_id: int | None = None

    @property
    def capture(self) -> bool:
        """Whether content (messages, tool arguments and results) goes into spans."""
        return self.tracing.capture

    def model_call(self, call: ModelCall) -> None:
        """Keep a finished model call until the commit of its step."""
        self.calls.append(call)

    def committed(self, events: Sequence[Event]) -> None:
        """Emit the spans the commit of ``events`` closed (nothing of a commit that stored no event: its
        model calls wait for the next)."""
        if not events:
            return
        self._remember(events)
        rounds = [event for event in events if isinstance(event, RoundEvent)]
        for index, call in enumerate(self.calls):
            self._chat(call, (events[0].seq, index), rounds)
        self.calls.clear()
        for event in events:
            if isinstance(event, ToolResultEvent):
                self._tool(event)
            elif isinstance(event, InteractionResolvedEvent):
                self._wait(event)
            elif isinstance(event, StepStateEvent) and event.status in _STEP_ENDS:
                self._step(event)
            elif isinstance(event, OutcomeEvent):
                self._run(event)

    @contextlib.contextmanager
    def scoped(self, parts: tuple[object, ...]) -> Iterator[None]:
        """While the body runs, the model calls made without a span of their own, and the runs this run
        starts, belong under this run's span ``parts`` names (a copilot phase)."""
        outer, self.scope = self.scope, parts
        token = _UNDER.set((self.run_id, self.span_id(*parts)))
        try:
            yield
        finally:
            self.scope = outer
            _UNDER.reset(token)

    def phase(
        self,
        name: str,
        parts: tuple[object, ...],
        start: float,
        end: float,
        attributes: Attributes,
        error: str | None = None,
    ) -> None:
        """Emit a span of the run's own (a copilot turn's phase: a turn runs in one process, so its phases
        are emitted as they end), its id derived from ``parts``, and the model calls made in it under it."""
        span_id = self.span_id("phase", *parts)
        for index, call in enumerate(self.calls):
            self._chat(call, ("phase", *parts, index), ())
        self.calls.clear()
        self._emit(span_id, self.run_span, name, start, end, attributes=attributes, error=error)

    # -- ids and the past ---------------------------------------------------------------------------------

    @property
    def trace_id(self) -> int:
        """The run's trace: derived from the run at the top of its parent chain."""
        if self._trace_id is None:
            self._trace_id = derived_id(128, "trace", self.store.root_of(self.run_id))
        return self._trace_id

    def span_id(self, *parts: object) -> int:
        """The id of one of this run's spans."""
        return derived_id(64, self.run_id, *parts)

    @property
    def run_span(self) -> int:
        """The id of the run's own span, the parent of the others."""
        return self.span_id("run")

    def _remember(self, events: Sequence[Event]) -> None:
        for event in events:
            key = _opening_key(event)
            if key is not None:
                self._opened.setdefault(key, event)

    def _opening(self, key: str) -> Event | None:
        """The event that opened ``key``: from this process's commits, else read once from the store (it was
        committed by another process, before this one took the run)."""
        if key not in self._opened and not self._loaded:
            self._loaded = True
            for event in self.store.events(self.run_id):
                found = _opening_key(event)
                if found is not None:
                    self._opened.setdefault(found, event)
        return self._opened.get(key)

    # -- the spans ----------------------------------------------------------------------------------------

    def _emit(
        self,
        span_id: int,
        parent: int | None,
        name: str,
        start: float,
        end: float,
        *,
        attributes: Attributes,
        kind: str = "internal",
        error: str | None = None,
    ) -> None:
        """Export one of the run's spans (the run's id among its attributes)."""
        shown: Attributes = {sc.RUN_ID: self.run_id, **attributes}
        span = SpanData(self.trace_id, span_id, parent, name, start, max(end, start), shown, kind, error)
        self.tracing.export(span)

    def _chat(self, call: ModelCall, key: tuple[object, ...], rounds: Sequence[RoundEvent]) -> None:
        model = call.model.split(":", 1)
        provider, name = (model[0], model[1]) if len(model) == 2 else ("plangate", model[0])
        attributes: Attributes = {
            sc.OPERATION: sc.CHAT,
            sc.provider_key(): provider,
            sc.REQUEST_MODEL: name,
            sc.PURPOSE: call.purpose,
        }
        if call.usage is not None:
            attributes[sc.INPUT_TOKENS] = call.usage.input_tokens
            attributes[sc.OUTPUT_TOKENS] = call.usage.output_tokens
            if call.usage.cached_input_tokens is not None:
                attributes[sc.CACHE_READ_TOKENS] = call.usage.cached_input_tokens
            if call.usage.cache_write_tokens is not None:
                attributes[sc.CACHE_WRITE_TOKENS] = call.usage.cache_write_tokens
        finish = "error" if call.failure is not None else "stop"
        attributes[sc.FINISH_REASONS] = finish
        if call.purpose == "execute" and rounds:
            round_event = rounds[0]
            attributes[sc.ROUND] = round_event.round
            action = round_event.decision.get("action")
            if isinstance(action, str):
                attributes[sc.DECISION_ACTION] = action
            verdict = round_event.validation.get("verdict", round_event.validation.get("ok"))
            if isinstance(verdict, str | bool | int):
                attributes[sc.VALIDATION] = str(verdict)
        if self.capture and call.request is not None:
            messages = [{"role": m.role, "content": m.content} for m in call.request.messages]
            attributes[sc.INPUT_MESSAGES] = content(messages)
            attributes[sc.OUTPUT_MESSAGES] = content([{"role": "assistant", "content": call.output or ""}])
        self._emit(
            self.span_id("chat", *key),
            self.run_span if call.parent is None else self.span_id(*call.parent),
            f"{sc.CHAT} {name}",
            call.start,
            call.end,
            attributes=attributes,
            kind="client",
            error=call.failure,
        )

    def _tool(self, event: ToolResultEvent) -> None:
        opening = self._opening(f"tool:{event.call_id}")
        start = opening.at if opening is not None else event.at
        attributes: Attributes = {
            sc.OPERATION: sc.EXECUTE_TOOL,
            sc.TOOL_NAME: event.tool,
            sc.TOOL_CALL_ID: event.call_id,
            sc.TOOL_TYPE: "function",
            sc.TOOL_STATUS: event.status,
            sc.TOOL_SUCCESS: event.success,
            sc.TOOL_EFFECT_SUMMARY: event.summary,
        }
        if self.capture:
            if isinstance(opening, ToolCallEvent):
                attributes[sc.TOOL_ARGUMENTS] = content(opening.arguments)
            attributes[sc.TOOL_RESULT] = content(event.observation)
        self._emit(
            self.span_id("tool", event.call_id),
            self.run_span,
            f"{sc.EXECUTE_TOOL} {event.tool}",
            start,
            event.at,
            attributes=attributes,
            error=None if event.success else (event.error_code or event.status),
        )

    def _wait(self, event: InteractionResolvedEvent) -> None:
        opening = self._opening(f"wait:{event.interaction_id}")
        attributes: Attributes = {
            sc.WAIT_KIND: event.kind,
            sc.WAIT_RESOLUTION: event.resolution,
            sc.CONSENT_AT: event.at,
        }
        if event.by is not None:
            attributes[sc.CONSENT_BY] = event.by
        if isinstance(opening, InteractionOpenedEvent) and opening.tool is not None:
            attributes[sc.TOOL_NAME] = opening.tool.name
            attributes[sc.CONSENT_DIGEST] = opening.tool.arguments_digest
        self._emit(
            self.span_id("wait", event.interaction_id),
            self.run_span,
            f"{sc.WAIT_SPAN} {event.kind}",
            opening.at if opening is not None else event.at,
            event.at,
            attributes=attributes,
        )

    def _step(self, event: StepStateEvent) -> None:
        opening = self._opening(f"step:{event.step_id}:{event.attempt}")
        self._emit(
            self.span_id("step", event.step_id, event.attempt),
            self.run_span,
            f"{sc.STEP_SPAN} {event.step_id}",
            opening.at if opening is not None else event.at,
            event.at,
            attributes={sc.STEP_ID: event.step_id, sc.STEP_STATUS: event.status},
            error=event.reason if event.status == "failed" else None,
        )

    def _run(self, event: OutcomeEvent) -> None:
        run = self.store.get_run(self.run_id)
        operation = sc.INVOKE_WORKFLOW if self.kind == "formula" else sc.INVOKE_AGENT
        attributes: Attributes = {
            sc.OPERATION: operation,
            sc.AGENT_NAME: self.name,
            sc.RUN_KIND: self.kind,
            sc.OUTCOME_STATUS: event.status,
            sc.OUTCOME_CODE: event.code,
        }
        if self.kind != "formula":
            attributes[sc.AGENT_ID] = self.run_id
        usage = event.usage or {}
        for key, name in ((sc.INPUT_TOKENS, "input_tokens"), (sc.OUTPUT_TOKENS, "output_tokens")):
            value = usage.get(name)
            if isinstance(value, int):
                attributes[key] = value
        cost = usage.get("cost")
        if isinstance(cost, int | float):
            attributes[sc.COST] = float(cost)
        parent = None if run.parent_run_id is None else derived_id(64, run.parent_run_id, "run")
        if self.under is not None and self.under[0] == run.parent_run_id:
            parent = self.under[1]  # the span its parent started it in (a copilot turn's run phase)
        self._emit(
            self.run_span,
            parent,
            f"{operation} {self.name}",
            run.created_at,
            event.at,
            attributes=attributes,
            error=None if event.status in ("completed", "cancelled") else event.code,
        )


def _opening_key(event: Event) -> str | None:
    if isinstance(event, ToolCallEvent):
        return f"tool:{event.call_id}"
    if isinstance(event, InteractionOpenedEvent):
        return f"wait:{event.interaction_id}"
    if isinstance(event, StepStateEvent) and event.status == "running":
        return f"step:{event.step_id}:{event.attempt}"
    return None


def content(value: object) -> str:
    """Content recorded on opt-in: JSON, secrets redacted (the model providers' keys and anything shaped like
    one), cut to a bounded length."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    secrets = [os.environ.get(name) for name in _SECRET_VARIABLES]
    return redact(text, secrets)[:_CONTENT_LIMIT]


__all__ = ["ModelCall", "RunTrace", "SpanData", "Tracing", "content", "derived_id"]
