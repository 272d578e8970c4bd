"""A small MCP server for the tests, run over stdio as ``python mcp_echo_server.py``.

Its tools: ``echo`` (a read), ``add_note`` (a write whose count proves the session lives across calls),
``notes.count`` (a name plangate must rewrite), ``stats`` (structured output), ``fail`` (an error result),
``exit_now`` (the server dies mid-call) and ``stall`` (no answer for as long as asked). With
``MCP_ECHO_PIDFILE`` set, it writes its process id there, so a test can check that it was stopped and
reaped.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("echo")
notes: list[str] = []


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text back.

    Args:
        text: what to repeat.
        times: how many times.
    """
    return " ".join([text] * times)


@server.tool()
def add_note(note: str) -> str:
    """Remember a note for as long as the server runs."""
    notes.append(note)
    return f"{len(notes)} notes: {', '.join(notes)}"


@server.tool(name="notes.count")
def count_notes() -> str:
    """How many notes the server remembers."""
    return str(len(notes))


@server.tool()
def stats(word: str) -> dict[str, int]:
    """Count the letters and vowels of a word."""
    return {"letters": len(word), "vowels": sum(1 for char in word if char in "aeiou")}


@server.tool()
def fail(reason: str) -> str:
    """Always fail, with the reason given."""
    raise ToolError(reason)


@server.tool()
def exit_now() -> str:
    """End the server process at once, without answering."""
    os._exit(1)


@server.tool()
async def stall(seconds: float) -> str:
    """Answer only after the given number of seconds."""
    await anyio.sleep(seconds)
    return f"answered after {seconds} s"


if __name__ == "__main__":
    pidfile = os.environ.get("MCP_ECHO_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(str(os.getpid()))
    server.run()
