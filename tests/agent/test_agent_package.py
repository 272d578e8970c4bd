"""The agent package's surface: the top-level names, a cheap ``import plangate``, the docstring example."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import plangate
import plangate.agent
from plangate.errors import ConfigError


def test_the_top_level_names_are_the_engines_own() -> None:
    from plangate.agent import Agent, AgentResult
    from plangate.formulas import load_formula
    from plangate.formulas.runtime import FormulaResult, run_formula
    from plangate.interactions import Answer, Approve, Edit, Reject
    from plangate.tools import tool

    expected = {
        "Agent": Agent,
        "AgentResult": AgentResult,
        "FormulaResult": FormulaResult,
        "tool": tool,
        "Approve": Approve,
        "Reject": Reject,
        "Answer": Answer,
        "Edit": Edit,
        "load_formula": load_formula,
        "run_formula": run_formula,
    }
    assert {name: getattr(plangate, name) for name in expected} == expected
    with pytest.raises(AttributeError, match="no attribute 'Agnet'"):
        _ = plangate.Agnet  # type: ignore[attr-defined]


def test_importing_plangate_loads_no_engine() -> None:
    code = (
        "import sys, plangate; "
        "print(sorted(m for m in sys.modules if m.startswith(('plangate.', 'pydantic'))))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_the_package_example_runs() -> None:
    doc = plangate.agent.__doc__ or ""
    example = textwrap.dedent(doc.split("::\n", 1)[1])
    assert "Approve()" in example
    exec(compile(example, "plangate.agent docstring", "exec"), {})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_rounds": 0}, "Agent max_rounds: expected an integer >= 1; found 0"),
        ({"mode": "yolo"}, "Agent mode: expected one of auto, plan, react; found 'yolo'"),
        ({"tools": 3}, "Agent tools: expected a ToolRegistry or a list of tools; found int"),
    ],
)
def test_bad_options_are_refused_with_what_was_expected(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plangate.Agent(store=":memory:", **options)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_an_empty_prompt_is_refused() -> None:
    from plangate.models import ScriptedModel

    agent = plangate.Agent(model=ScriptedModel([]), store=":memory:")
    with pytest.raises(ConfigError, match="expected a non-empty prompt; found '  '"):
        agent.run("  ")


def test_the_sync_calls_refuse_a_running_event_loop() -> None:
    import asyncio

    from plangate.models import ScriptedModel

    agent = plangate.Agent(model=ScriptedModel([]), store=":memory:")

    async def inside() -> None:
        agent.run("hi")

    with pytest.raises(ConfigError, match="await the _async variant"):
        asyncio.run(inside())


def test_an_agent_on_the_default_model_resumes_with_the_same_model(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the README's agent block: Agent(tools=[...]) on $PLANGATE_MODEL, approved in the same process; the
    # scripted file goes on where it was instead of replaying its first answer after each approval
    import json
    from pathlib import Path

    from plangate import Agent, Approve, tool

    folder = Path(str(tmp_path))
    script = folder / "script.json"
    place_call = {"action": "continue", "tool_call": {"name": "place", "arguments": {"task": "gym"}}}
    script.write_text(json.dumps([json.dumps(place_call), json.dumps({"action": "done", "speak": "Done."})]))
    monkeypatch.setenv("PLANGATE_MODEL", f"scripted:{script}")
    placed: list[str] = []

    @tool(effect="write")
    def place(task: str) -> str:
        """Place a task."""
        placed.append(task)
        return f"placed {task}"

    agent = Agent(tools=[place], store=f"sqlite:///{folder / 'runs.db'}", mode="react")
    result = agent.run("Place the gym")
    assert result.interaction is not None
    result = agent.resume(result.run_id, result.interaction.id, Approve())

    assert (result.status, result.answer, placed) == ("completed", "Done.", ["gym"])
