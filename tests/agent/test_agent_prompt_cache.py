"""Prompt caching with hosted providers, at the transport: what an agent's requests ask the provider to cache,
and the cached-token counts the provider reports, kept in each ``round`` event."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2
from agent_helpers import make_desk, memory_store, of_type

from plangate.agent import Agent
from plangate.events import RoundEvent, TokenUsage
from plangate.models.anthropic import AnthropicModel
from plangate.models.openai import OpenAIModel

KEY = "sk-test-0123456789SECRET"
LOOKUP = {"action": "continue", "tool_call": {"name": "lookup", "arguments": {"query": "week"}}}
DONE = {"action": "done", "speak": "The week is free."}


class Server:
    """A mock endpoint answering each request with the next of ``bodies`` (built from the request number)."""

    def __init__(self, bodies: list[Callable[[int], str]]) -> None:
        self.bodies = bodies
        self.sent: list[dict[str, object]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        body = self.bodies[len(self.sent) - 1](len(self.sent))
        return httpx2.Response(200, text=body, headers={"content-type": "text/event-stream"})


# -- OpenAI: its prefix cache is automatic; the runtime's prompts only need to start the same way ----------


def _openai_stream(text: str, prompt: int, cached: int) -> Callable[[int], str]:
    def body(number: int) -> str:
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": 9,
                    "total_tokens": prompt + 9,
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            },
        ]
        return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"

    return body


def test_openai_rounds_record_the_prompt_tokens_its_cache_served() -> None:
    server = Server(
        [
            _openai_stream(json.dumps(LOOKUP), 1100, 0),
            _openai_stream(json.dumps(DONE), 1180, 1024),
            _openai_stream("Your week is free.", 900, 0),
        ]
    )
    model = OpenAIModel(
        "gpt-4o-mini",
        api_key=KEY,
        base_url="http://llm.test/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server)),
        max_retries=0,
    )
    store = memory_store()

    result = Agent(model=model, tools=make_desk().registry, store=store, mode="react").run("Is my week free?")

    assert result.status == "completed"
    rounds: list[RoundEvent] = of_type(store.events(result.run_id), "round")
    assert [r.usage for r in rounds] == [
        TokenUsage(input_tokens=1100, output_tokens=9, cached_input_tokens=0),
        TokenUsage(input_tokens=1180, output_tokens=9, cached_input_tokens=1024),
    ]
    # The second request starts with the first one's system message and history, unchanged.
    first, second = server.sent[0]["messages"], server.sent[1]["messages"]
    assert isinstance(first, list) and isinstance(second, list)
    assert second[0] == first[0]
    assert second[1]["content"].startswith(first[1]["content"].split("\n\n## execution_context")[0])  # type: ignore[index]
    assert '[round 1]\ncall: lookup {"query":"week"}\nobservation: found week' in second[1]["content"]  # type: ignore[index]


# -- Anthropic: breakpoints on the stable prefix, and the cache's reads and writes --------------------------


def _anthropic_stream(text: str, fresh: int, read: int, write: int) -> Callable[[int], str]:
    def event(kind: str, **data: object) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    def body(number: int) -> str:
        usage = {
            "input_tokens": fresh,
            "output_tokens": 1,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }
        start = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return "".join(
            [
                event("message_start", message=start),
                event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                event("content_block_delta", index=0, delta={"type": "text_delta", "text": text}),
                event("content_block_stop", index=0),
                event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 12}),
                event("message_stop"),
            ]
        )

    return body


def _tagged(decision: dict[str, object]) -> str:
    return f"<decision>{json.dumps(decision)}</decision>"


def test_anthropic_requests_put_breakpoints_on_the_stable_prefix_and_rounds_record_the_cache() -> None:
    server = Server(
        [
            _anthropic_stream(_tagged(LOOKUP), 40, 0, 1500),
            _anthropic_stream(_tagged(DONE), 60, 1500, 120),
            _anthropic_stream("Your week is free.", 700, 0, 0),
        ]
    )
    model = AnthropicModel(
        "claude-test",
        api_key=KEY,
        base_url="http://claude.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server)),
        max_retries=0,
    )
    store = memory_store()

    result = Agent(model=model, tools=make_desk().registry, store=store, mode="react").run("Is my week free?")

    assert result.status == "completed"
    rounds: list[RoundEvent] = of_type(store.events(result.run_id), "round")
    # input_tokens counts the whole prompt: what was read from the cache and written to it included.
    assert [r.usage for r in rounds] == [
        TokenUsage(input_tokens=1540, output_tokens=12, cached_input_tokens=0, cache_write_tokens=1500),
        TokenUsage(input_tokens=1680, output_tokens=12, cached_input_tokens=1500, cache_write_tokens=120),
    ]
    breakpoint_ = {"type": "ephemeral"}
    for sent in server.sent[:2]:
        system = sent["system"]
        assert isinstance(system, list) and system[-1]["cache_control"] == breakpoint_
    # Round 1: the request and the blocks that cannot change without a plan, then the state after their
    # breakpoint. Round 2: the same, the record of round 1 (now the end of the stable prefix), then the
    # state; each part its own block.
    (first,) = server.sent[0]["messages"]  # type: ignore[misc]
    (second,) = server.sent[1]["messages"]  # type: ignore[misc]
    blocks = [[(b["text"][:24], "cache_control" in b) for b in m["content"]] for m in (first, second)]
    state = "## execution_context\nRou"
    assert blocks == [
        [("Is my week free?", False), ("## current_plan\nNo plan:", True), (state, False)],
        [
            ("Is my week free?", False),
            ("## current_plan\nNo plan:", False),
            ("[round 1]\ncall: lookup {", True),
            (state, False),
        ],
    ]
    assert second["content"][2]["text"] == '[round 1]\ncall: lookup {"query":"week"}\nobservation: found week'
    marks = [b["cache_control"] for m in (first, second) for b in m["content"] if "cache_control" in b]
    assert marks == [breakpoint_, breakpoint_]
