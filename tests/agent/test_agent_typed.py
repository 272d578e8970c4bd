"""PydanticAI-style API: typed outputs, dependencies for tools, and the schema-driven test doubles."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_helpers import call, decision, of_type
from pydantic import BaseModel

from plangate.agent import Agent, RunContext
from plangate.errors import ConfigError
from plangate.interactions import Approve
from plangate.models import FunctionModel, ModelRequest, ScriptedModel, TestModel, arguments_for
from plangate.store import SQLiteStore
from plangate.tools import ToolDefinitionError, tool


class Slot(BaseModel):
    day: str
    hour: int


@dataclass
class Calendar:
    busy: list[str]


@tool
def busy_days(ctx: RunContext[Calendar], week: int) -> str:
    """The days that are busy.

    Args:
        week: the week's number.
    """
    return f"week {week}: {', '.join(ctx.deps.busy)} (run {ctx.run_id})"


def test_a_typed_output_is_validated_and_a_misfit_is_a_correction() -> None:
    script = [
        decision("done", speak="Tuesday at ten"),  # no JSON: corrected
        decision("done", speak='{"day": "tue"}'),  # hour missing: corrected
        decision("done", speak='Here: {"day": "tue", "hour": 10}'),
    ]
    model = ScriptedModel(script)
    store = SQLiteStore(":memory:")
    agent = Agent(model=model, store=store, mode="react", output_type=Slot)

    result = agent.run("When do we meet?")

    assert result.status == "completed"
    assert result.output == Slot(day="tue", hour=10)
    assert json.loads(result.answer or "") == {"day": "tue", "hour": 10}
    codes = [c.code for c in of_type(store.events(result.run_id), "correction")]
    assert codes == ["invalid_output", "invalid_output"]
    schema_line = model.requests[0].messages[0].content
    assert '"hour":{"title":"Hour","type":"integer"}' in schema_line
    assert model.requests[0].output_schema == Slot.model_json_schema()
    assert "hour: Field required" in model.requests[2].messages[-1].content


def test_typed_output_misfits_count_against_the_correction_limit() -> None:
    model = ScriptedModel([decision("done", speak="no")] * 3)
    result = Agent(model=model, store=SQLiteStore(":memory:"), mode="react", output_type=Slot).run("When?")
    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "corrections_exhausted"
    assert result.output is None


def test_a_typed_run_completed_by_its_goal_gets_its_output_at_delivery() -> None:
    script = [
        call("busy_days", week=3),  # the goal holds once this read succeeded: no done from the model
        "Tuesday at ten",  # the closing answer, not JSON: asked again with the reason
        '{"day": "tue", "hour": 10}',
    ]
    model = ScriptedModel(script)
    store = SQLiteStore(":memory:")
    agent = Agent(
        model=model,
        tools=[busy_days],
        store=store,
        mode="react",
        deps_type=Calendar,
        output_type=Slot,
        done_when="receipts.any(tool == 'busy_days' and success)",
    )

    result = agent.run("When do we meet?", deps=Calendar(["mon"]))

    assert result.status == "completed" and result.outcome is not None
    assert result.outcome.code == "proven"
    assert result.output == Slot(day="tue", hour=10)
    closing = [request for request in model.requests if request.purpose == "deliver"]
    assert [request.output_schema for request in closing] == [Slot.model_json_schema()] * 2
    assert "found no JSON value" in closing[1].messages[-1].content


def test_a_typed_run_whose_closing_never_fits_does_not_complete() -> None:
    model = ScriptedModel([call("busy_days", week=3), "no", "still no", "never"])
    agent = Agent(
        model=model,
        tools=[busy_days],
        store=SQLiteStore(":memory:"),
        mode="react",
        deps_type=Calendar,
        output_type=Slot,
        done_when="receipts.any(tool == 'busy_days' and success)",
    )

    result = agent.run("When do we meet?", deps=Calendar(["mon"]))

    assert result.status == "aborted" and result.outcome is not None
    assert result.outcome.code == "invalid_output"
    assert "The goal holds" in result.outcome.user_message
    assert result.output is None


def test_a_text_agent_has_its_closing_message_as_output() -> None:
    model = ScriptedModel([decision("done", speak="All set.")])
    result = Agent(model=model, store=SQLiteStore(":memory:"), mode="react").run("Hi")
    assert result.output == result.answer == "All set."


def test_deps_reach_a_tool_through_its_run_context_and_never_the_schema() -> None:
    assert busy_days.parameters["properties"] == {
        "week": {"description": "the week's number.", "type": "integer"}
    }
    assert busy_days.parameters["required"] == ["week"]
    agent = Agent(
        model=ScriptedModel([call("busy_days", week=3), decision("done", speak="ok")]),
        tools=[busy_days],
        store=SQLiteStore(":memory:"),
        mode="react",
        deps_type=Calendar,
    )
    result = agent.run("Which days are busy?", deps=Calendar(["mon", "thu"]))
    (observed,) = [e for e in of_type(agent.store.events(result.run_id), "tool_result")]
    assert observed.observation == f"week 3: mon, thu (run {result.run_id})"


def test_a_write_approved_later_gets_the_deps_of_the_resuming_call(tmp_path: Path) -> None:
    seen: list[object] = []

    @tool(effect="write")
    def book(ctx: RunContext[Calendar], day: str) -> str:
        """Book a day."""
        seen.append(ctx.deps.busy)
        return f"booked {day}"

    store = SQLiteStore(str(tmp_path / "runs.db"))
    script = [call("book", day="fri"), decision("done", speak="booked")]
    first = Agent(model=ScriptedModel(script), tools=[book], store=store, mode="react")
    waiting = first.run("book friday", deps=Calendar(["a"]))
    assert waiting.interaction is not None and seen == []
    second = Agent(model=ScriptedModel(script[1:]), tools=[book], store=store, mode="react")
    result = second.resume(waiting.run_id, waiting.interaction.id, Approve(), deps=Calendar(["b"]))
    assert result.status == "completed" and seen == [["b"]]


def test_a_run_context_must_be_the_first_parameter() -> None:
    with pytest.raises(ToolDefinitionError, match="RunContext; expected it first"):

        @tool
        def late(week: int, ctx: RunContext[Calendar]) -> str:
            """Wrong order."""
            return ""


def test_the_test_model_calls_each_tool_once_from_its_schema_then_answers_typed() -> None:
    calls: list[tuple[str, object]] = []

    @tool
    def lookup(query: str, limit: int = 5) -> str:
        """Look something up."""
        calls.append(("lookup", (query, limit)))
        return "found"

    @tool(effect="write")
    def place(task: str, slot: int) -> str:
        """Place a task."""
        calls.append(("place", (task, slot)))
        return "placed"

    model = TestModel()
    agent = Agent(model=model, tools=[lookup, place], store=SQLiteStore(":memory:"), output_type=Slot)
    waiting = agent.run("do it")
    assert waiting.interaction is not None and waiting.interaction.kind == "confirm"
    result = agent.resume(waiting.run_id, waiting.interaction.id, Approve())
    assert calls == [("lookup", ("a", 5)), ("place", ("a", 0))]
    assert result.status == "completed" and result.output == Slot(day="a", hour=0)


def test_arguments_for_fills_required_fields_with_defaults_enums_and_refs() -> None:
    schema = {
        "type": "object",
        "required": ["kind", "items", "inner", "maybe"],
        "properties": {
            "kind": {"enum": ["x", "y"]},
            "items": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 2},
            "inner": {"$ref": "#/$defs/Inner"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
            "skipped": {"type": "string"},
        },
        "$defs": {"Inner": {"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}}},
    }
    assert arguments_for(schema) == {"kind": "x", "items": [2, 2], "inner": {"n": 0.0}, "maybe": False}


def test_the_function_model_answers_from_the_request() -> None:
    seen: list[str] = []

    async def reply(request: ModelRequest) -> str:
        seen.append(request.purpose)
        if request.purpose == "route":
            return json.dumps({"route": "reply", "reply": f"{len(request.messages)} messages"})
        return ""

    result = Agent(model=FunctionModel(reply), store=SQLiteStore(":memory:")).run("Hello")
    assert (result.status, result.answer, seen) == ("completed", "2 messages", ["route"])
    with pytest.raises(ConfigError, match="expected a function"):
        FunctionModel("not a function")  # type: ignore[arg-type]


def test_mypy_strict_sees_the_deps_and_output_types() -> None:
    checked = Path(__file__).parent / "typing" / "typed_agent.py"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(checked)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_scripted_file_resumed_elsewhere_goes_on_with_the_runs_next_reply(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(
        json.dumps([call("place", task="gym", slot=3), decision("done", speak="second reply")]),
        encoding="utf-8",
    )
    placed: list[int] = []

    @tool(effect="write")
    def place(task: str, slot: int) -> str:
        """Place a task."""
        placed.append(slot)
        return "placed"

    store = SQLiteStore(str(tmp_path / "runs.db"))
    spec = f"scripted:{script}"
    waiting = Agent(model=spec, tools=[place], store=store, mode="react").run("place the gym")
    assert waiting.interaction is not None
    # another process: a new agent builds the model from the file again
    result = Agent(model=spec, tools=[place], store=store, mode="react").resume(
        waiting.run_id, waiting.interaction.id, Approve()
    )
    assert placed == [3]
    assert (result.status, result.answer) == ("completed", "second reply")
