"""A copilot turn's trace: a span per phase (scope, generate, check, run, review, retry), each model call a
``chat`` span under the phase that made it, the attempt's formula run in the same trace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from copilot_helpers import lines
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_turn import GOOD_ANSWER, REVENUE_OPS, SHOP

from plangate.copilot import ask
from plangate.models import ScriptedModel
from plangate.runs import telemetry
from plangate.store import SQLiteStore


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    yield exporter
    telemetry.reset()


def _tree(exporter: InMemorySpanExporter) -> list[tuple[str, str | None]]:
    finished = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in finished}
    return sorted((span.name, names.get(span.parent.span_id) if span.parent else None) for span in finished)


def test_a_turn_is_one_trace_with_its_phases_and_their_model_calls(spans: InMemorySpanExporter) -> None:
    store = SQLiteStore(":memory:")
    turn = ask(
        "Revenue per region in 2025?", SHOP, model=ScriptedModel([REVENUE_OPS, GOOD_ANSWER]), store=store
    )
    assert turn.status == "done", turn.reason
    finished = spans.get_finished_spans()
    assert len({span.context.trace_id for span in finished}) == 1
    assert len({span.context.span_id for span in finished}) == len(finished)
    workflow = next(span.name for span in finished if span.name.startswith("invoke_workflow"))
    assert _tree(spans) == [
        ("chat scripted", "plangate.copilot generate"),  # the ops
        ("chat scripted", "plangate.step answer"),  # the answer step's llm call
        ("invoke_agent copilot", None),
        (workflow, "plangate.copilot run"),  # the formula run its run phase started
        ("plangate.copilot check", "invoke_agent copilot"),
        ("plangate.copilot generate", "invoke_agent copilot"),
        ("plangate.copilot review", "invoke_agent copilot"),
        ("plangate.copilot run", "invoke_agent copilot"),
        ("plangate.copilot scope", "invoke_agent copilot"),
        ("plangate.step answer", workflow),
        ("plangate.step revenue", workflow),
    ]
    root = next(span for span in finished if span.parent is None)
    assert root.attributes is not None
    assert root.attributes["plangate.outcome.code"] == "done"
    assert root.attributes["gen_ai.usage.input_tokens"] > 0
    check = next(span for span in finished if span.name == "plangate.copilot check")
    assert check.attributes is not None and check.attributes["plangate.copilot.status"] == "passed"


def test_a_retried_turn_has_a_retry_span_and_each_attempts_phases(spans: InMemorySpanExporter) -> None:
    store = SQLiteStore(":memory:")
    empty = lines()  # no op at all: the attempt fails empty, and the turn retries once
    turn = ask(
        "Revenue per region in 2025?",
        SHOP,
        model=ScriptedModel([empty, REVENUE_OPS, GOOD_ANSWER]),
        store=store,
    )
    assert turn.status == "done", turn.reason
    phases = sorted(
        (span.attributes["plangate.copilot.attempt"], span.name)  # type: ignore[index]
        for span in spans.get_finished_spans()
        if span.name.startswith("plangate.copilot")
    )
    assert phases == [
        (0, "plangate.copilot scope"),
        (1, "plangate.copilot generate"),
        (1, "plangate.copilot retry"),
        (2, "plangate.copilot check"),
        (2, "plangate.copilot generate"),
        (2, "plangate.copilot review"),
        (2, "plangate.copilot run"),
    ]


def test_each_attempts_formula_run_is_under_that_attempts_run_phase(spans: InMemorySpanExporter) -> None:
    store = SQLiteStore(":memory:")
    invented = "East led with 1,500,000."  # the review asks for a retry: two attempts, two formula runs
    model = ScriptedModel([REVENUE_OPS, invented, REVENUE_OPS, GOOD_ANSWER])
    turn = ask("Revenue per region in 2025?", SHOP, model=model, store=store)
    assert [attempt.status for attempt in turn.attempts] == ["unusable", "done"]
    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    workflows = [span for span in finished if span.name.startswith("invoke_workflow")]
    assert len(workflows) == 2
    under = []
    for workflow in workflows:
        assert workflow.parent is not None
        phase = by_id[workflow.parent.span_id]
        assert phase.attributes is not None
        under.append((phase.name, phase.attributes["plangate.copilot.attempt"]))
        assert workflow.attributes is not None
        run = store.get_run(str(workflow.attributes["plangate.run.id"]))
        assert run.id == turn.attempts[int(str(phase.attributes["plangate.copilot.attempt"])) - 1].run_id
    assert sorted(under) == [("plangate.copilot run", 1), ("plangate.copilot run", 2)]
