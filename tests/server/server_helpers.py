"""What the server tests share: the example tools and formulas, tokens, an SSE parser, a live uvicorn server,
and an in-process ASGI client that reads a response while it streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from plangate.cli._loading import tools_from
from plangate.server.tokens import Tokens, hash_token, new_token
from plangate.store import Store
from plangate.tools import ToolRegistry

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "formulas"


def example_tools() -> ToolRegistry:
    """The tools the example formulas call (they write under ``.plangate/demo`` of the cwd)."""
    return tools_from([f"{EXAMPLES / 'tools.py'}:registry"])


def make_token(store: Store, owner: str, name: str = "") -> str:
    """A live token for ``owner``."""
    token = new_token()
    Tokens(store).create(owner, hash_token(token), name)
    return token


def bearer(token: str) -> dict[str, str]:
    """The header that authenticates with ``token``."""
    return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Message:
    """One SSE message."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(text: str) -> list[Message]:
    """Every complete message of an SSE body."""
    parser = SSEParser()
    found = [message for line in text.splitlines() if (message := parser.feed(line)) is not None]
    return found


class SSEParser:
    """Builds SSE messages from lines, as a client reading a live stream would."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> Message | None:
        """Take one line; returns the message a blank line completes."""
        if line == "":
            if not self._data and self._event == "message":
                return None
            message = Message(self._event, "\n".join(self._data), self._id)
            self._event, self._data, self._id = "message", [], None
            return message
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            self._id = value
        return None


def wait_until(check: Callable[[], bool], *, within: float = 20.0, what: str = "the condition") -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds (a guard, not a measurement)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {within} s")
        time.sleep(0.01)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a loopback port in a thread; yields the base URL."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), what="the server start")
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "uvicorn did not stop"


class AsgiStream:
    """One request to an ASGI app, whose response body is read as it is produced (in process, no socket).

    Use inside a running event loop, after the app's start-up (see ``lifespan``).
    """

    def __init__(self, app: FastAPI, path: str, headers: dict[str, str] | None = None) -> None:
        raw_path, _, query = path.partition("?")
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": raw_path,
            "raw_path": raw_path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        self.app = app
        self.status: int | None = None
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._disconnect = asyncio.Event()
        self._started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._parser = SSEParser()
        self._buffer = ""
        self.messages: list[Message] = []
        self.ended = False

    async def __aenter__(self) -> AsgiStream:
        sent_request = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await self._disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self._started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await self.chunks.put(message["body"])
                if not message.get("more_body", False):
                    await self.chunks.put(None)

        async def call() -> None:
            await self.app(self.scope, receive, send)  # type: ignore[arg-type]

        self._task = asyncio.get_running_loop().create_task(call())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._disconnect.set()
        assert self._task is not None
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10)

    async def started(self, within: float = 10.0) -> int:
        """Wait until the response has begun (the route ran); returns its status."""
        await asyncio.wait_for(self._started.wait(), within)
        assert self.status is not None
        return self.status

    async def next_message(self, within: float = 10.0) -> Message:
        """The next SSE message (fails after ``within`` seconds: a guard, not a measurement)."""
        while True:
            if "\n" in self._buffer:
                line, self._buffer = self._buffer.split("\n", 1)
                message = self._parser.feed(line)
                if message is not None:
                    self.messages.append(message)
                    return message
                continue
            if self.ended:
                raise AssertionError("the stream ended")
            chunk = await asyncio.wait_for(self.chunks.get(), within)
            if chunk is None:
                self.ended = True
                continue
            self._buffer += chunk.decode()

    async def until(self, event: str, within: float = 10.0) -> list[Message]:
        """Every message up to and including the first of type ``event``."""
        found: list[Message] = []
        while True:
            message = await self.next_message(within)
            found.append(message)
            if message.event == event:
                return found


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Run the app's start-up and shutdown around the block (what a server does)."""
    async with app.router.lifespan_context(app):
        yield


HOLD_FORMULA = """\
formula = "slow"
description = "A step that holds until released, then a quick one"

[[steps]]
id = "hold"
title = "Hold"
tool = { name = "hold", args = {} }

[[steps]]
id = "after"
title = "After"
needs = ["hold"]
tool = { name = "notify", args = { message = "released" } }
"""


@dataclass
class Hold:
    """A ``hold`` tool that runs until ``release`` is set, counting its starts."""

    release: threading.Event
    started: list[float]
    registry: ToolRegistry


def hold_tools() -> Hold:
    """The example tools plus ``hold`` (async, so that stopping its run's task stops it too)."""
    from plangate.tools import tool

    release = threading.Event()
    started: list[float] = []

    @tool
    async def hold() -> dict[str, Any]:
        """Wait until the test releases it."""
        started.append(time.time())
        # Polled rather than awaited in a thread: the test sets it from its own thread, and a tool blocked in
        # a worker thread could not be stopped with its run's task.
        while not release.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        return {"held": True}

    registry = example_tools()
    registry.register(hold)
    return Hold(release, started, registry)


def write_formula(folder: Path, name: str, text: str) -> Path:
    """Write ``<folder>/<name>.formula.toml``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.formula.toml"
    path.write_text(text, encoding="utf-8")
    return path


def idle(client: Any, run_id: str) -> None:
    """Wait (in the app's event loop) until the run has no task: it waits on a person or has ended."""
    services = client.app.state.services
    client.portal.call(services.runs.wait_idle, run_id)
