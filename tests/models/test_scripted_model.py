"""ScriptedModel: replays responses in order, streams them in pieces, records requests, runs out loudly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from plangate.decisions import Decision, TaggedStreamParser, parse_decision_json
from plangate.errors import ConfigError, ModelBehaviorError
from plangate.models import (
    Completion,
    Message,
    Model,
    ModelChunk,
    ModelRequest,
    ScriptedModel,
    ScriptExhaustedError,
    TextDelta,
    Usage,
    complete,
)


def request(purpose: str = "execute", text: str = "plan my week") -> ModelRequest:
    return ModelRequest(purpose, [Message("system", "You plan weeks."), Message("user", text)])


async def chunks_of(model: Model, req: ModelRequest) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(req)]


def test_responses_play_in_order_and_stream_in_pieces() -> None:
    first = '{"action": "ask_user", "speak": "Which week do you mean?"}'
    model = ScriptedModel([first, '{"action": "done"}'])
    chunks = asyncio.run(chunks_of(model, request()))
    texts = [chunk.text for chunk in chunks if isinstance(chunk, TextDelta)]
    assert len(texts) > 1
    assert "".join(texts) == first
    assert isinstance(chunks[-1], Usage)
    assert chunks[-1].output_tokens == 15  # 58 characters, four a token
    second = asyncio.run(complete(model, request()))
    assert parse_decision_json(second.text) == Decision(action="done")
    assert model.remaining == 0


def test_requests_are_recorded() -> None:
    model = ScriptedModel(['{"route": "plan"}', "All done."])
    asyncio.run(complete(model, request("route", "move the gym session")))
    asyncio.run(complete(model, request("deliver")))
    assert [req.purpose for req in model.requests] == ["route", "deliver"]
    assert model.requests[0].messages[-1] == Message("user", "move the gym session")


def test_running_out_is_a_clear_model_behavior_error() -> None:
    model = ScriptedModel(['{"action": "done"}'])
    asyncio.run(complete(model, request()))
    with pytest.raises(ModelBehaviorError) as info:
        asyncio.run(complete(model, request("execute")))
    assert isinstance(info.value, ScriptExhaustedError)
    assert str(info.value).startswith("scripted model has no response left for purpose 'execute'")
    assert len(model.requests) == 2


def test_a_function_script_sees_each_request() -> None:
    def answer(req: ModelRequest) -> str:
        return f"You said: {req.messages[-1].content}"

    model = ScriptedModel(answer)
    assert asyncio.run(complete(model, request(text="hello"))).text == "You said: hello"
    assert asyncio.run(complete(model, request(text="again"))).text == "You said: again"
    assert model.remaining is None


def test_an_exception_in_the_script_is_raised_at_its_turn() -> None:
    model = ScriptedModel(["ok", RuntimeError("provider down")])
    assert asyncio.run(complete(model, request())).text == "ok"
    with pytest.raises(RuntimeError, match="provider down"):
        asyncio.run(complete(model, request()))


def test_tagged_responses_stream_through_the_tagged_parser() -> None:
    model = ScriptedModel(
        ['<decision>{"action": "ask_user"}</decision>\nWhich day suits you best?'], wire="tagged"
    )
    assert model.wire == "tagged"

    async def run() -> tuple[str, Decision | None]:
        parser = TaggedStreamParser()
        shown = [
            parser.feed(chunk.text) async for chunk in model.stream(request()) if isinstance(chunk, TextDelta)
        ]
        result = parser.finish()
        return "".join(shown) + result.tail, result.decision

    assert asyncio.run(run()) == ("Which day suits you best?", Decision(action="ask_user"))


def test_scripted_model_is_a_model_with_a_name_and_a_wire() -> None:
    model = ScriptedModel([], name="scripted:demo")
    assert isinstance(model, Model)
    assert (model.name, model.wire) == ("scripted:demo", "json")
    assert repr(model) == "ScriptedModel(name='scripted:demo', wire='json', 0 left)"


def test_bad_scripts_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="expected a list of strings, got one string"):
        ScriptedModel("just one")
    with pytest.raises(ConfigError, match="expected 'json' or 'tagged', got 'xml'"):
        ScriptedModel([], wire="xml")  # type: ignore[arg-type]


class _TwoUsages:
    name = "fake:two-usages"
    wire = "json"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        yield TextDelta("a")
        yield Usage(3, 1)
        yield TextDelta("b")
        yield Usage(0, 2)


def test_complete_joins_text_and_adds_usage() -> None:
    completion = asyncio.run(complete(_TwoUsages(), request()))
    assert completion == Completion(text="ab", reasoning="", usage=Usage(3, 3))


def test_complete_reports_no_usage_when_none_came() -> None:
    class Silent:
        name = "fake:silent"
        wire = "json"

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
            yield TextDelta("x")

    assert asyncio.run(complete(Silent(), request())).usage is None
