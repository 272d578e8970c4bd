"""Benchmark: the HTTP server — SSE fan-out, resolving waiting runs over HTTP, and a killed server's recovery.

Everything runs on loopback against a real ``uvicorn`` subprocess serving ``create_app`` on a SQLite file
store, with bearer-token authentication on. Three scenarios, each bounded, and the script stops by itself:

1. **Fan-out**: 200 SSE subscribers on one formula run (a person's approval, then a chain of paced tool
   steps). Every subscriber must receive every event exactly once, in ``seq`` order, then ``end``. Latency
   of an event = when the subscriber's socket read returned its last byte minus the event's ``at``
   (stamped by the store as it is committed; same machine, same clock). Target: p50 < 10 ms.
2. **Resolving**: 1,000 formula runs waiting on a human step; each is approved through
   ``POST /v1/interactions/{id}`` while an SSE stream of that run is open. Latency = from sending the POST to
   the run's next event arriving on the stream (``interaction_resolved``); also shown: to the first event
   the resumed run itself commits, and the POST's own response time. Target: p99 < 50 ms.
3. **Crash**: runs of four 1.5 s steps; once every run is past its first step, the server process gets
   SIGKILL; a new server on the same store file must continue every one of them to ``completed``.

Run:  .venv/bin/python bench/server.py            (200 subscribers, 1,000 waiting runs, 200 crashed runs)
      .venv/bin/python bench/server.py --quick    (50 subscribers, 200 waiting runs, 50 crashed runs)

The client is plain sockets speaking HTTP/1.1 (chunked SSE): the fan-out's subscribers are non-blocking
sockets polled in one loop and stamped at each read, their bytes parsed only after the run ended, so the
client costs little next to the server. Client and server share the machine's cores (and whatever else
runs on it); the figures include that contention. uvicorn picks its HTTP parser and event loop itself
(httptools and uvloop when ``uvicorn[standard]`` is installed, else h11 and asyncio); the title line says
which ran.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import importlib.util
import itertools
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from plangate.events import StatusEvent, StepStateEvent
from plangate.server.tokens import Tokens, hash_token, new_token
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, tool

HOST = "127.0.0.1"
FANOUT_P50_MS = 10.0
RESOLVE_P99_MS = 50.0
T = TypeVar("T")


# -- the server side (run in the subprocess: ``bench/server.py serve ...``) ----------------------------------


@tool
async def tick(n: int, pause_ms: int = 0) -> dict[str, int]:
    """Wait ``pause_ms`` milliseconds, then return ``n``."""
    if pause_ms:
        await asyncio.sleep(pause_ms / 1000)
    return {"n": n}


TOOLS = ToolRegistry([tick])


def serve(store_path: str, port: int, formulas: str) -> None:
    """Serve the API on ``port`` until killed (the subprocess's whole life)."""
    import uvicorn

    from plangate.server import create_app

    store = SQLiteStore(store_path)
    app = create_app(store, TOOLS, search_paths=[formulas])
    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False)


def write_formulas(folder: Path, steps: int, pause_ms: int, slow_steps: int, slow_ms: int) -> None:
    """The benchmark's formulas: ``fanout`` (approval, then a paced chain), ``approve`` and ``slow``."""
    folder.mkdir(parents=True, exist_ok=True)
    chain = [
        '[[steps]]\nid = "go"\nhuman = { prompt = "Start the broadcast?" }\n',
        *(
            f'[[steps]]\nid = "t{i}"\nneeds = ["{"go" if i == 0 else f"t{i - 1}"}"]\n'
            f'tool = {{ name = "tick", args = {{ n = {i}, pause_ms = {pause_ms} }} }}\n'
            for i in range(steps)
        ),
    ]
    (folder / "fanout.formula.toml").write_text('formula = "fanout"\n' + "".join(chain))
    (folder / "approve.formula.toml").write_text(
        'formula = "approve"\n'
        '[[steps]]\nid = "ok"\nhuman = { prompt = "Go ahead?" }\n'
        '[[steps]]\nid = "after"\nneeds = ["ok"]\ntool = { name = "tick", args = { n = 1 } }\n'
    )
    slow = [
        f'[[steps]]\nid = "s{i}"\n'
        + (f'needs = ["s{i - 1}"]\n' if i else "")
        + f'tool = {{ name = "tick", args = {{ n = {i}, pause_ms = {slow_ms} }} }}\n'
        for i in range(slow_steps)
    ]
    (folder / "slow.formula.toml").write_text('formula = "slow"\n' + "".join(slow))


