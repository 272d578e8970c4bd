"""Calling the model for each phase and reading its answer on the model's wire (json or tagged).

For: building the ``ModelRequest`` of a purpose (``route``, ``plan``, ``execute``, ``deliver``) with the
right response schema, draining the stream, and turning the text into a ``Decision`` / ``PlanOutput`` /
``RouteDecision`` or one ``DecisionParseError`` whose message becomes a correction. A provider failure is
returned, not raised, so the loop decides what it means in each phase. Not for: prompts (``_context.py``)
or judging a decision (``_validate.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import JsonValue

from plangate.decisions import (
    PLAIN_REPLY_WINDOW,
    Decision,
    DecisionParseError,
    PlanOutput,
    RouteDecision,
    decision_json_schema,
    decode_decision,
    decode_plan,
    parse_decision_json,
    parse_plan_json,
    parse_tagged,
    plan_json_schema,
    route_json_schema,
    try_parse_route,
)
from plangate.events import TokenUsage
from plangate.models import (
    Message,
    Model,
    ModelRequest,
    ReasoningDelta,
    ResponseSchema,
    TextDelta,
    Usage,
    Wire,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Answer:
    """What a model call produced: its text and reasoning, or the exception the provider raised, and the
    tokens the provider counted (None when it reported none)."""

    text: str = ""
    reasoning: str = ""
    failure: Exception | None = None
    usage: Usage | None = None


def token_usage(usage: Usage | None) -> TokenUsage | None:
    """A call's usage as a ``round`` event records it."""
    if usage is None:
        return None
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


@functools.lru_cache(maxsize=64)
def decision_schema(tool_names: tuple[str, ...], actions: tuple[str, ...] | None = None) -> ResponseSchema:
    """The decision schema with ``tool_call.name`` limited to the active tools and, when given, the action
    to ``actions`` (cached per tool set and actions)."""
    return ResponseSchema("decision", decision_json_schema(tool_names, actions))


@functools.lru_cache(maxsize=1)
def plan_schema() -> ResponseSchema:
    """The plan output's schema."""
    return ResponseSchema("plan", plan_json_schema())


@functools.lru_cache(maxsize=1)
def route_schema() -> ResponseSchema:
    """The route output's schema."""
    return ResponseSchema("route", route_json_schema())


async def call(
    model: Model,
    purpose: str,
    messages: Sequence[Message],
    *,
    schema: ResponseSchema | None = None,
    tool_names: Sequence[str] | None = None,
    tool_parameters: Mapping[str, Mapping[str, JsonValue]] | None = None,
    argument_sources: Sequence[str] = (),
    output_schema: Mapping[str, JsonValue] | None = None,
) -> Answer:
    """Run one model call; any exception of the provider is returned in ``failure``.

    Cancellation and exceptions outside ``Exception`` still propagate: they stop the process, not the round.
    """
    request = ModelRequest(
        purpose,
        messages,
        response_schema=schema,
        wire=model.wire,
        tool_names=tool_names,
        tool_parameters=tool_parameters,
        argument_sources=argument_sources,
        output_schema=output_schema,
    )
    text: list[str] = []
    reasoning: list[str] = []
    usage: Usage | None = None
    try:
        async for chunk in model.stream(request):
            if isinstance(chunk, TextDelta):
                text.append(chunk.text)
            elif isinstance(chunk, ReasoningDelta):
                reasoning.append(chunk.text)
            elif isinstance(chunk, Usage):
                usage = chunk if usage is None else usage + chunk
    except Exception as exc:
        # A model is outside the runtime's control: whatever it raises is an outcome, never a crash.
        return Answer("".join(text), "".join(reasoning), exc, usage)
    return Answer("".join(text), "".join(reasoning), usage=usage)


def _tagged(text: str, decode: Callable[[object], T], what: str) -> tuple[T, str]:
    result = parse_tagged(text, decode)
    if result.decision is None:
        raise DecisionParseError(
            what,
            f"expected <decision>{{…}}</decision> within the first {PLAIN_REPLY_WINDOW} characters; "
            "found a plain reply",
        )
    return result.decision, result.reply


def read_decision(text: str, wire: Wire) -> tuple[Decision, str]:
    """The decision in an execute answer, and the visible text that followed it (tagged wire).

    Raises:
        DecisionParseError: the answer holds no usable decision.
    """
    if wire == "tagged":
        return _tagged(text, decode_decision, "decision")
    return parse_decision_json(text), ""


def read_plan(text: str, wire: Wire) -> PlanOutput:
    """The plan output in a planning answer.

    Raises:
        DecisionParseError: the answer holds no usable plan output.
    """
    if wire == "tagged":
        return _tagged(text, decode_plan, "plan")[0]
    return parse_plan_json(text)


def read_route(text: str) -> RouteDecision | None:
    """The route in a routing answer, or None when it cannot be read (the run then plans)."""
    return try_parse_route(text)


__all__ = [
    "Answer",
    "call",
    "decision_schema",
    "plan_schema",
    "read_decision",
    "read_plan",
    "read_route",
    "route_schema",
    "token_usage",
]
