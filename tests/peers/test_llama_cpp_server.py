"""The ``openai`` provider against a real OpenAI-compatible peer: llama-cpp-python's server (the
``llama-server`` dependency group) running the packaged SmolLM2 model on a loopback port.

That server refuses ``response_format: json_schema`` with HTTP 500 and takes ``json_object`` with a
``schema`` instead; before the provider negotiated, no agent round through it could make one valid call.
Here an agent round and a formula ``llm`` step run through ``openai:`` end to end, and the negotiation is
checked: which format worked, and that it is remembered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from peer_helpers import LlamaServer

from plangate.agent import Agent
from plangate.decisions import ACTIONS, decision_json_schema
from plangate.events import CorrectionEvent, OutcomeEvent, RoundEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Reject
from plangate.models import Message, ModelRequest, ModelUnavailableError, ResponseSchema, complete
from plangate.models.openai import OpenAIModel, negotiated_format
from plangate.store import TERMINAL_STATUSES, open_store
from plangate.tools import ToolRegistry
from plangate.tools.schedule import schedule_tools, seed_week

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DECISION = ResponseSchema("decision", decision_json_schema(["get_overview", "place"]))
MESSAGES = [
    Message("system", "You are a scheduling assistant. Decide what to do next."),
    Message("user", "Show me my week."),
]


def ask(model: OpenAIModel, request: ModelRequest) -> str:
    async def go() -> str:
        try:
            return (await complete(model, request)).text
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_the_provider_finds_llama_cpp_python_s_format_and_remembers_it(llama_server: LlamaServer) -> None:
    model = OpenAIModel("smollm2", base_url=llama_server.base_url)
    assert model.format is None
    text = ask(model, ModelRequest("execute", MESSAGES, response_schema=DECISION, max_tokens=200))
    # The server's grammar, built from the schema, makes the answer JSON of the decision's shape (whether
    # it is a sound decision is the runtime's to judge).
    answer = json.loads(text)
    assert answer["action"] in ACTIONS
    assert negotiated_format(llama_server.base_url) == "json_object_schema"
    assert OpenAIModel("smollm2", base_url=llama_server.base_url).format == "json_object_schema"


def test_a_pinned_format_the_server_refuses_is_a_clear_error(llama_server: LlamaServer) -> None:
    model = OpenAIModel("smollm2", base_url=llama_server.base_url, format="json_schema")
    with pytest.raises(ModelUnavailableError) as info:
        ask(model, ModelRequest("execute", MESSAGES, response_schema=DECISION, max_tokens=50))
    message = str(info.value)
    assert message.startswith("openai:smollm2: HTTP 500, the provider is unavailable: ")
    assert "Input should be 'text' or 'json_object'" in message
    assert message.endswith("(the structured-output format 'json_schema' is pinned; format=auto negotiates)")
    assert negotiated_format(llama_server.base_url) is None


def test_an_agent_round_runs_through_openai_on_the_llama_cpp_server(
    llama_server: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    store = open_store(str(tmp_path / "agent.db"))
    seed_week(store)
    tools = [dataclasses.replace(item, domain="core", pack="core") for item in schedule_tools(store)]
    agent = Agent(model="openai:smollm2", tools=ToolRegistry(tools), store=store, mode="react", max_rounds=2)
    result = agent.run("Show me the overview of my week.")
    if result.interaction is not None:  # a write the model asked for: refusing it is one more round
        result = agent.resume(result.run_id, result.interaction.id, Reject(reason="not now"))
    assert result.status in TERMINAL_STATUSES or result.status == "waiting"
    events = store.events(result.run_id)
    rounds = [event for event in events if isinstance(event, RoundEvent)]
    assert rounds, [event.type for event in events]
    # Every answer came back as a JSON object: the server's grammar held to the schema. (A small model
    # may still fill fields that do not go together; that is a correction the runtime handles.)
    not_json = [
        event.message
        for event in events
        if isinstance(event, CorrectionEvent) and ("JSON" in event.message or "'{'" in event.message)
    ]
    assert not not_json
    if result.status in TERMINAL_STATUSES:
        assert isinstance(events[-1], OutcomeEvent)
        assert events[-1].code != "model_error"
    assert negotiated_format(llama_server.base_url) == "json_object_schema"


REVENUE = {
    "type": "object",
    "properties": {"region": {"type": "string"}, "revenue": {"type": "number"}},
    "required": ["region", "revenue"],
    "additionalProperties": False,
}


def test_a_formula_llm_step_runs_through_openai_on_the_llama_cpp_server(
    llama_server: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    formula = tmp_path / "top.formula.json"
    prompt = "East sold 12.5, West 7. Which region sold most?"
    step = {"id": "top", "llm": {"prompt": prompt, "schema": REVENUE}}
    formula.write_text(json.dumps({"formula": "top", "steps": [step]}), encoding="utf-8")
    runner = FormulaRunner(open_store(str(tmp_path / "runs.db")), model="openai:smollm2")
    result = asyncio.run(runner.start(runner.plan(formula)))
    top = result.steps["top"]
    assert (result.status, top.status) == ("completed", "complete")
    assert top.reason == "llm: the answer fits the schema"
    assert isinstance(top.output["region"], str)
    assert isinstance(top.output["revenue"], int | float)
    assert negotiated_format(llama_server.base_url) == "json_object_schema"
