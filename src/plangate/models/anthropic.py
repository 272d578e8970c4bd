"""The ``anthropic`` provider: streaming messages through the official ``anthropic`` SDK.

Leading system messages become the separate ``system`` prompt; a system message later in the conversation
(a correction, a state block) is sent as a user turn, since the Messages API has no other place for it, and
consecutive turns of one role are joined. Messages the runtime marks as the end of a stable prefix
(``Message.cache_point``: the system rules and tool catalogue, the conversation before the state block) get
a ``cache_control`` breakpoint, so Anthropic's prompt cache serves that prefix to the next round; the
cached token counts it reports come back in ``Usage``. Structured output travels on the tagged wire by
default; with ``wire="json"`` (or a request asking for json) the schema becomes a tool the model is forced
to call, and the tool's streamed input is the JSON text. Thinking deltas become reasoning deltas.

Requests time out after ``timeout`` seconds without a byte from the server (default
``$PLANGATE_MODEL_TIMEOUT``, else 120 s) and a timeout is not retried; connection failures, 429, 529 and
5xx are retried ``max_retries`` times by the provider (the SDK's own retries are off, see ``_requests``).

What it is for: one provider behind the ``Model`` protocol. What it is not for: prompts or the provider's
own tool use (the decision protocol carries tool calls). API keys never appear in errors or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from plangate.errors import ConfigError
from plangate.models._requests import MODEL_TIMEOUT_ENV, client_for_request, request_timeout, retry_pause
from plangate.models.base import (
    Message,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    Usage,
    Wire,
)
from plangate.models.errors import (
    ModelProviderError,
    ModelTimeoutError,
    ModelUnavailableError,
    redact,
    server_detail,
    status_error,
)

try:
    import anthropic
    from anthropic import AsyncAnthropic, omit
    from anthropic.types import (
        InputJSONDelta,
        RawContentBlockDeltaEvent,
        RawMessageDeltaEvent,
        RawMessageStartEvent,
        ThinkingDelta,
    )
    from anthropic.types import TextDelta as AnthropicTextDelta
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    message = 'the anthropic provider needs the Anthropic SDK: pip install "plangate[anthropic]"'
    raise ConfigError(message) from exc

if TYPE_CHECKING:
    import httpx2
    from anthropic import AsyncStream
    from anthropic.types import (
        CacheControlEphemeralParam,
        MessageParam,
        RawMessageStreamEvent,
        TextBlockParam,
        ToolChoiceParam,
        ToolParam,
    )

DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires a limit; this one applies when a request sets none."""


def split_messages(messages: Sequence[Message]) -> tuple[str | list[TextBlockParam], list[MessageParam]]:
    """Split a conversation into the system prompt and the Messages API's turns.

    Leading system messages form the system prompt; later ones are sent as user turns; consecutive turns of
    one role are joined with a blank line. A message (or one of its ``blocks``) marked ``cache_point`` ends
    with a ``cache_control`` breakpoint (Anthropic caches the prompt up to it, and a later call that starts
    the same way reads it back): a turn with a breakpoint is then sent as one text block per part, so that
    the breakpoint falls exactly there and the parts an earlier call cached end on block boundaries again
    (where Anthropic looks for earlier cache entries). Without any cache point the system prompt and every
    turn are plain strings, joined.
    """
    system: list[_Block] = []
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    leading = True
    for message in messages:
        blocks = list(message.blocks) or [(message.content, message.cache_point)]
        if message.role == "system" and leading:
            system.extend(blocks)
            continue
        leading = False
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    params: list[MessageParam] = []
    for role, blocks in turns:
        if role == "assistant":
            params.append({"role": "assistant", "content": _content(blocks)})
        else:
            params.append({"role": "user", "content": _content(blocks)})
    return _content(system), params


# The text of one message, and whether a cache breakpoint ends it.
_Block = tuple[str, bool]
_BREAKPOINT: CacheControlEphemeralParam = {"type": "ephemeral"}


