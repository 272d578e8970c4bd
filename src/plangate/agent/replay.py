"""Replaying a finished agent run offline: its recorded model outputs, tool results and answers.

For: ``replay``, which re-executes a stored run in a store of its own (in memory): the model is a
``RecordedModel`` that returns, call by call and per purpose, what the run's events recorded (a round's raw
text when it was kept, else its decision); every tool is the tool of this process (its schema, its effect,
its validation) whose function returns the result the run recorded for that call — a write is never called,
its recorded result is played back; a person's answers are the run's own, in order. The replay's events
are then aligned with the record round by round (``plangate.runs.diff``) and the first point where the
runtime now behaves differently is reported (a validation that now rejects a call, a tool that now refuses
its arguments, a decision it now takes differently). No network, no API key: a production failure becomes
an offline reproduction, and a runtime change is tested against real history. Not for: formula runs (their
steps call tools, not a model) or changing the stored run (it is only read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from plangate.agent._state import read_input
from plangate.agent.agent import Agent
from plangate.errors import ConfigError, InteractionError
from plangate.events import (
    Event,
    OutcomeEvent,
    PlanEvent,
    RoundEvent,
    SpeakEvent,
    StatusEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.interactions import parse_resolution
from plangate.models.base import ModelChunk, ModelRequest, TextDelta, Usage, Wire
from plangate.models.errors import ScriptExhaustedError
from plangate.runs.contract import Replayed
from plangate.runs.diff import diff_events
from plangate.store import TERMINAL_STATUSES, RunRecord, SQLiteStore, Store
from plangate.tools import Tool, ToolRegistry, ToolResult

_MAX_ANSWERS = 1000


@dataclass
class Record:
    """What a stored run recorded, by what the replay needs: model outputs per purpose, tool results per
    tool (in call order), and the people's resolutions (in order)."""

    outputs: dict[str, list[str]] = field(default_factory=dict)
    results: dict[str, list[ToolResult]] = field(default_factory=dict)
    resolutions: list[Mapping[str, object]] = field(default_factory=list)


class RecordedModel:
    """A model that plays back a run's recorded outputs, per purpose, in order (no network).

    Raises (from ``stream``):
        ScriptExhaustedError: the replay asks for more calls of a purpose than the run made.
    """

    def __init__(self, name: str, wire: Wire, outputs: Mapping[str, list[str]]) -> None:
        self._name = name
        self._wire: Wire = wire
        self._outputs = {purpose: list(texts) for purpose, texts in outputs.items()}

    @property
    def name(self) -> str:
        """The recorded run's model, by name."""
        return self._name

    @property
    def wire(self) -> Wire:
        """The wire the recorded outputs are written on."""
        return self._wire

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The next recorded output of the request's purpose."""
        queue = self._outputs.get(request.purpose, [])
        if not queue:
            raise ScriptExhaustedError(
                f"the recorded run made no more {request.purpose} calls: the replay asks for one it did not"
            )
        yield TextDelta(queue.pop(0))
        yield Usage(input_tokens=0, output_tokens=0)


def record_of(events: list[Event], resolutions: list[Mapping[str, object]]) -> Record:
    """What ``events`` recorded: the model's outputs, the tools' results, and (given) the resolutions."""
    record = Record(resolutions=list(resolutions))
    calls: dict[str, str] = {}
    previous: Event | None = None
    for event in events:
        if isinstance(event, StatusEvent) and event.stage == "route" and event.code in ("execute", "plan"):
            record.outputs.setdefault("route", []).append(json.dumps({"route": event.code}))
        elif isinstance(event, PlanEvent):
            steps = [{"content": s.content, "done_when": s.done_when or None} for s in event.steps]
            record.outputs.setdefault("plan", []).append(
                json.dumps({"action": "plan_done", "plan_steps": steps})
            )
        elif isinstance(event, RoundEvent):
            text = event.raw if event.raw is not None else json.dumps(event.decision)
            record.outputs.setdefault("execute", []).append(text)
        elif isinstance(event, ToolCallEvent):
            calls[event.call_id] = event.tool
        elif isinstance(event, ToolResultEvent) and event.call_id in calls:
            record.results.setdefault(calls.pop(event.call_id), []).append(result_of(event))
        elif (
            isinstance(event, OutcomeEvent)
            and event.status == "completed"
            and isinstance(previous, SpeakEvent)
        ):
            record.outputs.setdefault("deliver", []).append(previous.text)
        previous = event
    return record


