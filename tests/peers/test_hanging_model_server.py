"""A model server that takes the request and never answers: the round ends with a clear error, the run with an
outcome, within the configured timeout and without retrying it.

Before model requests had a default timeout, a hung OpenAI-compatible server held a run for up to 30
minutes (the SDK's 600 s, times three attempts); ``PLANGATE_MODEL_TIMEOUT`` did not exist.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from peer_helpers import HangingServer
from typer.testing import CliRunner

from plangate.agent import Agent
from plangate.cli.app import app
from plangate.events import OutcomeEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.models import Message, ModelRequest, ModelTimeoutError, complete
from plangate.models.anthropic import AnthropicModel
from plangate.store import open_store
from plangate.tools import ToolRegistry, tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


def test_an_agent_run_on_a_hung_openai_server_ends_aborted_after_the_timeout(
    hanging_server: HangingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", hanging_server.base_url)
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "1")
    store = open_store(str(tmp_path / "runs.db"))
    agent = Agent(model="openai:stuck", tools=ToolRegistry([echo]), store=store, mode="react")
    result = agent.run("Say hello.")
    assert result.status == "aborted"
    assert result.outcome is not None
    assert (result.outcome.stage, result.outcome.code) == ("execute", "model_error")
    assert result.outcome.internal_reason == (
        f"ModelTimeoutError: openai:stuck: no answer from {hanging_server.base_url} within 1 s (the timeout: "
        "?timeout= in the model spec, PLANGATE_MODEL_TIMEOUT or model_timeout in plangate.toml)"
    )
    assert isinstance(store.events(result.run_id)[-1], OutcomeEvent)
    assert hanging_server.requests() == 1  # a timeout is not retried


def test_a_timeout_in_the_route_call_ends_the_run_at_once_without_planning(
    hanging_server: HangingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the route phase took the timeout for an unreadable answer, went on to plan, and the run
    # waited a second whole timeout for the plan call before it ended ("plan", "model_error").
    monkeypatch.setenv("OPENAI_BASE_URL", hanging_server.base_url)
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "1")
    store = open_store(str(tmp_path / "runs.db"))
    agent = Agent(model="openai:stuck", tools=ToolRegistry([echo]), store=store, mode="auto")
    result = agent.run("Say hello.")
    assert result.status == "aborted"
    assert result.outcome is not None
    assert (result.outcome.stage, result.outcome.code) == ("route", "model_error")
    assert (result.outcome.internal_reason or "").startswith("ModelTimeoutError: openai:stuck: no answer")
    assert isinstance(store.events(result.run_id)[-1], OutcomeEvent)
    assert hanging_server.requests() == 1


def test_the_spec_s_timeout_applies_to_a_formula_llm_step(
    hanging_server: HangingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", hanging_server.base_url)
    formula = tmp_path / "ask.formula.json"
    steps = [{"id": "ask", "llm": {"prompt": "Which region sold most?"}}]
    formula.write_text(json.dumps({"formula": "ask", "steps": steps}), encoding="utf-8")
    runner = FormulaRunner(open_store(str(tmp_path / "runs.db")), model="openai:stuck?timeout=1.5")
    result = asyncio.run(runner.start(runner.plan(formula)))
    assert (result.status, result.steps["ask"].status) == ("failed", "failed")
    assert result.steps["ask"].reason.startswith(
        f"model openai:stuck?timeout=1.5: openai:stuck?timeout=1.5: no answer from {hanging_server.base_url} "
        "within 1.5 s"
    )
    assert hanging_server.requests() == 1


def test_the_anthropic_provider_times_out_the_same_way(
    hanging_server: HangingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "1")
    base = hanging_server.base_url.removesuffix("/v1")
    model = AnthropicModel("claude-stuck", api_key="sk-ant-test-key-0000", base_url=base)

    async def go() -> None:
        await complete(model, ModelRequest("execute", [Message("user", "hello")]))

    expected = rf"^anthropic:claude-stuck: no answer from {base} within 1 s"
    with pytest.raises(ModelTimeoutError, match=expected):
        asyncio.run(go())
    assert hanging_server.requests() == 1


def test_plangate_toml_sets_the_timeout_of_the_command_line(
    hanging_server: HangingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", hanging_server.base_url)
    for name in ("PLANGATE_STORE", "PLANGATE_CONFIG", "PLANGATE_TOOLS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "plangate.toml").write_text(
        'model = "openai:stuck"\nstore = "runs.db"\nmodel_timeout = 1\n', encoding="utf-8"
    )

    result = CliRunner().invoke(app, ["agent", "Say hello.", "--mode", "react", "--json"])

    assert result.exit_code == 1, result.output
    ended = json.loads(result.stdout)
    assert (ended["status"], ended["outcome"]["code"]) == ("aborted", "model_error")
    assert "within 1 s" in ended["outcome"]["internal_reason"]
    assert hanging_server.requests() == 1