def _content(blocks: list[_Block]) -> str | list[TextBlockParam]:
    """Joined text, or one text block per part when a breakpoint ends one of them."""
    if not any(cached for _, cached in blocks):
        return "\n\n".join(text for text, _ in blocks)
    content: list[TextBlockParam] = []
    for text, cached in blocks:
        if cached:
            content.append({"type": "text", "text": text, "cache_control": _BREAKPOINT})
        else:
            content.append({"type": "text", "text": text})
    return content


class AnthropicModel:
    """A Claude model served through the Anthropic Messages API.

    Args:
        model: the model id (``claude-sonnet-4-5``).
        api_key: the key; default ``ANTHROPIC_API_KEY``.
        base_url: the server; default ``ANTHROPIC_BASE_URL``, else Anthropic's.
        wire: the preferred wire for structured output: ``tagged`` (default) or ``json`` (a forced tool).
        http_client: the HTTP client the SDK should use (an ``httpx2.AsyncClient`` for current SDKs, an
            ``httpx.AsyncClient`` for SDKs built on httpx); tests pass one with a ``MockTransport``.
        max_retries: retries of a request after a connection failure, 429, 529 or 5xx (not after a
            timeout).
        timeout: seconds a request may wait for the server's next bytes; default ``$PLANGATE_MODEL_TIMEOUT``,
            else 120.
        max_tokens: the generation limit when a request sets none.
        name: the spec the store records to rebuild this model; default ``anthropic:<model>``.

    Raises:
        ConfigError: no API key.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        wire: Wire = "tagged",
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        name: str | None = None,
    ) -> None:
        if not model.strip():
            raise ConfigError("AnthropicModel model: expected a model id such as 'claude-sonnet-4-5', got ''")
        if wire not in ("json", "tagged"):
            raise ConfigError(f"AnthropicModel wire: expected 'json' or 'tagged', got {wire!r}")
        self.model = model
        self.name = name or f"anthropic:{model}"
        self.wire: Wire = wire
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"{self.name} max_retries: expected an integer >= 0, got {max_retries!r}")
        self.max_retries = max_retries
        self.timeout = request_timeout(timeout, where=f"{self.name} timeout")
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigError(f"{self.name} needs an API key: set ANTHROPIC_API_KEY or pass api_key=")
        self._secret = key
        self.max_tokens = max_tokens
        self._options: dict[str, Any] = {
            "api_key": key,
            "base_url": self.base_url,
            "max_retries": 0,
            "timeout": self.timeout,
        }
        # A client given by the caller is theirs to close (``aclose``); without one, each request has a
        # client of its own, closed with it: connections never outlive the event loop they were made on.
        self._client = AsyncAnthropic(**self._options, http_client=http_client) if http_client else None

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r}, base_url={self.base_url!r}, wire={self.wire!r})"

    async def aclose(self) -> None:
        """Close the HTTP client given to the model, if any (the model's own close with each request)."""
        if self._client is not None:
            await self._client.close()

    def _connection(self) -> contextlib.AbstractAsyncContextManager[AsyncAnthropic]:
        return client_for_request(self._client, lambda: AsyncAnthropic(**self._options))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream a message.

        Raises:
            ModelProviderError: the server refused or failed (a subclass names which way).
        """
        system, turns = split_messages(request.messages)
        tools: list[ToolParam] | None = None
        tool_choice: ToolChoiceParam | None = None
        schema = request.response_schema
        if schema is not None and request.wire == "json":
            tools = [
                {
                    "name": schema.name,
                    "description": f"Write the {schema.name} as this tool's input.",
                    "input_schema": dict(schema.schema),
                }
            ]
            tool_choice = {"type": "tool", "name": schema.name}
        fields: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.max_tokens,
            "messages": turns,
            "system": system if system else omit,
            "tools": tools if tools is not None else omit,
            "tool_choice": tool_choice if tool_choice is not None else omit,
            # Sent raw: not every SDK version declares the parameter, every API version reads it.
            "extra_body": {"temperature": request.temperature} if request.temperature is not None else None,
        }
        async with self._connection() as client:
            stream = await self._open(client, fields)
            try:
                usage = _UsageCounter()
                async with stream:
                    async for event in stream:
                        chunk = usage.read(event)
                        if chunk is not None:
                            yield chunk
                if usage.seen:
                    yield usage.total()
            except anthropic.AnthropicError as exc:
                raise self._error(exc) from None

    async def _open(
        self, client: AsyncAnthropic, fields: Mapping[str, Any]
    ) -> AsyncStream[RawMessageStreamEvent]:
        """Send the request (retrying what may pass later) and return the open stream."""
        tries = 0
        while True:
            headers: Mapping[str, str] | None = None
            try:
                stream: AsyncStream[RawMessageStreamEvent] = await client.messages.create(
                    **fields, stream=True
                )
                return stream
            except anthropic.APIStatusError as exc:
                error, headers = self._error(exc), exc.response.headers
            except anthropic.AnthropicError as exc:
                error = self._error(exc)
            if not error.retryable or tries >= self.max_retries or isinstance(error, ModelTimeoutError):
                raise error from None
            await asyncio.sleep(retry_pause(tries, headers))
            tries += 1

    def _error(self, exc: anthropic.AnthropicError) -> ModelProviderError:
        """The provider error for an SDK exception, with nothing secret in it."""
        if isinstance(exc, anthropic.APIStatusError):
            detail = server_detail(exc.body, exc.message)
            return status_error(self.name, exc.status_code, detail, secrets=[self._secret])
        if isinstance(exc, anthropic.APITimeoutError):
            where = self.base_url or "the Anthropic API"
            return ModelTimeoutError(
                f"{self.name}: no answer from {where} within {self.timeout:g} s (the timeout: ?timeout= in "
                f"the model spec, {MODEL_TIMEOUT_ENV} or model_timeout in plangate.toml)",
                provider=self.name,
            )
        if isinstance(exc, anthropic.APIConnectionError):
            where = self.base_url or "the Anthropic API"
            return ModelUnavailableError(f"{self.name}: could not connect to {where}", provider=self.name)
        detail = server_detail(getattr(exc, "body", None), str(exc))
        return ModelProviderError(f"{self.name}: {redact(detail, [self._secret])}", provider=self.name)


class _UsageCounter:
    """Turns stream events into chunks, keeping the token counts that arrive in pieces.

    Anthropic counts a prompt in three parts: ``input_tokens`` (not cached), ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``; ``Usage.input_tokens`` is their sum, the whole prompt, as other
    providers count it (the runtime's context meter compares it with the prompt it sent).
    """

    def __init__(self) -> None:
        self.seen = False
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read: int | None = None
        self.cache_write: int | None = None

    def read(self, event: RawMessageStreamEvent) -> ModelChunk | None:
        if isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if isinstance(delta, AnthropicTextDelta):
                return TextDelta(delta.text) if delta.text else None
            if isinstance(delta, InputJSONDelta):
                return TextDelta(delta.partial_json) if delta.partial_json else None
            if isinstance(delta, ThinkingDelta):
                return ReasoningDelta(delta.thinking) if delta.thinking else None
        elif isinstance(event, RawMessageStartEvent):
            self.seen = True
            usage = event.message.usage
            self.input_tokens = usage.input_tokens
            self.output_tokens = usage.output_tokens
            self._cache(usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
        elif isinstance(event, RawMessageDeltaEvent):
            # message_delta carries cumulative counts, not increments.
            self.seen = True
            self.output_tokens = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                self.input_tokens = event.usage.input_tokens
            self._cache(event.usage.cache_read_input_tokens, event.usage.cache_creation_input_tokens)
        return None

    def _cache(self, read: int | None, write: int | None) -> None:
        if read is not None:
            self.cache_read = read
        if write is not None:
            self.cache_write = write

    def total(self) -> Usage:
        prompt = self.input_tokens + (self.cache_read or 0) + (self.cache_write or 0)
        read, write = self.cache_read, self.cache_write
        return Usage(prompt, self.output_tokens, cached_input_tokens=read, cache_write_tokens=write)


__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel", "split_messages"]