class Server:
    """A uvicorn subprocess serving the benchmark's app."""

    def __init__(self, store_path: Path, formulas: Path) -> None:
        self.store_path = store_path
        self.formulas = formulas
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            sys.executable,
            __file__,
            "serve",
            str(self.store_path),
            str(self.port),
            str(self.formulas),
        ]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode} while starting")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.2) as conn:
                    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                    if conn.recv(64).startswith(b"HTTP/1.1 200"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the server did not answer /healthz within 30 s")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, like a crashed machine's process."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


# -- a small HTTP/SSE client on asyncio sockets --------------------------------------------------------------


class Http:
    """A keep-alive HTTP/1.1 connection for JSON requests."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        assert self.reader is not None
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.writer.write(head.encode() + payload)
        status, headers = await _read_head(self.reader)
        length = int(headers.get("content-length", "0"))
        data = await self.reader.readexactly(length) if length else b""
        return status, json.loads(data) if data else None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


class Stream:
    """An SSE stream of one run: messages parsed as they arrive, each with the time it was parsed."""

    def __init__(self, port: int, token: str, run_id: str, after: int = 0) -> None:
        self.port, self.token, self.run_id, self.after = port, token, run_id, after
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._buffer = b""
        self._chunk_left = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        self.writer.write(
            f"GET /v1/runs/{self.run_id}/events?after={self.after} HTTP/1.1\r\nHost: bench\r\n"
            f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        status, headers = await _read_head(self.reader)
        if status != 200 or headers.get("transfer-encoding") != "chunked":
            raise RuntimeError(f"stream of {self.run_id}: HTTP {status} {headers}")

    async def next(self) -> tuple[str, str | None, str, float]:
        """The next message: ``(event, id, data, received_at)``."""
        event, ident, data = "message", None, ""
        while True:
            line = await self._line()
            if not line:
                if data or event != "message":
                    return event, ident, data, time.time()
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "id":
                ident = value
            elif name == "data":
                data = value

    async def _line(self) -> str:
        while b"\n" not in self._buffer:
            self._buffer += await self._chunk()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    async def _chunk(self) -> bytes:
        assert self.reader is not None
        size = int((await self.reader.readline()).split(b";")[0], 16)
        if size == 0:
            raise EOFError("the stream ended")
        data = await self.reader.readexactly(size)
        await self.reader.readexactly(2)
        return data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise EOFError("the server closed the connection")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


# -- scenarios -----------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """What a scenario measured, for the table."""

    rows: list[tuple[str, str, str, bool | None]] = field(default_factory=list)

    def add(self, what: str, result: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append((what, result, target, ok))


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _bounded(what: str, seconds: float, awaitable: Awaitable[T]) -> T:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise RuntimeError(f"{what} took more than {seconds:g} s; the benchmark stops") from None


async def _wait_status(http: Http, run_id: str, wanted: set[str], seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        _, body = await http.request("GET", f"/v1/runs/{run_id}")
        if body["run"]["status"] in wanted:
            return dict(body)
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} stayed {body['run']['status']}; expected one of {wanted}")
        await asyncio.sleep(0.01)


class RawSubscriber:
    """One SSE subscriber as a non-blocking socket; what it receives is stamped when read, parsed later.

    Reading and stamping stay a few microseconds per read, so 200 subscribers in one client process measure
    the server rather than the client's parsing.
    """

    def __init__(self, port: int, token: str, run_id: str) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.sendall(
            f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        self.sock.setblocking(False)
        self.reads: list[tuple[float, bytes]] = []
        self.raw = b""

    def read(self) -> None:
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        stamp = time.time()
        if data:
            self.reads.append((stamp, data))
            self.raw += data

    def messages(self) -> list[tuple[str, str | None, str, float]]:
        """``(event, id, data, received_at)`` of every complete message, from the raw, chunked bytes."""
        stamps: list[tuple[int, float]] = []
        offset = 0
        for stamp, received in self.reads:
            offset += len(received)
            stamps.append((offset, stamp))
        head_end = self.raw.index(b"\r\n\r\n") + 4
        body, ends = bytearray(), []  # the decoded body, and for each of its bytes' chunk: where it ended raw
        position = head_end
        while position < len(self.raw):
            line_end = self.raw.index(b"\r\n", position)
            size = int(self.raw[position:line_end].split(b";")[0], 16)
            start = line_end + 2
            if size == 0:
                break
            body += self.raw[start : start + size]
            ends.append((len(body), start + size))
            position = start + size + 2
        found: list[tuple[str, str | None, str, float]] = []
        cursor = 0
        while (stop := body.find(b"\n\n", cursor)) != -1:
            block = body[cursor:stop].decode()
            cursor = stop + 2
            raw_at = next(raw_end for body_end, raw_end in ends if body_end >= stop + 2)
            stamp = next(at for raw_offset, at in stamps if raw_offset >= raw_at)
            event, ident, data = "message", None, ""
            for line in block.split("\n"):
                name, _, value = line.partition(": ")
                if name == "event":
                    event = value
                elif name == "id":
                    ident = value
                elif name == "data":
                    data = value
            found.append((event, ident, data, stamp))
        return found


def fanout(port: int, token: str, subscribers: int, figures: Figures) -> None:
    http = Blocking(port, token)
    status, body = http.request("POST", "/v1/runs", {"kind": "formula", "formula": "fanout"})
    assert status == 201, body
    run_id = body["run"]["id"]
    deadline = time.monotonic() + 60
    while (shown := http.request("GET", f"/v1/runs/{run_id}")[1])["run"]["status"] != "waiting":
        if time.monotonic() > deadline:
            raise RuntimeError("the fan-out run did not reach its question within 60 s")
        time.sleep(0.01)
    interaction_id = shown["interaction"]["id"]
    clients = [RawSubscriber(port, token, run_id) for _ in range(subscribers)]
    poller = selectors.DefaultSelector()
    for index, client in enumerate(clients):
        poller.register(client.sock, selectors.EVENT_READ, index)

    def pump(until: Callable[[RawSubscriber], bool], what: str, seconds: float) -> None:
        waiting = {i for i, client in enumerate(clients) if not until(client)}
        deadline = time.monotonic() + seconds
        while waiting:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what}: {len(waiting)} subscribers were still waiting after {seconds:g} s"
                )
            for key, _ in poller.select(0.5):
                client = clients[key.data]
                client.read()
                if key.data in waiting and until(client):
                    waiting.discard(key.data)

    # Every subscriber has replayed the log up to the open question before the run is let go.
    pump(lambda c: b"event: interaction_opened" in c.raw, "replaying", 60)
    before = http.request("GET", f"/v1/runs/{run_id}/events?format=json&limit=1")[1]["last_seq"]
    started = time.perf_counter()
    status, _ = http.request("POST", f"/v1/interactions/{interaction_id}", {"kind": "approve"})
    assert status == 200
    pump(lambda c: b"event: end" in c.raw, "the broadcast", 300)
    elapsed = time.perf_counter() - started
    last_seq = http.request("GET", f"/v1/runs/{run_id}/events?format=json&limit=1")[1]["last_seq"]
    for client in clients:
        poller.unregister(client.sock)
        client.sock.close()
    http.close()

    expected = {str(seq) for seq in range(1, last_seq + 1)}
    lost = out_of_order = duplicated = 0
    latencies: list[float] = []
    for client in clients:
        messages = client.messages()
        ids = [ident for event, ident, _, _ in messages if ident is not None]
        lost += len(expected - set(ids))
        duplicated += len(ids) - len(set(ids))
        out_of_order += sum(1 for a, b in itertools.pairwise(ids) if int(b) <= int(a))
        for _, ident, data, at in messages:
            if ident is not None and int(ident) > before:
                latencies.append(at - json.loads(data)["at"])
    live = last_seq - before
    figures.add(
        f"fan-out: {subscribers} SSE subscribers, 1 run",
        f"{last_seq} events each ({live} live); lost {lost}, dup {duplicated}, out of order {out_of_order}",
        "none lost, in order",
        lost == duplicated == out_of_order == 0,
    )
    p50, p99 = _ms(latencies, 0.50), _ms(latencies, 0.99)
    figures.add(
        "  commit -> subscriber latency",
        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(latencies) * 1000:.1f} ms "
        f"({len(latencies)} deliveries in {elapsed:.2f} s)",
        f"p50 < {FANOUT_P50_MS:g} ms",
        p50 < FANOUT_P50_MS,
    )


class Blocking:
    """A blocking keep-alive HTTP connection for the few JSON requests around the fan-out."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=payload, headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None

    def close(self) -> None:
        self.conn.close()


async def resolving(port: int, token: str, runs: int, figures: Figures) -> None:
    http = Http(port, token)
    created_at = time.perf_counter()
    run_ids: list[str] = []
    for _ in range(runs):
        status, body = await http.request("POST", "/v1/runs", {"kind": "formula", "formula": "approve"})
        assert status == 201, body
        run_ids.append(body["run"]["id"])
    waiting: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while len(waiting) < runs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(waiting)} of {runs} runs reached their question within 120 s")
        _, page = await http.request("GET", "/v1/interactions?status=open")
        for item in page["items"]:
            waiting.setdefault(item["run_id"], item["id"])
        await asyncio.sleep(0.05)
    setup = time.perf_counter() - created_at

    to_event: list[float] = []
    to_resumed: list[float] = []
    to_response: list[float] = []
    completed = 0
    for run_id in run_ids:
        interaction_id = waiting[run_id]
        _, page = await http.request("GET", f"/v1/runs/{run_id}/events?format=json&limit=1")
        stream = Stream(port, token, run_id, after=page["last_seq"])
        await stream.open()
        sent = time.perf_counter()
        status, _ = await http.request("POST", f"/v1/interactions/{interaction_id}", {"kind": "approve"})
        to_response.append(time.perf_counter() - sent)
        assert status == 200
        first = await _bounded("the next event", 10, stream.next())
        while first[0] == "heartbeat":  # the stream's heartbeat, not the run's
            first = await _bounded("the next event", 10, stream.next())
        to_event.append(time.perf_counter() - sent)
        assert first[0] == "interaction_resolved", first
        while True:
            event, _, data, _ = await _bounded("the resumed run", 10, stream.next())
            if event == "end":
                completed += json.loads(data)["status"] == "completed"
                break
            if event == "status" and json.loads(data)["code"] == "resumed":
                to_resumed.append(time.perf_counter() - sent)
        await stream.close()
    await http.close()
    p99 = _ms(to_event, 0.99)
    figures.add(
        f"resolve: {runs} waiting runs, one at a time",
        f"POST -> next event p50 {_ms(to_event, 0.5):.2f} ms, p99 {p99:.2f} ms",
        f"p99 < {RESOLVE_P99_MS:g} ms",
        p99 < RESOLVE_P99_MS,
    )
    figures.add(
        "  POST -> resumed run's first event",
        f"p50 {_ms(to_resumed, 0.5):.2f} ms, p99 {_ms(to_resumed, 0.99):.2f} ms",
    )
    figures.add(
        "  POST response time",
        f"p50 {_ms(to_response, 0.5):.2f} ms, p99 {_ms(to_response, 0.99):.2f} ms",
    )
    figures.add(
        "  runs completed after approval",
        f"{completed}/{runs} (setup: {runs} runs to their question in {setup:.1f} s)",
        "all",
        completed == runs,
    )


