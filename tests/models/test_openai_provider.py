"""The openai provider against a mock transport serving real-shaped SSE bodies; nothing leaves the process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

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
    ModelTimeoutError,
    ModelUnavailableError,
    ResponseSchema,
    TextDelta,
    Usage,
    complete,
    resolve_model,
)
from plangate.models._requests import DEFAULT_MODEL_TIMEOUT
from plangate.models.openai import OpenAIModel, forget_negotiated, negotiated_format

KEY = "sk-test-0123456789abcdefSECRET"
BASE = "http://llm.test/v1"


@pytest.fixture(autouse=True)
def _fresh_negotiation() -> Iterator[None]:
    """Each test starts with no format remembered for any server."""
    forget_negotiated()
    yield
    forget_negotiated()


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


def test_without_schema_support_json_mode_is_used_with_the_schema_in_the_prompt() -> None:
    # structured=False used to prefer the tagged wire, so a request built the runtime's way (on the model's
    # wire) went out with no JSON mode at all, despite the docstring.
    server = Server(stream_of('{"action": "done"}'))
    model = model_for(server, structured=False)
    schema = decision_json_schema()
    run(model, ask("execute", response_schema=ResponseSchema("decision", schema), wire=model.wire))
    assert model.wire == "json"
    assert server.sent["response_format"] == {"type": "json_object"}
    system = server.sent["messages"][0]  # type: ignore[index]
    assert system["content"].startswith("You plan weeks.\n\nReply with one JSON object")
    assert json.dumps(schema, separators=(",", ":")) in system["content"]


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


def test_a_timeout_ends_the_request_at_once_and_says_how_long_it_waited() -> None:
    server = Server(error=httpx2.ReadTimeout("slow"))
    model = model_for(server, timeout=7.5)
    model.max_retries = 2  # a timeout is not retried, however many retries are allowed
    with pytest.raises(ModelTimeoutError) as info:
        run(model, ask())
    assert str(info.value) == (
        "openai:gpt-4o-mini: no answer from http://llm.test/v1 within 7.5 s (the timeout: ?timeout= in the "
        "model spec, PLANGATE_MODEL_TIMEOUT or model_timeout in plangate.toml)"
    )
    assert isinstance(info.value, ModelUnavailableError)
    assert len(server.requests) == 1


def test_the_timeout_has_a_default_and_the_environment_changes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's own default is 600 s, and it retried a hung server twice: 30 minutes for one round.
    model = model_for(Server())
    assert model.timeout == DEFAULT_MODEL_TIMEOUT == 120.0
    assert model._client.timeout == 120.0
    assert model._client.max_retries == 0
    asyncio.run(model.aclose())
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "9")
    model = model_for(Server())
    assert (model.timeout, model._client.timeout) == (9.0, 9.0)
    asyncio.run(model.aclose())
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"^PLANGATE_MODEL_TIMEOUT='soon': expected a positive number"):
        model_for(Server())


def test_a_server_error_without_a_word_of_the_format_is_retried_not_negotiated() -> None:
    server = Server(error_body("overloaded, try later"), status=503)
    model = model_for(server)
    model.max_retries = 2
    schema = ResponseSchema("decision", decision_json_schema())
    with pytest.raises(ModelUnavailableError, match="HTTP 503"):
        run(model, ask("execute", response_schema=schema))
    assert [sent_format(request) for request in server.requests] == ["json_schema"] * 3
    assert negotiated_format(BASE) is None


# -- negotiating the structured-output format --------------------------------------------------------------

LLAMA_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "
    "\"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


def sent_format(request: httpx2.Request) -> str | None:
    """The format a request asked for: json_schema, json_object_schema, json_object or None."""
    body = json.loads(request.content)
    response_format = body.get("response_format")
    if response_format is None:
        return None
    if response_format["type"] == "json_object" and "schema" in response_format:
        return "json_object_schema"
    return str(response_format["type"])


class Picky:
    """A compatible server that refuses the formats it does not know, as each real one words it."""

    def __init__(self, accepts: set[str | None], answer: str, *, status: int = 500) -> None:
        self.accepts = accepts
        self.answer = answer
        self.status = status
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if sent_format(request) not in self.accepts:
            body = error_body(LLAMA_REFUSAL if self.status == 500 else "response_format is not supported")
            return httpx2.Response(self.status, text=body, headers={"content-type": "application/json"})
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, text=stream_of(self.answer), headers=headers)

    @property
    def formats(self) -> list[str | None]:
        return [sent_format(request) for request in self.requests]


def picky_model(server: Picky, **options: object) -> OpenAIModel:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return OpenAIModel("smollm2", base_url=BASE, http_client=client, **options)  # type: ignore[arg-type]


def decision_request(model: OpenAIModel) -> ModelRequest:
    """An execute request as the runtime builds it: on the model's wire."""
    schema = ResponseSchema("decision", decision_json_schema(["place"]))
    return ask("execute", response_schema=schema, wire=model.wire)


