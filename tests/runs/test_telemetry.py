"""Traces of runs: GenAI spans from the committed events, each once, one trace per run however it resumes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.agent import Agent
from plangate.config import TelemetryConfig
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.runs import telemetry
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, tool


@tool(effect="write")
def place(task: str, slot: int) -> str:
    """Place a task in a slot."""
    return f"placed {task} at {slot} (key sk-abcdefghijklmnopqrstuvwxyz123456)"


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


TOOLS = ToolRegistry([place, lookup])


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"action": "continue", "tool_call": {"name": name, "arguments": arguments}})


DONE = json.dumps({"action": "done", "speak": "Placed."})


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    yield exporter
    telemetry.reset()


def _tree(finished: tuple[ReadableSpan, ...]) -> list[tuple[str, str | None]]:
    names = {span.context.span_id: span.name for span in finished}
    return sorted((span.name, names.get(span.parent.span_id) if span.parent else None) for span in finished)


def _run_with_consent(store: SQLiteStore) -> str:
    script = [_call("lookup", query="week"), _call("place", task="gym", slot=3)]
    first = Agent(ScriptedModel(script), TOOLS, store, mode="react")
    waiting = first.run("Put the gym in slot 3")
    assert waiting.interaction is not None
    # Another agent object continues, as another process would: it has only the ids.
    second = Agent(ScriptedModel([DONE, "The gym is in slot 3."]), TOOLS, store)
    end = second.resume(waiting.run_id, waiting.interaction.id, Approve())
    assert end.status == "completed"
    return end.run_id


def test_an_agent_run_resumed_elsewhere_is_one_trace_with_each_span_once(spans: InMemorySpanExporter) -> None:
    store = SQLiteStore(":memory:")
    run_id = _run_with_consent(store)
    finished = spans.get_finished_spans()
    assert _tree(finished) == [
        ("chat scripted", "invoke_agent plangate"),  # execute: lookup
        ("chat scripted", "invoke_agent plangate"),  # execute: place
        ("chat scripted", "invoke_agent plangate"),  # execute: done
        ("chat scripted", "invoke_agent plangate"),  # deliver
        ("execute_tool lookup", "invoke_agent plangate"),
        ("execute_tool place", "invoke_agent plangate"),
        ("invoke_agent plangate", None),
        ("plangate.wait confirm", "invoke_agent plangate"),
    ]
    assert len({span.context.trace_id for span in finished}) == 1
    assert len({span.context.span_id for span in finished}) == len(finished)
    root = next(span for span in finished if span.parent is None)
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["plangate.outcome.code"] == "done"
    assert root.attributes["plangate.run.id"] == run_id
    chats = [span for span in finished if span.name.startswith("chat")]
    purposes = sorted(str((span.attributes or {})["plangate.model.purpose"]) for span in chats)
    assert purposes == ["deliver", "execute", "execute", "execute"]
    total = sum(int((span.attributes or {})["gen_ai.usage.input_tokens"]) for span in chats)
    assert total == root.attributes["gen_ai.usage.input_tokens"]
    tool_span = next(span for span in finished if span.name == "execute_tool place")
    wait = next(span for span in finished if span.name.startswith("plangate.wait"))
    assert tool_span.attributes is not None and tool_span.attributes["gen_ai.tool.call.id"]
    assert wait.attributes is not None and wait.attributes["plangate.wait.resolution"] == "approve"
    assert wait.attributes["plangate.consent.arguments_digest"]
    # The write runs once approved: its span follows the wait on the person.
    assert tool_span.start_time is not None and wait.end_time is not None and wait.start_time is not None
    assert wait.start_time < wait.end_time <= tool_span.start_time
    # No content unless asked for.
    assert all("gen_ai.tool.call.arguments" not in (span.attributes or {}) for span in finished)


def test_the_ids_derive_from_the_run_so_a_replayed_export_repeats_them(spans: InMemorySpanExporter) -> None:
    store = SQLiteStore(":memory:")
    run_id = _run_with_consent(store)
    first = {span.context.span_id for span in spans.get_finished_spans()}
    spans.clear()
    # The same events, turned into spans again by a fresh trace: the same ids (a collector dedupes nothing
    # here because nothing is sent twice; this shows the ids do not depend on the process).
    trace = telemetry.run_trace(store, run_id, "agent", "plangate")
    assert trace is not None
    trace.committed(store.events(run_id))
    again = {span.context.span_id for span in spans.get_finished_spans()}
    assert again and again <= first


def test_content_is_recorded_only_on_opt_in_and_redacted(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    captured = InMemorySpanExporter()
    telemetry.configure(exporter=captured)
    _run_with_consent(SQLiteStore(":memory:"))
    assert spans.get_finished_spans() == ()
    finished = captured.get_finished_spans()
    tool_span = next(span for span in finished if span.name == "execute_tool place")
    attributes = tool_span.attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"task": "gym", "slot": 3}
    result = str(attributes["gen_ai.tool.call.result"])
    assert "placed gym at 3" in result and "sk-abcdefghij" not in result and "[redacted]" in result
    chat = next(span for span in finished if span.name.startswith("chat"))
    assert "Put the gym in slot 3" in str((chat.attributes or {})["gen_ai.input.messages"])


def test_tracing_is_off_by_default_and_costs_no_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    telemetry.reset()
    assert telemetry.tracing() is None
    assert telemetry.configure(TelemetryConfig()) is None
    assert telemetry.run_trace(SQLiteStore(":memory:"), "run_x", "agent", "plangate") is None
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    telemetry.reset()
    with pytest.raises(Exception, match="expected otlp, console or none; found 'zipkin'"):
        telemetry.tracing()
    telemetry.reset()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert telemetry.configure(TelemetryConfig(traces="otlp")) is None  # the variable wins
    telemetry.reset()


def test_the_latest_genai_names_on_opt_in(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_consent(SQLiteStore(":memory:"))
    chat = next(span for span in spans.get_finished_spans() if span.name.startswith("chat"))
    assert (chat.attributes or {})["gen_ai.system"] == "plangate"
    spans.clear()
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,gen_ai_latest_experimental")
    _run_with_consent(SQLiteStore(":memory:"))
    chat = next(span for span in spans.get_finished_spans() if span.name.startswith("chat"))
    assert "gen_ai.system" not in (chat.attributes or {})
    assert (chat.attributes or {})["gen_ai.provider.name"] == "plangate"


AGENT_STEP = """
[[steps]]
id = "look"
agent = { prompt = "Look up the week", tools = ["lookup"], mode = "react" }

[[steps]]
id = "after"
needs = ["look"]
tool = { name = "lookup", args = { query = "{{steps.look.output.answer}}" } }
"""


def test_a_formula_and_its_agent_step_are_one_trace(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    path = tmp_path / "brief.formula.toml"
    path.write_text('formula = "brief"\n' + AGENT_STEP, encoding="utf-8")
    model = ScriptedModel([_call("lookup", query="week"), DONE, "The week is free."])
    store = SQLiteStore(":memory:")
    result = asyncio.run(FormulaRunner(store, TOOLS, model=model).start(path))
    assert result.status == "completed", result.reason
    finished = spans.get_finished_spans()
    assert _tree(finished) == [
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("execute_tool lookup", "invoke_agent plangate"),
        ("invoke_agent plangate", "invoke_workflow brief"),
        ("invoke_workflow brief", None),
        ("plangate.step after", "invoke_workflow brief"),
        ("plangate.step look", "invoke_workflow brief"),
    ]
    assert len({span.context.trace_id for span in finished}) == 1
    assert len({span.context.span_id for span in finished}) == len(finished)
