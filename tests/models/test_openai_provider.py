"""The openai provider against a mock transport serving real-shaped SSE bodies; nothing leaves the process."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from plangate.decisions import decision_json_schema, parse_decision_json, plan_json_schema
from plangate.errors import ConfigError, RunError
from plangate.models import (
    Completion,
    Message,
    ModelAuthenticationError,
    ModelProviderError,
    ModelRateLimitError,
    ModelRequest,
    ModelRequestError,
    ModelUnavailableError,
    ResponseSchema,
    TextDelta,
    Usage,
    complete,
)
from plangate.models.openai import OpenAIModel

KEY = "sk-test-0123456789abcdefSECRET"
BASE = "http://llm.test/v1"


def chunk(
    delta: dict[str, object] | None = None, *, usage: dict[str, object] | None = None
) -> dict[str, object]:
    body: dict[str, object] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def sse(*events: dict[str, object]) -> str:
    return "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"


def stream_of(*texts: str, reasoning: str = "") -> str:
    events = [chunk({"role": "assistant", "content": ""})]
    if reasoning:
        events.append(chunk({"reasoning_content": reasoning}))
    events += [chunk({"content": text}) for text in texts]
    events.append(chunk(usage={"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30}))
    return sse(*events)


class Server:
    """A mock OpenAI endpoint that records each request body and answers with a fixed response."""

    def __init__(self, body: str = "", status: int = 200, error: Exception | None = None) -> None:
        self.body = body
        self.status = status
        self.error = error
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        content_type = "text/event-stream" if self.status == 200 else "application/json"
        return httpx2.Response(self.status, text=self.body, headers={"content-type": content_type})

    @property
    def sent(self) -> dict[str, object]:
        body = json.loads(self.requests[-1].content)
        assert isinstance(body, dict)
        return body


def model_for(server: Server, **options: object) -> OpenAIModel:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return OpenAIModel(
        "gpt-4o-mini", api_key=KEY, base_url=BASE, http_client=client, max_retries=0, **options
    )  # type: ignore[arg-type]


def run(model: OpenAIModel, request: ModelRequest) -> Completion:
    async def go() -> Completion:
        try:
            return await complete(model, request)
        finally:
            await model.aclose()

    return asyncio.run(go())


def ask(purpose: str = "deliver", **fields: object) -> ModelRequest:
    messages = [Message("system", "You plan weeks."), Message("user", "What is on Monday?")]
    return ModelRequest(purpose, messages, **fields)  # type: ignore[arg-type]


def test_text_reasoning_and_usage_are_streamed() -> None:
    server = Server(stream_of("Monday has ", "two meetings.", reasoning="Look at Monday."))
    completion = run(model_for(server), ask())
    assert completion == Completion("Monday has two meetings.", "Look at Monday.", Usage(21, 9))
    sent = server.sent
    assert sent["model"] == "gpt-4o-mini"
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [
        {"role": "system", "content": "You plan weeks."},
        {"role": "user", "content": "What is on Monday?"},
    ]
    assert "response_format" not in sent
    request = server.requests[-1]
    assert str(request.url) == f"{BASE}/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_the_prompt_tokens_served_by_openais_prefix_cache_are_reported() -> None:
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    }
    server = Server(sse(chunk({"content": "ok"}), chunk(usage=usage)))
    completion = run(model_for(server), ask())
    assert completion.usage == Usage(2006, 300, cached_input_tokens=1920)
    # A server that reports no details (most compatible servers) reports no cached count, not zero.
    assert run(model_for(Server(stream_of("ok"))), ask()).usage == Usage(21, 9, cached_input_tokens=None)


def test_deltas_arrive_one_by_one() -> None:
    server = Server(stream_of("a", "b", "c"))
    model = model_for(server)

    async def collect() -> list[object]:
        try:
            return [chunk async for chunk in model.stream(ask())]
        finally:
            await model.aclose()

    assert asyncio.run(collect()) == [TextDelta("a"), TextDelta("b"), TextDelta("c"), Usage(21, 9)]


def test_ollama_style_reasoning_field_is_read_too() -> None:
    server = Server(sse(chunk({"reasoning": "hmm"}), chunk({"content": "ok"})))
    assert run(model_for(server), ask()) == Completion("ok", "hmm", None)


def test_structured_output_sends_the_schema() -> None:
    decision = '{"action": "confirm", "tool_call": {"name": "place", "arguments": {"slot": 3}}}'
    server = Server(stream_of(decision[:20], decision[20:]))
    schema = decision_json_schema(["place", "get_overview"])
    completion = run(model_for(server), ask("execute", response_schema=ResponseSchema("decision", schema)))
    assert parse_decision_json(completion.text).action == "confirm"
    assert server.sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": schema, "strict": False},
    }


def test_a_closed_schema_is_sent_as_strict() -> None:
    server = Server(
        stream_of('{"action": "continue", "reason": null, "plan_steps": [], "context_hook": null}')
    )
    run(model_for(server), ask("plan", response_schema=ResponseSchema("plan", plan_json_schema())))
    response_format = server.sent["response_format"]
    assert isinstance(response_format, dict)
    assert response_format["json_schema"]["strict"] is True


def test_without_schema_support_json_mode_is_used_and_tagged_is_preferred() -> None:
    server = Server(stream_of('{"action": "done"}'))
    model = model_for(server, structured=False)
    assert model.wire == "tagged"
    run(model, ask("execute", response_schema=ResponseSchema("decision", decision_json_schema())))
    assert server.sent["response_format"] == {"type": "json_object"}


def test_the_tagged_wire_sends_no_response_format() -> None:
    server = Server(stream_of('<decision>{"action": "done"}</decision>Done.'))
    schema = ResponseSchema("decision", decision_json_schema())
    run(model_for(server), ask("execute", response_schema=schema, wire="tagged"))
    assert "response_format" not in server.sent


def test_limits_are_passed_on() -> None:
    server = Server(stream_of("x"))
    run(model_for(server), ask(max_tokens=256, temperature=0.2))
    assert (server.sent["max_tokens"], server.sent["temperature"]) == (256, 0.2)
    server = Server(stream_of("x"))
    run(model_for(server, max_tokens_param="max_completion_tokens"), ask(max_tokens=256))
    assert server.sent["max_completion_tokens"] == 256
    assert "max_tokens" not in server.sent


def error_body(message: str) -> str:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": None}})


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (401, ModelAuthenticationError, False),
        (403, ModelAuthenticationError, False),
        (400, ModelRequestError, False),
        (404, ModelRequestError, False),
        (429, ModelRateLimitError, True),
        (500, ModelUnavailableError, True),
        (503, ModelUnavailableError, True),
    ],
)
def test_error_statuses_map_to_run_errors_without_the_key(
    status: int, kind: type[ModelProviderError], retryable: bool
) -> None:
    server = Server(
        error_body(f"Incorrect API key provided: {KEY}. Also sk-proj-abcdefghijkl."), status=status
    )
    with pytest.raises(RunError) as info:
        run(model_for(server), ask())
    error = info.value
    assert type(error) is kind
    assert (error.status, error.retryable, error.provider) == (status, retryable, "openai:gpt-4o-mini")
    assert str(error).startswith(f"openai:gpt-4o-mini: HTTP {status}, ")
    assert "Incorrect API key provided: [redacted]" in str(error)
    assert KEY not in str(error)
    assert "abcdefghijkl" not in str(error)
    assert error.__cause__ is None


def test_connection_failures_are_unavailable() -> None:
    server = Server(error=httpx2.ConnectError("connection refused"))
    with pytest.raises(
        ModelUnavailableError, match=r"^openai:gpt-4o-mini: could not connect to http://llm\.test/v1$"
    ):
        run(model_for(server), ask())


def test_timeouts_are_unavailable() -> None:
    server = Server(error=httpx2.ReadTimeout("slow"))
    with pytest.raises(ModelUnavailableError, match="the request timed out"):
        run(model_for(server), ask())


def test_an_error_inside_the_stream_is_a_provider_error() -> None:
    body = sse(chunk({"content": "Mon"})).replace(
        "data: [DONE]", "data: " + json.dumps({"error": {"message": f"overloaded (key {KEY})"}})
    )
    with pytest.raises(ModelProviderError) as info:
        run(model_for(Server(body)), ask())
    assert KEY not in str(info.value)
    assert "overloaded" in str(info.value)


def test_the_key_never_shows_in_the_repr() -> None:
    model = model_for(Server())
    assert (
        repr(model)
        == "OpenAIModel(name='openai:gpt-4o-mini', base_url='http://llm.test/v1', structured=True)"
    )
    asyncio.run(model.aclose())


def test_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1")
    server = Server(stream_of("hi"))
    model = OpenAIModel(
        "m", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server)), max_retries=0
    )
    assert run(model, ask()).text == "hi"
    assert str(server.requests[-1].url) == "http://env.test/v1/chat/completions"
    assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_a_key_is_required_unless_a_server_is_given() -> None:
    with pytest.raises(ConfigError, match="openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")
    server = Server(stream_of("hi"))
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    keyless = OpenAIModel("qwen2.5:7b", base_url="http://ollama.test/v1", http_client=client, max_retries=0)
    assert keyless.name == "openai:qwen2.5:7b"
    assert run(keyless, ask()).text == "hi"


def test_a_legacy_httpx_client_works_too() -> None:
    httpx = pytest.importorskip("httpx")
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, text=stream_of("legacy"), headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = OpenAIModel("gpt-4o-mini", api_key=KEY, base_url=BASE, http_client=client, max_retries=0)
    assert run(model, ask()).text == "legacy"
    assert seen == [f"{BASE}/chat/completions"]


def test_stopping_early_closes_the_stream() -> None:
    server = Server(stream_of("a", "b", "c"))
    model = model_for(server)

    async def first() -> object:
        stream = model.stream(ask())
        try:
            return await anext(aiter(stream))
        finally:
            await stream.aclose()
            await model.aclose()

    assert asyncio.run(first()) == TextDelta("a")