def test_llama_cpp_python_s_form_is_found_after_one_refusal_and_remembered_per_server() -> None:
    server = Picky({"json_object_schema", "json_object"}, '{"action": "done"}')
    model = picky_model(server)  # max_retries=2: a refused format must not be retried
    assert model.format is None
    completion = run(model, decision_request(model))
    assert parse_decision_json(completion.text).action == "done"
    assert server.formats == ["json_schema", "json_object_schema"]
    schema_sent = json.loads(server.requests[-1].content)["response_format"]["schema"]
    assert schema_sent == decision_json_schema(["place"])
    assert negotiated_format(BASE) == negotiated_format(BASE + "/") == "json_object_schema"

    later = picky_model(server)  # another model of the same server starts where the first ended
    assert later.format == "json_object_schema"
    run(later, decision_request(later))
    assert server.formats[2:] == ["json_object_schema"]


def test_plain_json_mode_comes_next_with_the_schema_in_the_system_message() -> None:
    server = Picky({"json_object"}, '{"action": "done"}', status=400)
    model = picky_model(server)
    run(model, decision_request(model))
    assert server.formats == ["json_schema", "json_object_schema", "json_object"]
    content = json.loads(server.requests[-1].content)["messages"][0]["content"]
    assert "Reply with one JSON object, and nothing else, that matches this JSON schema:" in content
    assert negotiated_format(BASE) == "json_object"


def test_a_server_with_no_json_mode_gets_the_tagged_wire() -> None:
    server = Picky({None}, '<decision>{"action": "done", "reason": "all set"}</decision> Finished.')
    model = picky_model(server)
    assert model.wire == "json"
    completion = run(model, decision_request(model))
    assert server.formats == ["json_schema", "json_object_schema", "json_object", None]
    last = json.loads(server.requests[-1].content)
    assert "<decision>" in last["messages"][0]["content"]
    # The caller asked on the json wire: it gets the JSON inside the tag, nothing else.
    assert json.loads(completion.text) == {"action": "done", "reason": "all set"}
    assert negotiated_format(BASE) == "tagged"

    later = picky_model(server)  # the runtime now prompts for the tagged wire itself
    assert (later.wire, later.format) == ("tagged", "tagged")
    tagged = run(later, decision_request(later))
    assert tagged.text.startswith("<decision>")
    assert server.formats[4:] == [None]


def test_a_pinned_format_is_never_negotiated(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Picky({"json_object_schema"}, '{"action": "done"}')
    model = picky_model(server, format="json_schema")
    with pytest.raises(ModelUnavailableError) as info:
        run(model, decision_request(model))
    assert server.formats == ["json_schema"]  # neither retried nor stepped down
    assert "Input should be 'text' or 'json_object'" in str(info.value)
    assert str(info.value).endswith(
        "(the structured-output format 'json_schema' is pinned; format=auto negotiates)"
    )
    assert negotiated_format(BASE) is None

    monkeypatch.setenv("PLANGATE_OPENAI_FORMAT", "json_object_schema")
    pinned = picky_model(server)
    assert pinned.format_choice == "json_object_schema"
    run(pinned, decision_request(pinned))
    assert server.formats[1:] == ["json_object_schema"]
    assert negotiated_format(BASE) is None  # pinned: nothing learnt, nothing to remember

    monkeypatch.setenv("PLANGATE_OPENAI_FORMAT", "xml")
    with pytest.raises(ConfigError, match=r"^PLANGATE_OPENAI_FORMAT='xml': expected one of auto, json_sch"):
        picky_model(server)


def test_a_tagged_pin_prefers_the_tagged_wire_and_sends_no_json_mode() -> None:
    server = Picky({None}, '<decision>{"action": "done"}</decision>')
    model = picky_model(server, format="tagged")
    assert model.wire == "tagged"
    assert run(model, decision_request(model)).text == '<decision>{"action": "done"}</decision>'
    assert server.formats == [None]


def test_the_spec_pins_the_format_and_the_timeout_and_keeps_them_in_the_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", BASE)
    model = resolve_model("openai:qwen2.5:7b?format=json_object&timeout=30")
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.format_choice, model.timeout) == ("qwen2.5:7b", "json_object", 30.0)
    assert model.name == "openai:qwen2.5:7b?format=json_object&timeout=30"
    asyncio.run(model.aclose())
    with pytest.raises(ConfigError, match=r"unknown option 'fromat' \(expected format, timeout\)"):
        resolve_model("openai:m?fromat=json_object")
    with pytest.raises(ConfigError, match=r"format: expected one of auto, json_schema, json_object_schema"):
        resolve_model("openai:m?format=yaml")
    with pytest.raises(ConfigError, match=r"timeout: expected a number of seconds, got 'never'"):
        resolve_model("openai:m?timeout=never")


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
    assert repr(model) == (
        "OpenAIModel(name='openai:gpt-4o-mini', base_url='http://llm.test/v1', format='auto', wire='json')"
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
