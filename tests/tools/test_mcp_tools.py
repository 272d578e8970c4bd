"""MCP tools through a ToolRegistry: two real servers over stdio, kept running for the whole module."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from plangate.config import McpServerConfig
from plangate.tools import ToolRegistry, ToolResult
from plangate.tools.mcp import McpServers

pytestmark = pytest.mark.slow

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))
NOTES = McpServerConfig(name="notes", command=sys.executable, args=[SERVER], effects={"echo": "read"})
QUIET = McpServerConfig(
    name="quiet", command=sys.executable, args=[SERVER], effect_default="read", domain="chat"
)
TOOLS = ["echo", "add_note", "notes_count", "stats", "fail", "exit_now", "stall"]


class Running:
    """Servers started once for the module, on one event loop that every test's calls run on."""

    def __init__(self, runner: asyncio.Runner, servers: McpServers) -> None:
        self.runner = runner
        self.registry = ToolRegistry(servers.tools())

    def call(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        return self.runner.run(self.registry.call(name, arguments))


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    errlog_path = tmp_path_factory.mktemp("mcp") / "stderr.log"
    with errlog_path.open("w") as errlog, asyncio.Runner() as runner:
        servers = McpServers([NOTES, QUIET], errlog=errlog)
        runner.run(servers.start())
        try:
            yield Running(runner, servers)
        finally:
            runner.run(servers.aclose())


def test_every_server_tool_becomes_a_plangate_tool(running: Running) -> None:
    assert running.registry.names() == [f"notes_{name}" for name in TOOLS] + [
        f"quiet_{name}" for name in TOOLS
    ]
    assert running.registry.domains() == {"notes": ["mcp"], "chat": ["mcp"]}
    echo = running.registry.get("notes_echo")
    assert echo.description.startswith("Repeat the text back.")
    assert echo.parameters["properties"] == {
        "text": {"title": "Text", "type": "string"},
        "times": {"default": 1, "title": "Times", "type": "integer"},
    }
    assert echo.parameters["required"] == ["text"]
    assert running.registry.get("notes_notes_count").parameters["properties"] == {}


def test_effects_come_from_the_configuration(running: Running) -> None:
    consent = {name: running.registry.needs_consent(name) for name in running.registry.names()}
    assert consent.pop("notes_echo") is False  # overridden to read
    assert {name: value for name, value in consent.items() if name.startswith("notes_")} == {
        f"notes_{name}": True for name in TOOLS if name != "echo"
    }
    assert not any(
        value for name, value in consent.items() if name.startswith("quiet_")
    )  # effect_default read


def test_a_read_tool_answers_with_its_text(running: Running) -> None:
    result = running.call("notes_echo", {"text": "hi", "times": 3})
    assert (result.status, result.observation, result.data) == ("done", "hi hi hi", {"result": "hi hi hi"})
    assert running.call("notes_echo", {"text": "once"}).observation == "once"  # the schema's default fills in


def test_a_write_tool_runs_on_the_same_live_session_each_time(running: Running) -> None:
    before = int(running.call("notes_notes_count", {}).observation)
    first = running.call("notes_add_note", {"note": "buy milk"})
    second = running.call("notes_add_note", {"note": "call Dana"})
    assert first.status == second.status == "done"
    assert second.observation.startswith(f"{before + 2} notes: ")
    assert second.observation.endswith("buy milk, call Dana")
    assert running.call("notes_notes_count", {}).observation == str(before + 2)
    assert running.call("quiet_notes_count", {}).observation == "0"  # another server, another process


def test_calls_from_concurrent_tasks_share_the_session(running: Running) -> None:
    async def many() -> list[ToolResult]:
        return await asyncio.gather(
            *(running.registry.call("quiet_echo", {"text": f"n{index}"}) for index in range(6))
        )

    results = running.runner.run(many())
    assert [result.observation for result in results] == [f"n{index}" for index in range(6)]


def test_structured_output_becomes_data(running: Running) -> None:
    result = running.call("quiet_stats", {"word": "banana"})
    assert result.status == "done"
    assert result.data == {"letters": 6, "vowels": 3}


def test_an_error_result_is_a_failed_tool_result_with_the_message(running: Running) -> None:
    result = running.call("notes_fail", {"reason": "disk full"})
    assert (result.status, result.error_code) == ("failed", "mcp_tool_error")
    assert result.error_message == "Error executing tool fail: disk full"
    assert result.observation == "notes_fail failed: Error executing tool fail: disk full"


def test_bad_arguments_are_blocked_before_they_reach_the_server(running: Running) -> None:
    before = running.call("notes_notes_count", {}).observation
    result = running.call("notes_add_note", {"note": 42})
    assert (result.status, result.error_code) == ("blocked", "invalid_arguments")
    assert result.error_message == "arguments.note: expected a string, got 42"
    missing = running.call("notes_echo", {"times": 2})
    assert missing.error_message == "arguments.text: required, got nothing"
    assert running.call("notes_notes_count", {}).observation == before
