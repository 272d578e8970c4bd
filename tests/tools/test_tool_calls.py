"""Calling tools: validation messages, coerced values, sync and async functions, failures and timeouts."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import date

import pytest
from pydantic import BaseModel

from plangate.tools import Tool, ToolArgumentsError, ToolResult, current_call, tool


class Move(BaseModel):
    task: str
    slot: int


@tool(effect="write", domain="schedule", pack="edit")
def place(task: str, slot: int, moves: list[Move] | None = None) -> str:
    """Place a task."""
    return f"placed {task} at {slot}"


def run(coro: object) -> ToolResult:
    result = asyncio.run(coro)  # type: ignore[arg-type]
    assert isinstance(result, ToolResult)
    return result


def test_wrong_type_names_the_path_the_expectation_and_the_value() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        place.validate({"task": "t1", "slot": "nine"})
    assert str(caught.value) == "arguments.slot: expected an integer, got 'nine'"
    assert caught.value.tool == "place"
    assert [issue.path for issue in caught.value.issues] == ["arguments.slot"]


def test_missing_unexpected_and_nested_problems_are_all_reported() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        place.validate({"slot": 3, "colour": "red", "moves": [{"task": "a", "slot": 1}, {"task": 7}]})
    assert [str(issue) for issue in caught.value.issues] == [
        "arguments.task: required, got nothing",
        "arguments.moves[1].task: expected a string, got 7",
        "arguments.moves[1].slot: required, got nothing",
        "arguments.colour: unexpected argument (expected one of: task, slot, moves)",
    ]


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(ToolArgumentsError, match=r"^arguments: expected an object, got \[1, 2\]$"):
        place.validate([1, 2])


def test_constraint_and_literal_messages() -> None:
    from typing import Annotated, Literal

    from pydantic import Field

    @tool
    def pick(
        slot: Annotated[int, Field(ge=0)], mode: Literal["a", "b"] = "a", when: date | None = None
    ) -> str:
        """Pick."""
        return "ok"

    with pytest.raises(ToolArgumentsError) as caught:
        pick.validate({"slot": -1, "mode": "c", "when": "soon"})
    assert [str(issue) for issue in caught.value.issues] == [
        "arguments.slot: expected greater than or equal to 0, got -1",
        "arguments.mode: expected 'a' or 'b', got 'c'",
        "arguments.when: expected a date (YYYY-MM-DD), got 'soon'",
    ]


def test_validate_returns_normalised_json_with_defaults() -> None:
    assert place.validate({"task": "t1", "slot": "3"}) == {"task": "t1", "slot": 3, "moves": None}
    assert place.validate({"task": "t1", "slot": 3, "moves": [{"task": "a", "slot": "2"}]}) == {
        "task": "t1",
        "slot": 3,
        "moves": [{"task": "a", "slot": 2}],
    }


def test_the_function_receives_validated_values() -> None:
    seen: dict[str, object] = {}

    @tool
    def record(slot: int, moves: list[Move], when: date) -> str:
        """Record."""
        seen.update(slot=slot, moves=moves, when=when)
        return "ok"

    result = run(record.invoke({"slot": "4", "moves": [{"task": "a", "slot": 1}], "when": "2026-03-01"}))
    assert result.status == "done"
    assert seen == {"slot": 4, "moves": [Move(task="a", slot=1)], "when": date(2026, 3, 1)}


def test_invalid_arguments_block_the_call_and_nothing_runs() -> None:
    calls: list[int] = []

    @tool
    def count(n: int) -> str:
        """Count."""
        calls.append(n)
        return "ok"

    result = run(count.invoke({"n": "many"}))
    assert (result.status, result.success, result.error_code) == ("blocked", False, "invalid_arguments")
    assert result.observation == "tool 'count' was not run: arguments.n: expected an integer, got 'many'"
    assert calls == []


def test_sync_tools_run_in_a_worker_thread_and_async_tools_on_the_loop() -> None:
    threads: dict[str, int] = {}

    @tool
    def sync_tool() -> str:
        """Sync."""
        threads["sync"] = threading.get_ident()
        return "sync done"

    @tool
    async def async_tool() -> str:
        """Async."""
        threads["async"] = threading.get_ident()
        return "async done"

    async def both() -> tuple[ToolResult, ToolResult]:
        threads["loop"] = threading.get_ident()
        return await sync_tool.invoke({}), await async_tool.invoke({})

    first, second = asyncio.run(both())
    assert (first.observation, second.observation) == ("sync done", "async done")
    assert threads["async"] == threads["loop"]
    assert threads["sync"] != threads["loop"]


@pytest.mark.parametrize("is_async", [False, True])
def test_an_exception_becomes_a_failed_result(is_async: bool) -> None:
    def boom(x: int) -> str:
        raise ValueError(f"bad value {x}")

    async def aboom(x: int) -> str:
        raise ValueError(f"bad value {x}")

    broken = tool(name="broken")(aboom if is_async else boom)
    result = run(broken.invoke({"x": 3}))
    assert (result.status, result.success, result.error_code) == ("failed", False, "tool_error")
    assert result.error_message == "ValueError: bad value 3"
    assert result.observation == "tool 'broken' failed: ValueError: bad value 3"
    assert result.summary == "ValueError: bad value 3"


def test_a_timeout_becomes_a_failed_result() -> None:
    @tool(timeout=0.01)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.Event().wait()
        return "unreachable"

    result = run(slow.invoke({}))
    assert (result.status, result.error_code) == ("failed", "tool_timeout")
    assert result.observation == "tool 'slow' stopped after 0.01 s"


@pytest.mark.parametrize("timeout", [60, None])
def test_a_timeout_error_raised_by_the_tool_itself_is_a_tool_error(timeout: float | None) -> None:
    @tool(timeout=timeout)
    async def upstream() -> str:
        """Its own upstream timed out."""
        raise TimeoutError("upstream took too long")

    result = run(upstream.invoke({}))
    assert result.error_code == "tool_error"
    assert result.error_message == "TimeoutError: upstream took too long"


@pytest.mark.parametrize("timeout", [60, None])
def test_an_awaitable_a_sync_tool_returns_is_awaited(timeout: float | None) -> None:
    async def later() -> dict[str, int]:
        return {"n": 2}

    @tool(timeout=timeout)
    def deferred() -> object:
        """Hands back an awaitable."""
        return later()

    result = run(deferred.invoke({}))
    assert (result.status, result.data, result.summary) == ("done", {"n": 2}, "n: 2")


@dataclasses.dataclass
class Slot:
    day: date
    index: int


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "observation", "data"),
    [
        ("plain text", "plain text", None),
        (None, "done", None),
        ({"b": 1, "a": "é"}, '{"b":1,"a":"é"}', {"b": 1, "a": "é"}),
        ([1, 2.5, None], "[1,2.5,null]", [1, 2.5, None]),
        (Move(task="x", slot=2), '{"task":"x","slot":2}', {"task": "x", "slot": 2}),
        (Slot(date(2026, 1, 2), 3), '{"day":"2026-01-02","index":3}', {"day": "2026-01-02", "index": 3}),
    ],
)
def test_return_values_become_results(value: object, observation: str, data: object) -> None:
    @tool
    def give() -> object:
        """Give."""
        return value

    result = run(give.invoke({}))
    assert (result.status, result.observation, result.data) == ("done", observation, data)


def test_a_returned_tool_result_is_kept() -> None:
    @tool
    def explicit() -> ToolResult:
        """Explicit."""
        return ToolResult.failed("slot_taken", "slot 3 is taken")

    result = run(explicit.invoke({}))
    assert (result.status, result.error_code, result.observation) == (
        "failed",
        "slot_taken",
        "error (slot_taken): slot 3 is taken",
    )


def test_a_value_that_is_not_json_is_a_failed_result() -> None:
    @tool
    def odd() -> object:
        """Odd."""
        return Opaque()

    result = run(odd.invoke({}))
    assert (result.status, result.error_code) == ("failed", "invalid_result")
    assert result.error_message is not None
    assert result.error_message.startswith("the tool returned a Opaque, which is not JSON")


def test_the_running_tool_sees_its_call_and_idempotency_key() -> None:
    seen = []

    @tool(effect="write")
    def write(value: int) -> str:
        """Write."""
        seen.append(current_call())
        return "written"

    run(write.invoke({"value": "5"}, idempotency_key="intr_123"))
    assert len(seen) == 1
    call = seen[0]
    assert call is not None
    assert (call.tool, call.arguments, call.idempotency_key) == ("write", {"value": 5}, "intr_123")
    assert current_call() is None


def test_a_schema_only_tool_is_checked_against_its_json_schema() -> None:
    received: list[dict[str, object]] = []

    async def handler(**arguments: object) -> str:
        received.append(arguments)
        return "ok"

    remote = Tool(
        name="remote_search",
        description="Search somewhere else.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
                "order": {"enum": ["asc", "desc"]},
                "cursor": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["query"],
            "additionalProperties": False,
            "$defs": {
                "Filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}},
                    "required": ["field"],
                }
            },
        },
        function=handler,
    )
    with pytest.raises(ToolArgumentsError) as caught:
        remote.validate({"limit": 2.5, "filters": [{"field": 1}, {}], "order": "up", "cursor": 3, "x": True})
    assert [str(issue) for issue in caught.value.issues] == [
        "arguments.query: required, got nothing",
        "arguments.limit: expected an integer, got 2.5",
        "arguments.filters[0].field: expected a string, got 1",
        "arguments.filters[1].field: required, got nothing",
        "arguments.order: expected one of 'asc', 'desc', got 'up'",
        "arguments.cursor: matches none of the allowed forms, got 3",
        "arguments.x: unexpected argument (expected one of: query, limit, filters, order, cursor)",
    ]
    result = run(remote.invoke({"query": "tents", "cursor": None}))
    assert result.status == "done"
    assert received == [{"query": "tents", "cursor": None, "limit": 10}]


def test_unexpected_nested_fields_are_named_as_fields() -> None:
    class Strict(BaseModel, extra="forbid"):
        task: str

    @tool
    def strict(item: Strict) -> str:
        """Strict."""
        return "ok"

    with pytest.raises(ToolArgumentsError, match=r"^arguments.item.colour: unexpected field$"):
        strict.validate({"item": {"task": "a", "colour": "red"}})