async def crash(
    server: Server, token: str, runs: int, slow_steps: int, slow_ms: int, figures: Figures
) -> None:
    http = Http(server.port, token)
    run_ids = []
    for _ in range(runs):
        status, body = await http.request("POST", "/v1/runs", {"kind": "formula", "formula": "slow"})
        assert status == 201, body
        run_ids.append(body["run"]["id"])
    await http.close()
    # Mid-run: once every run is past its first step (read from the store file, as another process would).
    with SQLiteStore(server.store_path) as store:

        def steps_done(run_id: str) -> int:
            return sum(
                1 for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.status == "complete"
            )

        deadline = time.monotonic() + 60
        while any(steps_done(run_id) == 0 for run_id in run_ids):
            if time.monotonic() > deadline:
                raise RuntimeError("the slow runs did not get past their first step within 60 s")
            await asyncio.sleep(0.05)
        server.kill()
        statuses = [store.get_run(run_id).status for run_id in run_ids]
        done_before = sum(steps_done(run_id) for run_id in run_ids)
    running = statuses.count("running")
    restarted = time.perf_counter()
    server.start()
    http = Http(server.port, token)
    finished = 0
    for run_id in run_ids:
        body = await _wait_status(http, run_id, {"completed", "failed", "cancelled"}, seconds=120)
        finished += body["run"]["status"] == "completed"
    recovery = time.perf_counter() - restarted
    await http.close()
    with SQLiteStore(server.store_path) as store:
        resumed = sum(
            1
            for run_id in run_ids
            if any(isinstance(e, StatusEvent) and e.code == "resumed" for e in store.events(run_id))
        )
    figures.add(
        f"crash: SIGKILL with {runs} runs mid-way",
        f"{running}/{runs} running at the kill ({done_before} of {runs * slow_steps} steps done)",
    )
    figures.add(
        "  after restart on the same store",
        f"{resumed} resumed, {finished}/{runs} completed in {recovery:.1f} s",
        "every run continues",
        finished == runs and resumed == running,
    )


