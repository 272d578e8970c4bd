"""Tools from MCP servers: launch each configured server over stdio and offer its tools as plangate tools.

For: :class:`McpServers`, an async context manager that starts the ``[[mcp]]`` servers of ``plangate.toml``
(official ``mcp`` SDK, stdio transport), lists their tools with their JSON schemas, and turns each into a
:class:`~plangate.tools.tool.Tool` named ``<server>_<tool>`` whose calls go to the live session. Each
session runs in a background task of its own, so it lives across calls and across the tasks that make
them, and it is shut down (the server process stopped and reaped) when the manager exits.
:class:`McpServersThread` runs the same servers on an event loop of its own, in a background thread, for
callers whose event loops come and go (the command line runs one ``asyncio.run`` per step): its tools can
be called from any loop. Not for: reading the configuration (``plangate.config``) or deciding consent (the
registry does, from each tool's effect).

The effect of a tool comes from the configuration (``[mcp.effects]``, else ``effect_default``), never from
the server's own hints: a server cannot talk its way out of consent. Every call has a time limit (the
server's ``timeout``, else ``$PLANGATE_MCP_TIMEOUT``, else the file's ``mcp_timeout``, else 60 s). A call
cut off after it was sent (the server died, closed the connection or ran out of time) failed if the tool
is a read; if it is a write, its outcome is unknown (``ToolResult.unknown``): MCP tools have no
``reconcile`` hook, so the runtime asks a person instead of recording a failure or running it again. A
call to a server that is already down was never sent: that is a plain failure.

Example (with a ``[[mcp]]`` server named ``notes`` in the configuration)::

    from plangate.config import load_config
    from plangate.tools import ToolRegistry
    from plangate.tools.mcp import McpServers

    async def echo_through_mcp(config_path: str) -> str:
        async with McpServers(load_config(config_path)) as servers:
            registry = ToolRegistry(servers.tools())
            result = await registry.call("notes_echo", {"text": "hello"})
        return result.observation
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import io
import logging
import math
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

from pydantic import JsonValue

from plangate.config import Config, Effect, McpServerConfig
from plangate.errors import ConfigError, ToolError
from plangate.tools.registry import closest_name
from plangate.tools.result import ToolResult
from plangate.tools.tool import Tool

try:
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
    from mcp import types as mcp_types
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        'plangate.tools.mcp needs the MCP SDK, which is an optional extra: pip install "plangate[mcp]"'
    ) from exc

logger = logging.getLogger("plangate.tools.mcp")

PACK = "mcp"
STARTUP_TIMEOUT = 30.0
"""Seconds a server has to start, answer ``initialize`` and list its tools."""
CALL_TIMEOUT = 60.0
"""Seconds one tool call may take when neither the server's ``timeout``, ``$PLANGATE_MCP_TIMEOUT`` nor the
file's ``mcp_timeout`` says otherwise."""
CALL_TIMEOUT_ENV = "PLANGATE_MCP_TIMEOUT"
MAX_OBSERVATION = 50_000
"""The longest observation a call returns, in characters; the rest is cut with a note."""
_MAX_PAGES = 100
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class McpServerError(ToolError):
    """An MCP server could not be started, initialised or listed.

    Attributes:
        server: the server's configured name.
        command: the command line that was run.
    """

    def __init__(self, config: McpServerConfig, reason: str) -> None:
        self.server = config.name
        self.command = shlex.join([config.command, *config.args])
        super().__init__(f"MCP server {config.name!r} (command: {self.command}) failed to start: {reason}")


