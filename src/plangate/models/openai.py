"""The ``openai`` provider: streaming chat completions through the official ``openai`` SDK.

With ``base_url`` it serves any OpenAI-compatible server (vLLM, Ollama, llama.cpp's servers, DeepSeek,
Qwen). Those servers differ in the structured output they accept, so the provider negotiates it, in this
order, stepping down when the server answers an HTTP error that says the format is not supported:

1. ``json_schema``: ``response_format={"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM, Ollama);
2. ``json_object_schema``: ``{"type": "json_object", "schema": {...}}`` (llama-cpp-python's server);
3. ``json_object``: plain JSON mode, the schema written into the system message;
4. ``tagged``: no ``response_format`` at all: the model is asked for ``<decision>{…}</decision>`` (the
   tagged wire of ``plangate.decisions.tagged``) and the JSON inside the tag is what the caller receives.

A refusal is recognised by its status (4xx or 5xx) and a message naming the format (``response_format``,
``json_schema``, ``json_object``, ...); it is never retried. What worked is remembered per base URL for the
life of the process (not on disk: a restarted process asks again, one refused request per step), and a
model built later for that URL starts there; once ``tagged`` is known, new models of that URL prefer the
tagged wire (``wire == "tagged"``), so the runtime's prompts ask for it directly. ``format=`` pins one
format and turns negotiation off: ``OpenAIModel(..., format="json_object")``, the spec
``openai:<model>?format=json_object``, or ``$PLANGATE_OPENAI_FORMAT``.

Requests time out after ``timeout`` seconds without a byte from the server (default
``$PLANGATE_MODEL_TIMEOUT``, else 120 s); a timeout is not retried. Connection failures, 429 and 5xx are
retried ``max_retries`` times by the provider itself (the SDK's own retries are off, so a refused format
never burns them). Usage comes from the final chunk (``stream_options.include_usage``), with the prompt tokens
OpenAI's automatic prefix cache served (``prompt_tokens_details.cached_tokens``); reasoning deltas from
``reasoning_content`` (or ``reasoning``) where the server sends them.

What it is for: one provider behind the ``Model`` protocol. What it is not for: prompts, retries of a bad
decision, or tool calling through the provider's own tools API (the decision protocol carries tool calls).
API keys never appear in errors or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from plangate.decisions.errors import DecisionParseError
from plangate.decisions.schema import is_closed_schema
from plangate.decisions.tagged import parse_tagged
from plangate.errors import ConfigError, Signal
from plangate.models._requests import MODEL_TIMEOUT_ENV, client_for_request, request_timeout, retry_pause
from plangate.models.base import (
    Message,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    ResponseSchema,
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
    import openai
    from openai import AsyncOpenAI, omit
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigError('the openai provider needs the OpenAI SDK: pip install "plangate[openai]"') from exc

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncStream
    from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

logger = logging.getLogger("plangate.models.openai")

StructuredFormat = Literal["json_schema", "json_object_schema", "json_object", "tagged"]
"""How a response schema is asked for; the negotiation tries them in this order."""

FormatChoice = Literal["auto", "json_schema", "json_object_schema", "json_object", "tagged"]
"""``auto`` negotiates; any other value pins that format."""

FORMATS: Final[tuple[StructuredFormat, ...]] = get_args(StructuredFormat)
FORMAT_ENV = "PLANGATE_OPENAI_FORMAT"
"""The environment variable that pins the format of every ``openai`` model that names none."""

OPENAI_BASE_URL = "https://api.openai.com/v1"

# A local OpenAI-compatible server usually needs no key, but the SDK insists on one.
_NO_KEY = "unused"

# What worked, per base URL, for this process. Plain dict operations are atomic under the GIL, and a race
# between two negotiations only means both try once more.
_NEGOTIATED: dict[str, StructuredFormat] = {}

# An error that names the structured-output request (llama-cpp-python: "Input should be 'text' or
# 'json_object'"; OpenAI: "'response_format' of type 'json_schema' is not supported with this model").
_FORMAT_WORDS = re.compile(
    r"response_format|json_schema|json_object|structured output|'text'|\bschema\b", re.IGNORECASE
)


def negotiated_format(base_url: str | None = None) -> StructuredFormat | None:
    """The format that worked for ``base_url`` in this process (OpenAI's API when None), if any yet."""
    return _NEGOTIATED.get(_url_key(base_url))


def forget_negotiated() -> None:
    """Forget every negotiated format (the next request of each server starts again at ``json_schema``)."""
    _NEGOTIATED.clear()


def _url_key(base_url: str | None) -> str:
    return (base_url or OPENAI_BASE_URL).rstrip("/")


def format_choice(value: str | None, *, where: str = "format") -> FormatChoice:
    """``value`` checked as a format choice; None reads ``$PLANGATE_OPENAI_FORMAT`` (default ``auto``).

    Raises:
        ConfigError: not one of ``auto``, ``json_schema``, ``json_object_schema``, ``json_object``,
            ``tagged``.
    """
    if value is None:
        value = os.environ.get(FORMAT_ENV, "").strip() or "auto"
        where = f"{FORMAT_ENV}={value!r}"
    choices: tuple[str, ...] = get_args(FormatChoice)
    for choice in get_args(FormatChoice):
        if value == choice:
            return choice  # type: ignore[no-any-return]
    raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")


class _FormatRefused(Signal):
    """The server refused the structured-output format of a request (internal: negotiation steps down)."""

    def __init__(self, status: int, detail: str, refused_format: StructuredFormat) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.format = refused_format


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One way of sending a request: its format (None: no JSON wanted) and the body fields it adds."""

    format: StructuredFormat | None
    messages: list[ChatCompletionMessageParam]
    response_format: Mapping[str, Any] | None


class OpenAIModel:
    """A chat model served through the OpenAI API or any OpenAI-compatible server.

    Args:
        model: the model id (``gpt-4o-mini``, ``qwen2.5:7b``).
        api_key: the key; default ``OPENAI_API_KEY``. Not needed with a ``base_url`` of a keyless server.
        base_url: the server; default ``OPENAI_BASE_URL``, else OpenAI's.
        format: ``auto`` (negotiate, the default unless ``$PLANGATE_OPENAI_FORMAT`` says otherwise) or the
            one format to use: ``json_schema``, ``json_object_schema``, ``json_object`` or ``tagged``.
        structured: the older switch: ``False`` means the server has no schema support, the same as
            ``format="json_object"`` (JSON mode, with the schema in the system message); ``True`` or None
            change nothing.
        http_client: the HTTP client the SDK should use (an ``httpx2.AsyncClient`` for current SDKs, an
            ``httpx.AsyncClient`` for SDKs built on httpx); tests pass one with a ``MockTransport``.
        max_retries: retries of a request after a connection failure, 429 or 5xx (not after a timeout,
            nor after a refused format).
        timeout: seconds a request may wait for the server's next bytes; default ``$PLANGATE_MODEL_TIMEOUT``,
            else 120.
        max_tokens_param: the request field that carries ``max_tokens`` (OpenAI's reasoning models need
            ``max_completion_tokens``; most compatible servers read ``max_tokens``).
        name: the spec the store records to rebuild this model; default ``openai:<model>``.

    Raises:
        ConfigError: no API key and no ``base_url``, or an option out of range.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        format: FormatChoice | None = None,
        structured: bool | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        name: str | None = None,
    ) -> None:
        if not model.strip():
            raise ConfigError("OpenAIModel model: expected a model id such as 'gpt-4o-mini', got ''")
        self.model = model
        self.name = name or f"openai:{model}"
        choice = format_choice(format, where=f"{self.name} format") if format is not None else None
        if structured is False:
            if choice not in (None, "json_object"):
                raise ConfigError(f"{self.name}: structured=False means format='json_object', not {choice!r}")
            choice = "json_object"
        self.format_choice: FormatChoice = choice if choice is not None else format_choice(None)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"{self.name} max_retries: expected an integer >= 0, got {max_retries!r}")
        self.max_retries = max_retries
        self.timeout = request_timeout(timeout, where=f"{self.name} timeout")
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url is None:
            raise ConfigError(f"{self.name} needs an API key: set OPENAI_API_KEY or pass api_key=")
        self._secret = key or None
        self._max_tokens_param = max_tokens_param
        # The wire is fixed for the model's life: a request is built and its answer read on the same wire.
        preferred = self.format_choice if self.format_choice != "auto" else negotiated_format(self.base_url)
        self.wire: Wire = "tagged" if preferred == "tagged" else "json"
        self._options: dict[str, Any] = {
            "api_key": key or _NO_KEY,
            "base_url": self.base_url,
            "max_retries": 0,
            "timeout": self.timeout,
        }
        # A client given by the caller is theirs to close (``aclose``); without one, each request has a
        # client of its own, closed with it: connections never outlive the event loop they were made on
        # (``Agent.run`` runs a loop per call).
        self._client = AsyncOpenAI(**self._options, http_client=http_client) if http_client else None

    def __repr__(self) -> str:
        return (
            f"OpenAIModel(name={self.name!r}, base_url={self.base_url!r}, format={self.format_choice!r}, "
            f"wire={self.wire!r})"
        )

    @property
    def structured(self) -> bool:
        """Whether the schema travels in ``response_format`` (False once pinned to JSON mode or tagged)."""
        return self.format_choice in ("auto", "json_schema", "json_object_schema")

    @property
    def format(self) -> StructuredFormat | None:
        """The format the next schema request uses: the pinned one, else the one that worked for this
        server, else None (not negotiated yet; ``json_schema`` is tried first)."""
        if self.format_choice != "auto":
            return self.format_choice
        return negotiated_format(self.base_url)

    async def aclose(self) -> None:
        """Close the HTTP client given to the model, if any (the model's own close with each request)."""
        if self._client is not None:
            await self._client.close()

    def _connection(self) -> contextlib.AbstractAsyncContextManager[AsyncOpenAI]:
        return client_for_request(self._client, lambda: AsyncOpenAI(**self._options))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream a chat completion, negotiating the structured-output format when it is not pinned.

        Raises:
            ModelProviderError: the server refused or failed (a subclass names which way).
        """
        async with self._connection() as client:
            attempt = self._attempt(request, self._first_format(request))
            while True:
                try:
                    stream = await self._open(client, request, attempt)
                    break
                except _FormatRefused as refused:
                    attempt = self._attempt(request, self._step_down(refused))
            self._settle(attempt.format)
            translate = attempt.format == "tagged" and request.wire == "json"
            held: list[str] = []
            try:
                async with stream:
                    async for chunk in stream:
                        for item in _chunk_items(chunk):
                            if translate and isinstance(item, TextDelta):
                                held.append(item.text)  # the JSON inside the tag is known only at the end
                            else:
                                yield item
            except openai.OpenAIError as exc:
                raise self._error(exc) from None
            if translate:
                yield TextDelta(_json_in_tag("".join(held)))

    # -- negotiation ------------------------------------------------------------------------------------

    def _first_format(self, request: ModelRequest) -> StructuredFormat | None:
        if request.response_schema is None or request.wire != "json":
            return None  # plain text, or the runtime's own tagged prompt: nothing to ask of the server
        if self.format_choice != "auto":
            return self.format_choice
        return negotiated_format(self.base_url) or FORMATS[0]

    def _step_down(self, refused: _FormatRefused) -> StructuredFormat:
        refused_format = refused.format  # never "tagged": only a format sent to the server is refused
        following = FORMATS[FORMATS.index(refused_format) + 1]
        where = self.base_url or OPENAI_BASE_URL
        logger.info(
            "%s at %s refused response_format %s (%s); trying %s",
            self.name,
            where,
            refused_format,
            redact(refused.detail, [self._secret])[:200],
            following,
        )
        return following

    def _settle(self, worked: StructuredFormat | None) -> None:
        if worked is None or self.format_choice != "auto":
            return
        key = _url_key(self.base_url)
        if _NEGOTIATED.get(key) != worked:
            _NEGOTIATED[key] = worked
            logger.info("%s at %s: structured output as %s", self.name, key, worked)

    def _attempt(self, request: ModelRequest, chosen: StructuredFormat | None) -> _Attempt:
        messages = [_message_param(message) for message in request.messages]
        schema = request.response_schema
        if chosen is None or schema is None:
            return _Attempt(None, messages, None)
        body = dict(schema.schema)
        if chosen == "json_schema":
            response_format: Mapping[str, Any] | None = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": body, "strict": is_closed_schema(body)},
            }
        elif chosen == "json_object_schema":
            response_format = {"type": "json_object", "schema": body}
        elif chosen == "json_object":
            response_format = {"type": "json_object"}
            messages = _with_instruction(messages, _json_instruction(schema))
        else:
            response_format = None
            messages = _with_instruction(messages, _tagged_instruction(schema))
        return _Attempt(chosen, messages, response_format)

    # -- one request --------------------------------------------------------------------------------------

    async def _open(
        self, client: AsyncOpenAI, request: ModelRequest, attempt: _Attempt
    ) -> AsyncStream[ChatCompletionChunk]:
        """Send the request (retrying what may pass later) and return the open stream."""
        max_tokens = request.max_tokens if request.max_tokens is not None else omit
        # Sent as a raw body field: llama-cpp-python's form is not a format the SDK's types know.
        extra_body = {"response_format": dict(attempt.response_format)} if attempt.response_format else None
        negotiable = self.format_choice == "auto"
        tries = 0
        while True:
            try:
                return await client.chat.completions.create(
                    model=self.model,
                    messages=attempt.messages,
                    stream=True,
                    stream_options={"include_usage": True},
                    temperature=request.temperature if request.temperature is not None else omit,
                    max_tokens=max_tokens if self._max_tokens_param == "max_tokens" else omit,
                    max_completion_tokens=max_tokens if self._max_tokens_param != "max_tokens" else omit,
                    extra_body=extra_body,
                )
            except openai.APIStatusError as exc:
                detail = server_detail(exc.body, exc.message)
                sent = attempt.format
                if sent is not None and sent != "tagged" and _refuses_format(exc.status_code, detail):
                    if negotiable:
                        raise _FormatRefused(exc.status_code, detail, sent) from None
                    raise self._error(exc, pinned=sent) from None  # asking again cannot help
                error = self._error(exc)
                headers: Mapping[str, str] | None = exc.response.headers
            except openai.OpenAIError as exc:
                error, headers = self._error(exc), None
            if not error.retryable or tries >= self.max_retries or isinstance(error, ModelTimeoutError):
                raise error from None
            await asyncio.sleep(retry_pause(tries, headers))
            tries += 1

    def _error(
        self, exc: openai.OpenAIError, *, pinned: StructuredFormat | None = None
    ) -> ModelProviderError:
        """The provider error for an SDK exception, with nothing secret in it."""
        if isinstance(exc, openai.APIStatusError):
            detail = server_detail(exc.body, exc.message)
            error = status_error(self.name, exc.status_code, detail, secrets=[self._secret])
            if pinned is None:
                return error
            hint = f" (the structured-output format {pinned!r} is pinned; format=auto negotiates)"
            return type(error)(f"{error}{hint}", provider=self.name, status=exc.status_code)
        if isinstance(exc, openai.APITimeoutError):
            return ModelTimeoutError(
                f"{self.name}: no answer from {self.base_url or 'the OpenAI API'} within {self.timeout:g} s "
                f"(the timeout: ?timeout= in the model spec, {MODEL_TIMEOUT_ENV} or model_timeout in "
                "plangate.toml)",
                provider=self.name,
            )
        if isinstance(exc, openai.APIConnectionError):
            where = self.base_url or "the OpenAI API"
            return ModelUnavailableError(f"{self.name}: could not connect to {where}", provider=self.name)
        detail = server_detail(getattr(exc, "body", None), str(exc))
        return ModelProviderError(f"{self.name}: {redact(detail, [self._secret])}", provider=self.name)


def _refuses_format(status: int, detail: str) -> bool:
    return 400 <= status < 600 and status not in (401, 403, 408, 429) and bool(_FORMAT_WORDS.search(detail))


def _json_instruction(schema: ResponseSchema) -> str:
    text = json.dumps(dict(schema.schema), ensure_ascii=False, separators=(",", ":"))
    return f"Reply with one JSON object, and nothing else, that matches this JSON schema:\n{text}"


def _tagged_instruction(schema: ResponseSchema) -> str:
    text = json.dumps(dict(schema.schema), ensure_ascii=False, separators=(",", ":"))
    return (
        "Write the JSON object between <decision> and </decision>: start the reply with "
        f"<decision>{{…}}</decision>. The object must match this JSON schema:\n{text}"
    )


def _with_instruction(
    messages: Sequence[ChatCompletionMessageParam], instruction: str
) -> list[ChatCompletionMessageParam]:
    """The messages with ``instruction`` added to the first system message (or as one, first): some chat
    templates refuse a system message anywhere but at the start."""
    out = list(messages)
    for index, message in enumerate(out):
        if message["role"] == "system":
            content = message.get("content")
            if isinstance(content, str):
                out[index] = {"role": "system", "content": f"{content}\n\n{instruction}"}
                return out
    return [{"role": "system", "content": instruction}, *out]


def _json_in_tag(text: str) -> str:
    """The JSON object of a tagged answer, as text; the answer itself when it holds none (the caller's
    JSON reading then reports what is wrong with it, as for any other answer)."""
    try:
        result = parse_tagged(text, lambda value: value)
    except DecisionParseError:
        return text
    if result.decision is None:
        return text
    return json.dumps(result.decision, ensure_ascii=False)


def _message_param(message: Message) -> ChatCompletionMessageParam:
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "assistant":
        return {"role": "assistant", "content": message.content}
    return {"role": "user", "content": message.content}


def _chunk_items(chunk: ChatCompletionChunk) -> list[ModelChunk]:
    items: list[ModelChunk] = []
    if chunk.choices:
        delta = chunk.choices[0].delta
        # Compatible servers put reasoning in a field the SDK does not declare: DeepSeek and vLLM use
        # ``reasoning_content``, Ollama and OpenRouter ``reasoning``.
        for field in ("reasoning_content", "reasoning"):
            reasoning = getattr(delta, field, None)
            if isinstance(reasoning, str) and reasoning:
                items.append(ReasoningDelta(reasoning))
                break
        if delta.content:
            items.append(TextDelta(delta.content))
    if chunk.usage is not None:
        # OpenAI caches long prompt prefixes by itself; it says how much of the prompt came from the cache.
        details = chunk.usage.prompt_tokens_details
        cached = details.cached_tokens if details is not None else None
        items.append(
            Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens, cached_input_tokens=cached)
        )
    return items


__all__ = [
    "FORMATS",
    "FORMAT_ENV",
    "FormatChoice",
    "OpenAIModel",
    "StructuredFormat",
    "forget_negotiated",
    "format_choice",
    "negotiated_format",
]
