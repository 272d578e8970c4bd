"""The ``openai`` provider: streaming chat completions through the official ``openai`` SDK.

With ``base_url`` it serves any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, DeepSeek, Qwen).
Structured output uses ``response_format`` with the request's JSON schema (``structured=True``), or JSON mode
for servers without schema support (``structured=False``, whose preferred wire is then ``tagged``). Usage
comes from the final chunk (``stream_options.include_usage``), with the prompt tokens OpenAI's automatic
prefix cache served (``prompt_tokens_details.cached_tokens``); reasoning deltas come from
``reasoning_content`` (or ``reasoning``) where the server sends them.

What it is for: one provider behind the ``Model`` protocol. What it is not for: prompts, retries of a bad
decision, or tool calling through the provider's own tools API (the decision protocol carries tool calls).
API keys never appear in errors or reprs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Literal

from plangate.decisions.schema import is_closed_schema
from plangate.errors import ConfigError
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
    from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam
    from openai.types.chat.completion_create_params import ResponseFormat

# A local OpenAI-compatible server usually needs no key, but the SDK insists on one.
_NO_KEY = "unused"


class OpenAIModel:
    """A chat model served through the OpenAI API or any OpenAI-compatible server.

    Args:
        model: the model id (``gpt-4o-mini``, ``qwen2.5:7b``).
        api_key: the key; default ``OPENAI_API_KEY``. Not needed with a ``base_url`` of a keyless server.
        base_url: the server; default ``OPENAI_BASE_URL``, else OpenAI's.
        structured: whether the server accepts a JSON schema in ``response_format``. When false, JSON is
            requested with JSON mode (whose servers want the word "JSON" in the prompt) and the preferred
            wire is ``tagged``.
        http_client: the HTTP client the SDK should use (an ``httpx2.AsyncClient`` for current SDKs, an
            ``httpx.AsyncClient`` for SDKs built on httpx); tests pass one with a ``MockTransport``.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        timeout: seconds before a request times out; default the SDK's.
        max_tokens_param: the request field that carries ``max_tokens`` (OpenAI's reasoning models need
            ``max_completion_tokens``; most compatible servers read ``max_tokens``).

    Raises:
        ConfigError: no API key and no ``base_url``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        structured: bool = True,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ) -> None:
        if not model.strip():
            raise ConfigError("OpenAIModel model: expected a model id such as 'gpt-4o-mini', got ''")
        self.model = model
        self.name = f"openai:{model}"
        self.structured = structured
        self.wire: Wire = "json" if structured else "tagged"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url is None:
            raise ConfigError(f"{self.name} needs an API key: set OPENAI_API_KEY or pass api_key=")
        self._secret = key or None
        self._max_tokens_param = max_tokens_param
        self._client = AsyncOpenAI(
            api_key=key or _NO_KEY,
            base_url=self.base_url,
            http_client=http_client,
            max_retries=max_retries,
            timeout=timeout if timeout is not None else openai.NOT_GIVEN,
        )

    def __repr__(self) -> str:
        return f"OpenAIModel(name={self.name!r}, base_url={self.base_url!r}, structured={self.structured})"

    async def aclose(self) -> None:
        """Close the SDK client and its HTTP client."""
        await self._client.close()

    def _response_format(self, request: ModelRequest) -> ResponseFormat | None:
        schema = request.response_schema
        if schema is None or request.wire != "json":
            return None
        if not self.structured:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema.name,
                "schema": dict(schema.schema),
                "strict": is_closed_schema(schema.schema),
            },
        }

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream a chat completion.

        Raises:
            ModelProviderError: the server refused or failed (a subclass names which way).
        """
        messages = [_message_param(message) for message in request.messages]
        response_format = self._response_format(request)
        max_tokens = request.max_tokens if request.max_tokens is not None else omit
        try:
            stream = await self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                response_format=response_format if response_format is not None else omit,
                temperature=request.temperature if request.temperature is not None else omit,
                max_tokens=max_tokens if self._max_tokens_param == "max_tokens" else omit,
                max_completion_tokens=max_tokens if self._max_tokens_param != "max_tokens" else omit,
            )
            async with stream:
                async for chunk in stream:
                    for item in _chunk_items(chunk):
                        yield item
        except openai.APIStatusError as exc:
            detail = server_detail(exc.body, exc.message)
            raise status_error(self.name, exc.status_code, detail, secrets=[self._secret]) from None
        except openai.APITimeoutError:
            raise ModelUnavailableError(f"{self.name}: the request timed out", provider=self.name) from None
        except openai.APIConnectionError:
            where = self.base_url or "the OpenAI API"
            message = f"{self.name}: could not connect to {where}"
            raise ModelUnavailableError(message, provider=self.name) from None
        except openai.OpenAIError as exc:
            detail = server_detail(getattr(exc, "body", None), str(exc))
            message = f"{self.name}: {redact(detail, [self._secret])}"
            raise ModelProviderError(message, provider=self.name) from None


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


__all__ = ["OpenAIModel"]
