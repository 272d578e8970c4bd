"""A formula run with an agent step and an llm step, and a copilot turn, traced to Arize Phoenix and read
back from it: each one trace with its span tree, each span sent once (the session's Phoenix, through its
tee: ``phoenix_plugin.py``). ``pytest -s`` prints the trees as Phoenix has them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_turn import GOOD_ANSWER, REVENUE_OPS, SHOP

from phoenix_plugin import PhoenixServer, Span, shape, tree
from plangate.copilot import ask
from plangate.formulas.runtime import FormulaRunner
from plangate.models import ScriptedModel
from plangate.runs import telemetry
from plangate.runs.telemetry._spans import derived_id
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, tool

FORMULA = """
formula = "brief"

[[steps]]
id = "look"
agent = { prompt = "Look up the week", tools = ["lookup"], mode = "react" }

[[steps]]
id = "sum"
needs = ["look"]
llm = { prompt = "Sum up: {{steps.look.output.answer}}" }
"""


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@pytest.fixture
def traced(phoenix: PhoenixServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[PhoenixServer]:
    """This process traces to Phoenix (through its tee) while the test runs."""
    for key, value in phoenix.env().items():
        if key.startswith("OTEL_"):
            monkeypatch.setenv(key, value)
    telemetry.reset()
    yield phoenix
    telemetry.reset()


def _landed(phoenix: PhoenixServer, run_id: str) -> list[Span]:
    """The trace of ``run_id`` (a root run) as Phoenix has it; each span was sent once."""
    trace = f"{derived_id(128, 'trace', run_id):032x}"
    sent = [span["span_id"] for span in phoenix.sent(trace)]
    assert sent and len(sent) == len(set(sent)), "a span was sent twice"
    spans = phoenix.spans(trace, len(sent))
    assert len(spans) == len(sent)
    print(f"\n{tree(spans)}")
    return spans


@pytest.mark.slow
def test_a_formula_with_an_agent_step_and_a_copilot_turn_land_in_phoenix_with_their_trees(
    traced: PhoenixServer, tmp_path: Path
) -> None:
    path = tmp_path / "brief.formula.toml"
    path.write_text(FORMULA, encoding="utf-8")
    call = json.dumps({"action": "continue", "tool_call": {"name": "lookup", "arguments": {"query": "week"}}})
    done = json.dumps({"action": "done", "speak": "Looked."})
    model = ScriptedModel([call, done, "The week is free.", "A free week."])
    store = SQLiteStore(tmp_path / "plangate.db")
    result = asyncio.run(FormulaRunner(store, ToolRegistry([lookup]), model=model).start(path))
    assert result.status == "completed", result.reason
    turn = ask(
        "Revenue per region in 2025?", SHOP, model=ScriptedModel([REVENUE_OPS, GOOD_ANSWER]), store=store
    )
    assert turn.status == "done", turn.reason
    telemetry.reset()  # flush this process's batch of spans

    assert shape(_landed(traced, result.run_id)) == [
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "plangate.step sum"),
        ("execute_tool lookup", "invoke_agent plangate"),
        ("invoke_agent plangate", "invoke_workflow brief"),
        ("invoke_workflow brief", None),
        ("plangate.step look", "invoke_workflow brief"),
        ("plangate.step sum", "invoke_workflow brief"),
    ]
    copilot = _landed(traced, turn.run_id)
    assert tree(copilot).splitlines()[0] == "invoke_agent copilot"
    phases = [name for name, parent in shape(copilot) if parent == "invoke_agent copilot"]
    assert [name for name in phases if name.startswith("plangate.copilot")] == [
        "plangate.copilot check",
        "plangate.copilot generate",
        "plangate.copilot review",
        "plangate.copilot run",
        "plangate.copilot scope",
    ]
    workflow = next(name for name, _ in shape(copilot) if name.startswith("invoke_workflow"))
    assert (workflow, "plangate.copilot run") in shape(copilot)
    assert ("chat scripted", "plangate.copilot generate") in shape(copilot)
    assert ("chat scripted", "plangate.step answer") in shape(copilot)