def result_of(event: ToolResultEvent) -> ToolResult:
    """The tool result a ``tool_result`` event records."""
    return ToolResult(
        status=event.status,
        success=event.success,
        observation=event.observation
        if isinstance(event.observation, str)
        else json.dumps(event.observation),
        summary=event.summary,
        error_code=event.error_code,
        error_message=event.error_message,
    )


def recorded_tools(
    registry: ToolRegistry, names: list[str], results: Mapping[str, list[ToolResult]]
) -> ToolRegistry:
    """The run's tools as this process has them (schema, effect, validation), each returning the results the
    run recorded for it, in order; a call the record does not have fails ``not_recorded``.

    Raises:
        ConfigError: this process lacks one of the run's tools (its schema is needed to replay it).
    """
    require_tools(registry, names)
    return ToolRegistry([_played_back(registry.get(name), list(results.get(name, []))) for name in names])


def require_tools(registry: ToolRegistry, names: list[str]) -> None:
    """Refuse a replay in a process that lacks one of the run's tools ``names``.

    Raises:
        ConfigError: one of them is not in ``registry`` (its schema is needed to replay it).
    """
    missing = [name for name in names if name not in registry]
    if missing:
        raise ConfigError(f"replay: the run's tools {', '.join(map(repr, missing))} are not offered here")


def _played_back(tool: Tool, queue: list[ToolResult]) -> Tool:
    def recorded(**_: object) -> ToolResult:
        if not queue:
            why = f"the recorded run has no further result of {tool.name}: the replay made a call it did not"
            return ToolResult.failed("not_recorded", why, observation=why)
        return queue.pop(0)

    return dataclasses.replace(tool, function=recorded, reconcile=None, timeout=None, idempotent=True)


def replay(store: Store, run_id: str, tools: ToolRegistry, *, owner: str | None = None) -> Replayed:
    """Replay the finished agent run ``run_id`` offline and compare it with its record (``replay_async``,
    for callers without an event loop).

    Raises:
        NotFoundError: no such run (of ``owner``).
        InteractionError: it is not an agent run, or it has not ended.
        ConfigError: this process lacks one of its tools.
    """
    return asyncio.run(replay_async(store, store.get_run(run_id, owner=owner), tools))


async def replay_async(store: Store, run: RunRecord, tools: ToolRegistry) -> Replayed:
    """Replay the finished agent run ``run`` offline and compare it with its record.

    Raises:
        InteractionError: it is not an agent run, or it has not ended.
        ConfigError: this process lacks one of its tools.
    """
    if run.kind != "agent":
        raise InteractionError(f"run {run.id!r} is a {run.kind} run; only agent runs are replayed here")
    if run.status not in TERMINAL_STATUSES:
        raise InteractionError(f"run {run.id!r} is {run.status}: only a run that ended is replayed")
    prompt, config = read_input(run.id, run.input)
    events = store.events(run.id)
    answered = sorted(
        (item for item in store.list_interactions(run_id=run.id) if item.resolution is not None),
        key=lambda item: item.created_at,
    )
    record = record_of(events, [item.resolution or {} for item in answered])
    model = RecordedModel(config.model, wire_of(events), record.outputs)
    sandbox = SQLiteStore(":memory:")
    agent = Agent(
        model=model,
        tools=recorded_tools(tools, config.tools, record.results),
        store=sandbox,
        max_rounds=config.max_rounds,
        mode=config.mode,
        always_execute=config.always_execute,
        plan_consent=config.plan_consent,
        system_prompt=config.system_prompt,
        context_budget=config.context_budget,
        context_reserve=config.context_reserve,
        done_when=config.done_when,
        owner=run.owner,
    )
    try:
        result = await agent.run_async(prompt)
        answers = list(record.resolutions)
        for _ in range(_MAX_ANSWERS):
            if result.interaction is None or not answers:
                break
            resolution = parse_resolution(answers.pop(0))
            result = await agent.resume_async(result.run_id, result.interaction.id, resolution)
        diff = diff_events("round", (run.id, events), (result.run_id, sandbox.events(result.run_id)))
        return Replayed(run.id, result.run_id, result.status, diff)
    finally:
        sandbox.close()


def wire_of(events: list[Event]) -> Wire:
    """The wire a run's recorded round texts are written on (``tagged`` when they are tags)."""
    rounds = (event.raw or "" for event in events if isinstance(event, RoundEvent))
    return "tagged" if any(text.lstrip().startswith("<") for text in rounds) else "json"


__all__ = [
    "Record",
    "RecordedModel",
    "Replayed",
    "record_of",
    "recorded_tools",
    "replay",
    "replay_async",
    "require_tools",
    "result_of",
    "wire_of",
]
