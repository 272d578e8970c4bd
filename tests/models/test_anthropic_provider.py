"""The anthropic provider against a mock transport serving real-shaped message streams."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from plangate.decisions import Decision, decision_json_schema, parse_decision_json, parse_tagged
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
    Usage,
    complete,
    resolve_model,
)
from plangate.models.anthropic import AnthropicModel, split_messages

KEY = "sk-ant-api03-0123456789SECRET"
BASE = "http://claude.test"


def event(kind: str, **data: object) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def message_stream(
    *deltas: dict[str, object],
    block: dict[str, object] | None = None,
    usage: dict[str, object] | None = None,
) -> str:
    """A whole Messages API stream: start, one content block with ``deltas``, usage, stop."""
    start = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 42, "output_tokens": 1},
    }
    parts = [
        event("message_start", message=start),
        event("content_block_start", index=0, content_block=block or {"type": "text", "text": ""}),
        event("ping"),
        *(event("content_block_delta", index=0, delta=delta) for delta in deltas),
        event("content_block_stop", index=0),
        event(
            "message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage={"output_tokens": 17},
        ),
        event("message_stop"),
    ]
    return "".join(parts)


def text(value: str) -> dict[str, object]:
    return {"type": "text_delta", "text": value}


class Server:
    """A mock Messages endpoint that records each request body and answers with a fixed response."""

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


def model_for(server: Server, **options: object) -> AnthropicModel:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return AnthropicModel(
        "claude-test", api_key=KEY, base_url=BASE, http_client=client, max_retries=0, **options
    )  # type: ignore[arg-type]


def run(model: AnthropicModel, request: ModelRequest) -> Completion:
    async def go() -> Completion:
        try:
            return await complete(model, request)
        finally:
            await model.aclose()

    return asyncio.run(go())


CONVERSATION = [
    Message("system", "You plan weeks."),
    Message("system", "Answer briefly."),
    Message("user", "Plan my week."),
    Message("assistant", "Which week?"),
    Message("user", "Next week."),
    Message("system", "correction: call a tool first"),
]


def test_text_and_usage_stream_with_a_separate_system_prompt() -> None:
    server = Server(
        message_stream(text("<decision>"), text('{"action": "done"}</decision>'), text("All set."))
    )
    completion = run(model_for(server), ModelRequest("execute", CONVERSATION, max_tokens=512))
    assert completion == Completion('<decision>{"action": "done"}</decision>All set.', "", Usage(42, 17))
    assert parse_tagged(completion.text).decision == Decision(action="done")
    sent = server.sent
    assert sent["model"] == "claude-test"
    assert sent["stream"] is True
    assert sent["max_tokens"] == 512
    assert sent["system"] == "You plan weeks.\n\nAnswer briefly."
    assert sent["messages"] == [
        {"role": "user", "content": "Plan my week."},
        {"role": "assistant", "content": "Which week?"},
        {"role": "user", "content": "Next week.\n\ncorrection: call a tool first"},
    ]
    assert "tools" not in sent
    request = server.requests[-1]
    assert str(request.url) == f"{BASE}/v1/messages"
    # Older SDKs send the key as x-api-key, newer ones as a bearer token.
    assert KEY in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )


def test_cache_points_become_cache_control_breakpoints_and_cached_counts_come_back() -> None:
    usage = {
        "input_tokens": 60,
        "output_tokens": 1,
        "cache_read_input_tokens": 1800,
        "cache_creation_input_tokens": 240,
    }
    server = Server(message_stream(text("Done."), usage=usage))
    messages = [
        Message("system", "Rules and the tool catalogue.", cache_point=True),
        Message("user", "Plan my week."),
        Message("assistant", '{"action":"continue"}'),
        Message("user", "observation: 3 free slots", cache_point=True),
        Message("user", "## execution_context\nRound 2 of 10."),
    ]
    completion = run(model_for(server), ModelRequest("execute", messages))
    # Usage.input_tokens is the whole prompt, as other providers count it; the cache's parts are kept apart.
    assert completion.usage == Usage(2100, 17, cached_input_tokens=1800, cache_write_tokens=240)
    sent = server.sent
    breakpoint_ = {"type": "ephemeral"}
    assert sent["system"] == [
        {"type": "text", "text": "Rules and the tool catalogue.", "cache_control": breakpoint_}
    ]
    assert sent["messages"] == [
        {"role": "user", "content": "Plan my week."},
        {"role": "assistant", "content": '{"action":"continue"}'},
        {
            "role": "user",
            "content": [
                # The breakpoint ends the conversation exactly; the state block after it is not cached.
                {"type": "text", "text": "observation: 3 free slots", "cache_control": breakpoint_},
                {"type": "text", "text": "## execution_context\nRound 2 of 10."},
            ],
        },
    ]


def test_without_cache_points_nothing_asks_for_caching_and_no_cached_count_is_made_up() -> None:
    server = Server(message_stream(text("ok")))
    completion = run(model_for(server), ModelRequest("deliver", CONVERSATION))
    assert "cache_control" not in json.dumps(server.sent)
    assert completion.usage == Usage(42, 17, cached_input_tokens=None, cache_write_tokens=None)


def test_the_json_wire_forces_a_tool_whose_input_is_the_json() -> None:
    block = {"type": "tool_use", "id": "toolu_01", "name": "decision", "input": {}}
    deltas = [
        {"type": "input_json_delta", "partial_json": '{"action": "confirm", '},
        {
            "type": "input_json_delta",
            "partial_json": '"tool_call": {"name": "place", "arguments": {"slot": 3}}}',
        },
    ]
    server = Server(message_stream(*deltas, block=block))
    schema = decision_json_schema(["place"])
    model = model_for(server, wire="json")
    assert model.wire == "json"
    completion = run(
        model, ModelRequest("execute", CONVERSATION, response_schema=ResponseSchema("decision", schema))
    )
    assert parse_decision_json(completion.text).action == "confirm"
    assert server.sent["tools"] == [
        {
            "name": "decision",
            "description": "Write the decision as this tool's input.",
            "input_schema": schema,
        }
    ]
    assert server.sent["tool_choice"] == {"type": "tool", "name": "decision"}


def test_the_tagged_wire_is_the_default_and_sends_no_tool() -> None:
    server = Server(message_stream(text("hi")))
    model = model_for(server)
    assert model.wire == "tagged"
    schema = ResponseSchema("decision", decision_json_schema())
    run(model, ModelRequest("execute", CONVERSATION, response_schema=schema, wire="tagged"))
    assert "tools" not in server.sent


def test_thinking_becomes_reasoning() -> None:
    block = {"type": "thinking", "thinking": "", "signature": ""}
    server = Server(message_stream({"type": "thinking_delta", "thinking": "Monday is full."}, block=block))
    assert run(model_for(server), ModelRequest("execute", CONVERSATION)).reasoning == "Monday is full."


def test_defaults_and_temperature_are_sent() -> None:
    server = Server(message_stream(text("x")))
    run(model_for(server, max_tokens=1000), ModelRequest("deliver", [Message("user", "hi")], temperature=0.3))
    assert (server.sent["max_tokens"], server.sent["temperature"]) == (1000, 0.3)
    assert "system" not in server.sent


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, ModelAuthenticationError),
        (400, ModelRequestError),
        (429, ModelRateLimitError),
        (529, ModelUnavailableError),
        (500, ModelUnavailableError),
    ],
)
def test_error_statuses_map_to_run_errors_without_the_key(
    status: int, kind: type[ModelProviderError]
) -> None:
    body = json.dumps({"type": "error", "error": {"type": "some_error", "message": f"bad key {KEY}"}})
    with pytest.raises(RunError) as info:
        run(model_for(Server(body, status=status)), ModelRequest("execute", CONVERSATION))
    error = info.value
    assert type(error) is kind
    assert str(error) == f"anthropic:claude-test: HTTP {status}, {_WHAT[kind]}: bad key [redacted]"
    assert KEY not in str(error)


_WHAT = {
    ModelAuthenticationError: "the provider refused the credentials",
    ModelRequestError: "the provider refused the request",
    ModelRateLimitError: "rate limited or out of quota",
    ModelUnavailableError: "the provider is unavailable",
}


def test_a_key_is_required_and_never_shown() -> None:
    with pytest.raises(ConfigError, match="anthropic:claude-test needs an API key: set ANTHROPIC_API_KEY"):
        AnthropicModel("claude-test")
    model = model_for(Server())
    assert (
        repr(model)
        == "AnthropicModel(name='anthropic:claude-test', base_url='http://claude.test', wire='tagged')"
    )
    asyncio.run(model.aclose())


def test_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://env.test")
    server = Server(message_stream(text("hi")))
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    assert (
        run(AnthropicModel("c", http_client=client, max_retries=0), ModelRequest("x", CONVERSATION)).text
        == "hi"
    )
    assert str(server.requests[-1].url) == "http://env.test/v1/messages"


def test_split_messages_keeps_only_leading_system_messages_apart() -> None:
    system, turns = split_messages([Message("user", "a"), Message("system", "b"), Message("assistant", "c")])
    assert system == ""
    assert turns == [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]


def test_a_timeout_has_a_default_ends_the_request_at_once_and_says_how_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's own default is 600 s, retried twice: a hung server held a round for half an hour.
    model = model_for(Server())
    assert (model.timeout, model._client.timeout, model._client.max_retries) == (120.0, 120.0, 0)
    asyncio.run(model.aclose())
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "4")
    server = Server(error=httpx2.ReadTimeout("slow"))
    model = model_for(server)
    model.max_retries = 2
    with pytest.raises(ModelTimeoutError) as info:
        run(model, ModelRequest("execute", CONVERSATION))
    assert str(info.value).startswith("anthropic:claude-test: no answer from http://claude.test within 4 s")
    assert len(server.requests) == 1


def test_server_errors_are_retried_by_the_provider() -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}})
    server = Server(body, status=529)
    model = model_for(server)
    model.max_retries = 1
    with pytest.raises(ModelUnavailableError, match="HTTP 529"):
        run(model, ModelRequest("execute", CONVERSATION))
    assert len(server.requests) == 2


def test_the_spec_sets_the_timeout_and_keeps_it_in_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = resolve_model("anthropic:claude-haiku-4-5?timeout=15")
    assert isinstance(model, AnthropicModel)
    assert (model.model, model.timeout, model.name) == (
        "claude-haiku-4-5",
        15.0,
        "anthropic:claude-haiku-4-5?timeout=15",
    )
    asyncio.run(model.aclose())
    with pytest.raises(ConfigError, match=r"unknown option 'format' \(expected timeout\)"):
        resolve_model("anthropic:claude-haiku-4-5?format=json")
