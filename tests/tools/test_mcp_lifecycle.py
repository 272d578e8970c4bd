"""Starting and stopping MCP servers: clean shutdown; servers that fail to start, die or are misconfigured."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

import plangate.tools.mcp
from plangate.config import Config, McpServerConfig
from plangate.errors import ConfigError, ToolError
from plangate.tools import ToolRegistry, ToolResult
from plangate.tools.mcp import McpServerError, McpServers, McpServersThread

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "stderr.log").open("w") as opened:
        yield opened


def echo_server(name: str, pidfile: Path, **options: object) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {
            "name": name,
            "command": sys.executable,
            "args": [SERVER],
            "env": {"MCP_ECHO_PIDFILE": str(pidfile)},
            **options,
        }
    )


def children() -> set[int]:
    """The processes whose parent is this one, running or zombie (a zombie keeps its /proc entry)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads child processes from /proc"
)


def reaped(pidfile: Path) -> bool:
    """Whether the process that wrote ``pidfile`` is gone, zombie included (a zombie still has its pid)."""
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- without launching anything ------------------------------------------------------------------------------


def test_a_command_that_does_not_exist_names_the_server_and_the_command(errlog: TextIO) -> None:
    ghost = McpServerConfig(name="ghost", command="/nonexistent/mcp-server", args=["--port", "0"])
    with pytest.raises(McpServerError) as caught:
        asyncio.run(McpServers([ghost], errlog=errlog).start())
    assert str(caught.value) == (
        "MCP server 'ghost' (command: /nonexistent/mcp-server --port 0) failed to start: "
        "command not found: /nonexistent/mcp-server"
    )
    assert isinstance(caught.value, ToolError)
    assert (caught.value.server, caught.value.command) == ("ghost", "/nonexistent/mcp-server --port 0")


def test_server_names_must_be_unique() -> None:
    twice = [McpServerConfig(name="a", command="x"), McpServerConfig(name="a", command="y")]
    with pytest.raises(ConfigError, match="the server name 'a' is used twice"):
        McpServers(twice)


def test_a_config_with_no_servers_offers_no_tools() -> None:
    async def run() -> list[str]:
        async with McpServers(Config()) as servers:
            return [tool.name for tool in servers.tools()]

    assert asyncio.run(run()) == []


# -- real processes ------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_proc
def test_leaving_the_block_stops_and_reaps_the_server(tmp_path: Path, errlog: TextIO) -> None:
    pidfile = tmp_path / "pid"
    before = children()

    async def run() -> tuple[ToolRegistry, ToolResult]:
        async with McpServers([echo_server("notes", pidfile)], errlog=errlog) as servers:
            registry = ToolRegistry(servers.tools())
            assert not reaped(pidfile)
            return registry, await registry.call("notes_echo", {"text": "hi"})

    registry, result = asyncio.run(run())
    assert result.observation == "hi"
    assert reaped(pidfile)
    assert children() == before
    after = asyncio.run(registry.call("notes_echo", {"text": "hi"}))
    assert (after.status, after.error_code, after.error_message) == (
        "failed",
        "mcp_server_down",
        "MCP server 'notes' is not running",
    )


@pytest.mark.slow
@needs_proc
def test_a_failing_server_fails_the_start_and_stops_the_others(tmp_path: Path, errlog: TextIO) -> None:
    before = children()
    quitter = McpServerConfig(name="quitter", command=sys.executable, args=["-c", "raise SystemExit(3)"])
    with pytest.raises(McpServerError) as caught:
        asyncio.run(McpServers([echo_server("notes", tmp_path / "pid"), quitter], errlog=errlog).start())
    assert str(caught.value).startswith("MCP server 'quitter' (command: ")
    assert str(caught.value).endswith(
        "failed to start: it closed the connection before answering (did it exit? its stderr may say why)"
    )
    # The echo server may not have got as far as writing its pid: look for any child left behind.
    assert children() == before


@pytest.mark.slow
@needs_proc
def test_a_server_that_never_answers_is_given_up_after_the_startup_timeout(errlog: TextIO) -> None:
    before = children()
    mute = McpServerConfig(name="mute", command=sys.executable, args=["-c", "import sys; sys.stdin.read()"])
    with pytest.raises(McpServerError, match=r"MCP server 'mute' .* failed to start: no answer within 0.5 s"):
        asyncio.run(McpServers([mute], errlog=errlog, startup_timeout=0.5).start())
    assert children() == before


@pytest.mark.slow
def test_an_effect_override_for_a_tool_the_server_lacks_is_a_config_error(
    tmp_path: Path, errlog: TextIO
) -> None:
    pidfile = tmp_path / "pid"
    typo = echo_server("notes", pidfile, effects={"ecko": "read"})
    with pytest.raises(ConfigError) as caught:
        asyncio.run(McpServers([typo], errlog=errlog).start())
    assert str(caught.value) == (
        "mcp 'notes': effects names the tool 'ecko', which the server does not offer (did you mean 'echo'?)"
    )
    assert reaped(pidfile)