class McpServers:
    """The MCP servers of a configuration, running, and their tools.

    Use it as ``async with McpServers(config.mcp) as servers:``; :meth:`tools` is valid inside the block.
    Entering starts every server at once and fails as a whole (every started server is stopped again) if
    one of them cannot start; leaving stops them all.

    Args:
        servers: the ``[[mcp]]`` entries, or a whole :class:`~plangate.config.Config` (whose ``mcp_timeout``
            and folder then apply).
        errlog: where the servers' stderr goes; this process's stderr when None.
        startup_timeout: seconds each server has to start and list its tools, unless its own
            ``startup_timeout`` says otherwise.
        call_timeout: seconds a call may take for servers that set no ``timeout`` (after
            ``$PLANGATE_MCP_TIMEOUT``); default the configuration's ``mcp_timeout``, else 60.
        cwd: the folder servers without a ``cwd`` of their own run in (relative ``cwd`` values are relative
            to it); default the configuration file's folder, else this process's working directory.

    Raises:
        ConfigError: two servers share a name, or a timeout is not a positive number of seconds.
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig] | Config,
        *,
        errlog: TextIO | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        call_timeout: float | None = None,
        cwd: Path | None = None,
    ) -> None:
        config: Config | None = None
        if isinstance(servers, Config):
            config, configs = servers, list(servers.mcp)
        else:
            configs = list(servers)
        names = [item.name for item in configs]
        for name in names:
            if names.count(name) > 1:
                raise ConfigError(f"mcp: the server name {name!r} is used twice; names must be unique")
        if call_timeout is None and config is not None:
            call_timeout = config.mcp_timeout
        if cwd is None and config is not None and config.source is not None:
            cwd = config.folder
        fallback = _call_timeout(call_timeout)
        self._servers = [
            _Server(item, item.timeout if item.timeout is not None else fallback, _server_cwd(item, cwd))
            for item in configs
        ]
        self._errlog = errlog
        self._startup_timeout = startup_timeout
        self._tools: list[Tool] = []
        self._devnull: TextIO | None = None
        self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start every server and list its tools.

        Raises:
            McpServerError: a server did not start, answer or list its tools in time (the message names
                the server and its command).
            ConfigError: an ``[mcp.effects]`` entry names a tool its server does not have.
        """
        if self._started:
            raise ConfigError("McpServers: already started; use a new McpServers to start the servers again")
        self._started = True
        errlog = self._stderr()
        try:
            listings = await asyncio.gather(*(self._start_one(server, errlog) for server in self._servers))
            self._tools = _build_tools(self._servers, listings)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Stop every server (closing its session and reaping its process); harmless when already closed."""
        self._tools = []
        try:
            await asyncio.gather(*(server.close() for server in self._servers))
        finally:
            if self._devnull is not None:
                self._devnull.close()
                self._devnull = None

    async def _start_one(self, server: _Server, errlog: TextIO) -> list[mcp_types.Tool]:
        limit = server.config.startup_timeout or self._startup_timeout
        try:
            async with asyncio.timeout(limit):
                return await server.start(errlog)
        except TimeoutError:
            raise McpServerError(server.config, f"no answer within {limit:g} s") from None

    def tools(self) -> list[Tool]:
        """The tools of every running server, server by server, in the order each server lists them."""
        return list(self._tools)

    def _stderr(self) -> TextIO:
        target = self._errlog if self._errlog is not None else sys.stderr
        try:
            target.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            # A child process needs a real file descriptor; a notebook's or a capture's stderr has none.
            self._devnull = open(os.devnull, "w")
            return self._devnull
        return target


def _call_timeout(given: float | None) -> float:
    """The limit of calls to servers that set none: ``$PLANGATE_MCP_TIMEOUT``, else ``given``, else 60."""
    raw = os.environ.get(CALL_TIMEOUT_ENV, "").strip()
    where = f"{CALL_TIMEOUT_ENV}={raw!r}" if raw else "mcp call_timeout"
    value: object = given if not raw else raw
    if value is None:
        return CALL_TIMEOUT
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return seconds


def _server_cwd(config: McpServerConfig, base: Path | None) -> Path | None:
    if config.cwd is None:
        return base
    target = Path(config.cwd).expanduser()
    return target if target.is_absolute() or base is None else base / target


class _Server:
    """One server: its session lives in a background task until :meth:`close`."""

    def __init__(self, config: McpServerConfig, timeout: float, cwd: Path | None) -> None:
        self.config = config
        self.timeout = timeout
        self.cwd = cwd
        self.session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self, errlog: TextIO) -> list[mcp_types.Tool]:
        ready: asyncio.Future[list[mcp_types.Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready, errlog), name=f"mcp server {self.config.name}")
        try:
            # Shielded: a caller's timeout abandons the wait, while close() decides the session's fate.
            return await asyncio.shield(ready)
        except Exception as exc:
            raise McpServerError(self.config, _reason(exc)) from None

    async def _serve(self, ready: asyncio.Future[list[mcp_types.Tool]], errlog: TextIO) -> None:
        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=dict(self.config.env) or None,
            cwd=self.cwd,
        )
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listing = await _list_tools(session)
                    self.session = session
                    ready.set_result(listing)
                    await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                # Reported to the caller of start(); the task itself ends quietly.
                ready.set_exception(exc)
                return
            logger.warning("MCP server %r ended with an error: %s", self.config.name, _reason(exc))
        finally:
            self.session = None
            if not ready.done():
                ready.cancel()

    async def call(self, tool: str, arguments: dict[str, Any], label: str, effect: Effect) -> ToolResult:
        session = self.session
        if session is None or self._task is None or self._task.done():
            # Nothing was sent: the call did not happen, whatever its effect.
            message = f"MCP server {self.config.name!r} is not running"
            return ToolResult.failed("mcp_server_down", message)
        try:
            async with asyncio.timeout(self.timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            return self._cut_off(label, effect, "mcp_timeout", f"gave no answer within {self.timeout:g} s")
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                why = f"closed the connection (it may have exited): {exc}"
                return self._cut_off(label, effect, "mcp_server_down", why)
            message = f"MCP server {self.config.name!r} refused the call: {exc}"
            return ToolResult.failed("mcp_error", message)
        except Exception as exc:
            # The transport broke under the call (the process died between two messages, a pipe closed).
            return self._cut_off(label, effect, "mcp_server_down", f"stopped answering: {_reason(exc)}")
        return _tool_result(result, label)

    def _cut_off(self, label: str, effect: Effect, code: str, why: str) -> ToolResult:
        """The result of a call that was sent and then lost: failed for a read, unknown for a write."""
        message = f"MCP server {self.config.name!r} {why}"
        if effect == "write":
            observation = (
                f"{label} was sent, but {message}, so it may or may not have happened; ask before trying "
                "again"
            )
            return ToolResult.unknown(message, observation=observation)
        return ToolResult.failed(code, message)

    async def close(self) -> None:
        task = self._task
        if task is None:
            return
        self._stop.set()
        if self.session is None:
            # Still starting (or stuck doing so): nothing waits on the stop event yet.
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class McpServersThread:
    """:class:`McpServers` on an event loop of its own, in a daemon thread; its tools work from any loop.

    Use it as ``with McpServersThread(config) as servers:`` (or ``start()`` / ``close()``); ``tools()`` is
    valid in between. Each call is handed to the servers' loop and awaited from the caller's, so the
    sessions outlive the caller's ``asyncio.run``; a caller that gives up (a cancel) cancels the call.

    Args:
        servers: as for :class:`McpServers`.
        errlog: as for :class:`McpServers`.
        startup_timeout: as for :class:`McpServers`.
        call_timeout: as for :class:`McpServers`.
        cwd: as for :class:`McpServers`.
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig] | Config,
        *,
        errlog: TextIO | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        call_timeout: float | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._servers = McpServers(
            servers, errlog=errlog, startup_timeout=startup_timeout, call_timeout=call_timeout, cwd=cwd
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tools: list[Tool] = []

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the thread, its loop and every server (see :meth:`McpServers.start`).

        Raises:
            McpServerError: a server did not start, answer or list its tools in time.
            ConfigError: an ``[mcp.effects]`` entry names a tool its server does not have, or already
                started.
        """
        if self._loop is not None:
            raise ConfigError("McpServersThread: already started; use a new one to start the servers again")
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="plangate-mcp", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._servers.start(), loop).result()
        except BaseException:
            self.close()
            raise
        started = self._servers.tools()
        self._tools = [replace(item, function=_bridged(item.function, loop)) for item in started]

    def tools(self) -> list[Tool]:
        """The tools of every running server (see :meth:`McpServers.tools`), callable from any loop."""
        return list(self._tools)

    def close(self) -> None:
        """Stop every server, then the loop and its thread; harmless when already closed."""
        loop, thread = self._loop, self._thread
        self._tools = []
        if loop is None or thread is None or loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._servers.aclose(), loop).result(timeout=STARTUP_TIMEOUT)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            logger.warning("MCP servers did not stop cleanly: %s", _reason(exc))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=STARTUP_TIMEOUT)
            if not thread.is_alive():
                loop.close()


def _bridged(
    function: Callable[..., Coroutine[Any, Any, Any]], loop: asyncio.AbstractEventLoop
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``function`` run on ``loop`` (the servers' own) and awaited from whichever loop calls it."""

    async def call(**arguments: Any) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(function(**arguments), loop)
        return await asyncio.wrap_future(future)

    return call


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _build_tools(servers: Sequence[_Server], listings: Sequence[list[mcp_types.Tool]]) -> list[Tool]:
    built: list[Tool] = []
    taken: set[str] = set()
    for server, listing in zip(servers, listings, strict=True):
        offered = [listed.name for listed in listing]
        for name in server.config.effects:
            if name not in offered:
                suggestion = closest_name(name, offered)
                known = ", ".join(offered) or "none"
                hint = f"did you mean {suggestion!r}?" if suggestion else f"its tools: {known}"
                raise ConfigError(
                    f"mcp {server.config.name!r}: effects names the tool {name!r}, which the server does not "
                    f"offer ({hint})"
                )
        for listed in listing:
            tool = _make_tool(server, listed, _tool_name(server.config.name, listed.name, taken))
            taken.add(tool.name)
            built.append(tool)
    return built


def _tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``<server>_<tool>`` in the characters tool names allow, at most 64 of them, unique."""
    raw = f"{server}_{tool}"
    name = _NAME_CHARS.sub("_", raw)
    if len(name) > 64 or name in taken:
        # A digest of the server's own name keeps the name stable across restarts and apart from others.
        name = f"{name[:55]}_{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return name


def _make_tool(server: _Server, listed: mcp_types.Tool, name: str) -> Tool:
    schema: dict[str, JsonValue] = dict(listed.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    description = (
        (listed.description or "").strip()
        or listed.title
        or f"The {listed.name} tool of MCP server {server.config.name}."
    )

    effect = server.config.effect_for(listed.name)

    async def call(**arguments: Any) -> ToolResult:
        return await server.call(listed.name, arguments, name, effect)

    # No Tool.timeout: the server's limit applies inside the call, where a cut-off write is told apart.
    return Tool(
        name=name,
        description=description,
        parameters=schema,
        function=call,
        effect=effect,
        domain=server.config.tool_domain,
        pack=PACK,
    )


def _tool_result(result: mcp_types.CallToolResult, label: str) -> ToolResult:
    text = "\n".join(part for part in (_content_text(block) for block in result.content) if part)
    if len(text) > MAX_OBSERVATION:
        text = f"{text[:MAX_OBSERVATION]}\n… (clipped: {len(text) - MAX_OBSERVATION:,} more characters)"
    data: JsonValue = result.structured_content
    if result.is_error:
        message = text or "the tool reported an error without a message"
        observation = f"{label} failed: {message}"
        return ToolResult.failed("mcp_tool_error", message, observation=observation, data=data)
    return ToolResult.done(text or "(no output)", data=data)


def _content_text(block: Any) -> str:
    """One content block as text: text as is, anything else as a short bracketed note."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource {block.uri} ({block.name})]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri}, {resource.mime_type or 'binary'}]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _reason(exc: BaseException) -> str:
    """The innermost cause worth showing: anyio wraps failures of a task group in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"command not executable: {exc.filename or exc}"
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "it closed the connection before answering (did it exit? its stderr may say why)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "CALL_TIMEOUT",
    "CALL_TIMEOUT_ENV",
    "MAX_OBSERVATION",
    "PACK",
    "STARTUP_TIMEOUT",
    "McpServerError",
    "McpServers",
    "McpServersThread",
]