# -- main ----------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _table(figures: Figures, title: str) -> None:
    width = max(len(row[0]) for row in figures.rows)
    result_width = max(len(row[1]) for row in figures.rows)
    print(title)
    print(f"{'scenario':<{width}}  {'result':<{result_width}}  {'target':<20} ok")
    for what, result, target, ok in figures.rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{what:<{width}}  {result:<{result_width}}  {target:<20} {mark}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a quick look")
    parser.add_argument("--subscribers", type=int, help="SSE subscribers of the fan-out (default 200)")
    parser.add_argument("--runs", type=int, help="waiting runs to resolve (default 1000)")
    parser.add_argument(
        "--crash-runs", type=int, help="runs in flight when the server is killed (default 200)"
    )
    args = parser.parse_args()
    subscribers = args.subscribers or (50 if args.quick else 200)
    runs = args.runs or (200 if args.quick else 1000)
    crash_runs = args.crash_runs or (50 if args.quick else 200)
    steps, pause_ms, slow_steps, slow_ms = 50, 20, 4, 1500
    load = os.getloadavg()[0]  # other work on the machine shows in the latencies: say how much there was

    with tempfile.TemporaryDirectory(prefix="plangate-bench-server-") as tmp:
        folder = Path(tmp)
        write_formulas(folder / "formulas", steps, pause_ms, slow_steps, slow_ms)
        store_path = folder / "server.db"
        token = new_token()
        with SQLiteStore(store_path) as store:
            Tokens(store).create("bench", hash_token(token), "bench")
        server = Server(store_path, folder / "formulas")
        figures = Figures()
        try:
            server.start()
            fanout(server.port, token, subscribers, figures)
            asyncio.run(resolving(server.port, token, runs, figures))
            asyncio.run(crash(server, token, crash_runs, slow_steps, slow_ms, figures))
        finally:
            server.stop()
    cores = os.cpu_count()
    # What uvicorn picks on its own ("auto"): httptools and uvloop when installed (uvicorn[standard]).
    protocol = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    _table(
        figures,
        f"plangate server on loopback: 1 uvicorn process ({protocol}, {loop}), SQLite WAL file store, token "
        f"auth, {cores} cores shared with the client (load average {load:.2f} before the run); fan-out run = "
        f"approval + {steps} tool steps {pause_ms} ms apart",
    )
    if any(ok is False for *_, ok in figures.rows):
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