@pytest.mark.slow
@needs_proc
def test_a_write_cut_off_by_the_server_s_death_has_an_unknown_outcome_and_the_server_still_closes(
    tmp_path: Path, errlog: TextIO
) -> None:
    pidfile = tmp_path / "pid"
    notes = echo_server("notes", pidfile, effects={"echo": "read"})  # exit_now stays a write

    async def run() -> tuple[ToolResult, ToolResult]:
        async with McpServers([notes], errlog=errlog) as servers:
            registry = ToolRegistry(servers.tools())
            died = await registry.call("notes_exit_now", {})
            return died, await registry.call("notes_echo", {"text": "anyone?"})

    before = children()
    died, after = asyncio.run(run())
    # The write was sent and its answer lost: it may have happened. Recording it as failed would invite a
    # second, blind attempt.
    assert (died.status, died.error_code, died.outcome_unknown) == ("failed", "outcome_unknown", True)
    assert died.error_message == (
        "MCP server 'notes' closed the connection (it may have exited): Connection closed"
    )
    assert "may or may not have happened" in died.observation
    # A read cut off, or a call to a server already gone, simply failed.
    assert (after.status, after.error_code, after.outcome_unknown) == ("failed", "mcp_server_down", False)
    assert reaped(pidfile)
    assert children() == before


@pytest.mark.slow
@needs_proc
def test_a_read_cut_off_by_the_server_s_death_failed(tmp_path: Path, errlog: TextIO) -> None:
    notes = echo_server("notes", tmp_path / "pid", effect_default="read")

    async def run() -> ToolResult:
        async with McpServers([notes], errlog=errlog) as servers:
            return await ToolRegistry(servers.tools()).call("notes_exit_now", {})

    died = asyncio.run(run())
    assert (died.status, died.error_code) == ("failed", "mcp_server_down")
    assert died.error_message == (
        "MCP server 'notes' closed the connection (it may have exited): Connection closed"
    )


@pytest.mark.slow
@needs_proc
def test_a_call_that_runs_out_of_time_failed_for_a_read_and_is_unknown_for_a_write(
    tmp_path: Path, errlog: TextIO
) -> None:
    notes = echo_server("notes", tmp_path / "pid", timeout=0.5, effects={"echo": "read"})
    config = Config(mcp=[notes.model_copy(update={"name": "slow", "effects": {"stall": "read"}})])

    async def run() -> tuple[ToolResult, ToolResult, ToolResult]:
        async with (
            McpServers([notes], errlog=errlog) as servers,
            McpServers(config, call_timeout=0.5, errlog=errlog) as reads,
        ):
            writes = ToolRegistry(servers.tools())
            cut = await writes.call("notes_stall", {"seconds": 30})
            answered = await writes.call("notes_echo", {"text": "still here"})
            read = await ToolRegistry(reads.tools()).call("slow_stall", {"seconds": 30})
            return cut, answered, read

    cut, answered, read = asyncio.run(run())
    assert cut.error_code == "outcome_unknown"
    assert cut.error_message == "MCP server 'notes' gave no answer within 0.5 s"
    assert answered.observation == "still here"  # the session outlives a call that ran out of time
    assert read.error_code == "mcp_timeout"
    assert read.error_message == "MCP server 'slow' gave no answer within 0.5 s"


def test_calls_have_a_default_time_limit_that_the_environment_and_the_file_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: no limit at all, so a hung server held the run forever.
    pidfile = tmp_path / "pid"
    monkeypatch.delenv("PLANGATE_MCP_TIMEOUT", raising=False)

    def limits(servers: McpServers) -> list[float]:
        return [server.timeout for server in servers._servers]

    assert plangate.tools.mcp.CALL_TIMEOUT == 60.0
    assert limits(McpServers([echo_server("a", pidfile)])) == [60.0]
    configured = Config(
        mcp_timeout=12, mcp=[echo_server("a", pidfile), echo_server("b", pidfile, timeout=3)]
    )
    assert limits(McpServers(configured)) == [12.0, 3.0]
    monkeypatch.setenv("PLANGATE_MCP_TIMEOUT", "7")
    assert limits(McpServers(configured)) == [7.0, 3.0]
    monkeypatch.setenv("PLANGATE_MCP_TIMEOUT", "never")
    with pytest.raises(ConfigError, match=r"^PLANGATE_MCP_TIMEOUT='never': expected a positive number"):
        McpServers(configured)


@pytest.mark.slow
@needs_proc
def test_servers_on_their_own_thread_serve_calls_from_one_event_loop_after_another(
    tmp_path: Path, errlog: TextIO
) -> None:
    pidfile = tmp_path / "pid"
    before = children()
    with McpServersThread([echo_server("notes", pidfile)], errlog=errlog) as servers:
        registry = ToolRegistry(servers.tools())
        # Each asyncio.run is a new loop, as each step of a command-line run is.
        first = asyncio.run(registry.call("notes_add_note", {"note": "one"}))
        second = asyncio.run(registry.call("notes_add_note", {"note": "two"}))
    assert (first.observation, second.observation) == ("1 notes: one", "2 notes: one, two")
    assert reaped(pidfile)
    assert children() == before


def test_starting_twice_is_refused() -> None:
    async def run() -> None:
        async with McpServers([]) as servers:
            await servers.start()

    with pytest.raises(ConfigError, match="already started; use a new McpServers"):
        asyncio.run(run())


@pytest.mark.slow
@needs_proc
def test_the_module_example_runs_against_a_configured_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    config = tmp_path / "plangate.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [[mcp]]
            name = "notes"
            command = {sys.executable!r}
            args = [{SERVER!r}]
            env = {{ MCP_ECHO_PIDFILE = {str(pidfile)!r} }}
            [mcp.effects]
            echo = "read"
            """
        )
    )
    doc = plangate.tools.mcp.__doc__ or ""
    namespace: dict[str, object] = {}
    exec(compile(textwrap.dedent(doc.split("::\n", 1)[1]), "plangate.tools.mcp docstring", "exec"), namespace)
    before = children()
    example = namespace["echo_through_mcp"]
    assert asyncio.run(example(str(config))) == "hello"  # type: ignore[operator]
    assert reaped(pidfile)
    assert children() == before
