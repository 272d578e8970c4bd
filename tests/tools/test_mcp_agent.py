"""Agents and formulas over a real MCP server: a write whose server dies under it has an unknown outcome.

Before, the cut-off call came back as a plain failure (``mcp_server_down``), recorded as a failed write:
the model was free to try again, and the change might then happen twice. Now the write's intent stays
open and a person is asked whether it happened, as for a write cut off by a crash of plangate itself.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from plangate.agent import Agent
from plangate.config import McpServerConfig
from plangate.events import StatusEvent, ToolResultEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Answer, Approve
from plangate.models import ScriptedModel
from plangate.store import open_store
from plangate.tools import ToolRegistry
from plangate.tools.mcp import McpServersThread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))


def call(name: str, action: str = "continue", **arguments: object) -> str:
    return json.dumps({"action": action, "tool_call": {"name": name, "arguments": arguments}})


def test_an_approved_mcp_write_cut_off_by_the_server_s_death_asks_a_person(tmp_path: Path) -> None:
    notes = McpServerConfig(name="notes", command=sys.executable, args=[SERVER])  # every tool a write
    store = open_store(str(tmp_path / "runs.db"))
    model = ScriptedModel(
        [
            call("context_tools_add", domain="notes"),
            call("notes_exit_now", action="confirm"),
            json.dumps({"action": "done"}),
            "I could not tell whether it happened; you said it did not.",
        ]
    )
    with (
        (tmp_path / "stderr.log").open("w") as errlog,
        McpServersThread([notes], errlog=errlog) as servers,
    ):
        agent = Agent(model=model, tools=ToolRegistry(servers.tools()), store=store, mode="react")
        result = agent.run("Run exit_now")
        assert result.interaction is not None and result.interaction.kind == "confirm"
        consent = result.interaction

        result = agent.resume(result.run_id, consent.id, Approve())

    assert result.status == "waiting"
    question = result.interaction
    assert question is not None and question.kind == "ask_user"
    assert question.prompt == (
        "The approved call notes_exit_now with {} started, but its answer was lost (MCP server 'notes' "
        "closed the connection (it may have exited): Connection closed), so it may or may not have "
        "happened. Please check, and tell me whether it did."
    )
    events = store.events(result.run_id)
    (cut,) = [e for e in events if isinstance(e, ToolResultEvent) and e.tool == "notes_exit_now"]
    assert (cut.status, cut.error_code) == ("failed", "outcome_unknown")
    assert any(isinstance(e, StatusEvent) and e.code == "outcome_unknown" for e in events)
    intent = store.get_write_intent(consent.id)
    assert intent is not None and intent.status != "done"  # not recorded as done, nor as a failed write
    assert not [r for r in store.receipts(result.run_id) if r.source == "write_receipt"]

    result = agent.resume(result.run_id, question.id, Answer(text="it did not happen"))

    assert result.status == "completed"
    (receipt,) = [r for r in store.receipts(result.run_id) if r.source == "write_receipt"]
    assert (receipt.name, receipt.success) == ("notes_exit_now", False)
    assert receipt.summary == "outcome unknown; the user said: it did not happen"
    store.close()


def test_a_formula_write_step_cut_off_by_the_mcp_server_s_death_asks_a_person(tmp_path: Path) -> None:
    notes = McpServerConfig(name="notes", command=sys.executable, args=[SERVER])
    formula = tmp_path / "stop.formula.toml"
    formula.write_text(
        'formula = "stop"\n[[steps]]\nid = "stop"\nconsent = "auto"\ntool = { name = "notes_exit_now" }\n',
        encoding="utf-8",
    )
    with (
        (tmp_path / "stderr.log").open("w") as errlog,
        McpServersThread([notes], errlog=errlog) as servers,
    ):
        runner = FormulaRunner(open_store(str(tmp_path / "runs.db")), ToolRegistry(servers.tools()))
        result = asyncio.run(runner.start(runner.plan(formula)))

    # Not a failed step that a retry could run again: the write may have happened, a person is asked.
    assert (result.status, result.steps["stop"].status) == ("waiting", "waiting")
    assert result.interaction is not None
    assert "MCP server 'notes' closed the connection" in result.interaction.prompt
