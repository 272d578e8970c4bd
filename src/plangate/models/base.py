"""The one model protocol every provider implements, the request it takes and the chunks it streams.

What it is for: ``Model`` (stream a chat), ``ModelRequest`` and its parts, the ``ModelChunk`` union
(``TextDelta`` · ``ReasoningDelta`` · ``Usage``), and ``complete`` to drain a stream. What it is not for:
talking to a provider (``openai``, ``anthropic``, ``scripted``), choosing one (``registry``) or reading a
decision out of the text (``plangate.decisions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import JsonValue

Wire = Literal["json", "tagged"]
"""How a structured output travels: JSON enforced by the provider, or ``<decision>{…}</decision>`` text."""

Role = Literal["system", "user", "assistant"]

Purpose = str
"""Why the runtime calls the model: ``route``, ``plan``, ``execute``, ``deliver``, ``compact``, ``review``,
``generate``, … (open: providers may use it for logs and limits, never for behaviour)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    Attributes:
        role: ``system``, ``user`` or ``assistant``.
        content: the text.
        cache_point: the conversation up to the end of this message is meant to stay the same in the calls
            that follow (the runtime's prompts grow at their end): providers that cache prompt prefixes on
            request put a cache breakpoint here (Anthropic ``cache_control``); the others ignore it.
        blocks: for a message joined from several parts, the parts (``content`` is them joined by a blank
            line), each with its own ``cache_point``: a provider that caches by blocks sends them apart, so
            that the end of a part the last call cached is a block boundary again. Empty: one part.
    """

    role: Role
    content: str
    cache_point: bool = field(default=False, kw_only=True)
    blocks: tuple[tuple[str, bool], ...] = field(default=(), kw_only=True)


@dataclass(frozen=True, slots=True)
class ResponseSchema:
    """A JSON schema the output must follow, with the name providers require for it.

    Attributes:
        name: a short identifier (``decision``, ``plan``, ``route``); letters, digits, ``_`` and ``-``.
        schema: the JSON schema (``plangate.decisions.decision_json_schema()`` and its siblings).
    """

    name: str
    schema: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model.

    Attributes:
        purpose: why the runtime calls (``route``, ``plan``, ``execute``, ``deliver``, ...).
        messages: the conversation, system messages first.
        response_schema: the structure the output must have, if any.
        wire: with a ``response_schema``: ``json`` asks the provider to enforce JSON (structured output,
            JSON mode, a grammar); ``tagged`` sends the text as it is, the prompt having asked for the tagged
            format. Without a schema the output is plain text either way.
        tool_names: the tools the model may name, for providers that build their own constraints (a grammar);
            the others rely on ``response_schema``, which already lists them.
        tool_parameters: the parameter schemas of those tools, by name, for providers that also constrain a
            call's arguments (a grammar); the others show them in the prompt.
        argument_sources: the text a tool call may copy its arguments from (the user's words, the tools'
            observations, a person's answers), for providers that constrain arguments to what was written
            (the local model's grammar); the others ignore it.
        max_tokens: the most tokens to generate, or the provider's default.
        temperature: sampling temperature, or the provider's default.
        output_schema: the JSON schema a ``done`` decision's answer must follow (an agent's
            ``output_type``), which the prompt states too; for test doubles that build such an answer.
    """

    purpose: Purpose
    messages: Sequence[Message]
    response_schema: ResponseSchema | None = None
    wire: Wire = "json"
    tool_names: Sequence[str] | None = None
    tool_parameters: Mapping[str, Mapping[str, JsonValue]] | None = None
    argument_sources: Sequence[str] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    output_schema: Mapping[str, JsonValue] | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the visible output."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning, where the provider exposes it (never shown as the answer)."""

    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens counted by the provider. Several ``Usage`` chunks in one stream add up.

    Attributes:
        input_tokens: prompt tokens, those read from a cache included (whatever the provider's own split).
        output_tokens: generated tokens.
        cached_input_tokens: prompt tokens read from the provider's prefix cache (OpenAI
            ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``, the local model's
            reused context) instead of processed again; None when the provider reports no such count.
        cache_write_tokens: prompt tokens written to the cache for later calls (Anthropic
            ``cache_creation_input_tokens``), or None.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    kind: Literal["usage"] = "usage"
    cached_input_tokens: int | None = field(default=None, kw_only=True)
    cache_write_tokens: int | None = field(default=None, kw_only=True)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cached_input_tokens=_plus(self.cached_input_tokens, other.cached_input_tokens),
            cache_write_tokens=_plus(self.cache_write_tokens, other.cache_write_tokens),
        )


def _plus(left: int | None, right: int | None) -> int | None:
    """A sum of counts where None means "not reported" (and stays so only when neither side reported)."""
    if left is None and right is None:
        return None
    return (left or 0) + (right or 0)


ModelChunk = TextDelta | ReasoningDelta | Usage
"""What a model stream yields; tell them apart by type or by ``kind``."""


@runtime_checkable
class Model(Protocol):
    """A chat model that streams.

    Attributes:
        name: ``provider:model`` (``openai:gpt-4o-mini``); what the store records to rebuild the model.
        wire: the wire format this model prefers for structured outputs.
    """

    @property
    def name(self) -> str: ...

    @property
    def wire(self) -> Wire: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the answer to ``request`` (implementations are ``async def`` generators).

        Raises:
            plangate.errors.RunError: the provider failed (a subclass from ``plangate.models.errors``).
        """
        ...


class ModelWrapper:
    """The base of a model seen through a wrapper (a meter, a cap, a prefilled reply): its ``name`` and
    ``wire`` are the inner model's, so the store records the model, never the wrapper. Subclasses set
    ``inner`` and define ``stream``."""

    inner: Model

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def wire(self) -> Wire:
        return self.inner.wire


def wants_compact_prompts(model: object) -> bool:
    """Whether ``model`` asks for the prompts of small models: an attribute ``compact_prompts`` that is True.

    A model with a few hundred million parameters (the local default) follows short rules, a worked example
    and a catalogue of tool signatures better than the full rules and JSON schemas a large model reads; the
    agent runtime lays out its prompts for it that way (its compact prompt style: ``plangate.agent._style``
    asks this once per run). Models without the attribute get the full prompts.
    """
    return getattr(model, "compact_prompts", False) is True


@dataclass(frozen=True, slots=True)
class Completion:
    """A drained stream.

    Attributes:
        text: the visible output, joined.
        reasoning: the reasoning, joined (``""`` when none).
        usage: the summed usage, or ``None`` when the provider reported none.
    """

    text: str
    reasoning: str = ""
    usage: Usage | None = None


async def complete(model: Model, request: ModelRequest) -> Completion:
    """Run ``request`` on ``model`` and collect the whole answer.

    Args:
        model: any ``Model``.
        request: the request.

    Returns:
        The joined text and reasoning, and the summed usage.
    """
    text: list[str] = []
    reasoning: list[str] = []
    usage: Usage | None = None
    async for chunk in model.stream(request):
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
        elif isinstance(chunk, ReasoningDelta):
            reasoning.append(chunk.text)
        else:
            usage = chunk if usage is None else usage + chunk
    return Completion("".join(text), "".join(reasoning), usage)


__all__ = [
    "Completion",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelWrapper",
    "Purpose",
    "ReasoningDelta",
    "ResponseSchema",
    "Role",
    "TextDelta",
    "Usage",
    "Wire",
    "complete",
    "wants_compact_prompts",
]
