"""``plangate serve`` reads plangate.toml: its MCP servers (real ones, from PyPI) run with the server, and
their tools are listed by ``GET /v1/tools`` with their schemas (the console's tool list comes from there)
and serve agent runs started through the API.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

STARTUP_LIMIT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_serve_lists_and_runs_the_tools_of_the_mcp_servers_in_plangate_toml(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            [
                json.dumps({"action": "continue", "tool_call": {"name": "context_tools_add",
                                                                  "arguments": {"domain": "time"}}}),
                json.dumps({"action": "continue", "tool_call": {"name": "time_get_current_time",
                                                                  "arguments": {"timezone": "Asia/Tokyo"}}}),
                json.dumps({"action": "done"}),
                "It is morning in Tokyo.",
            ]
        ),
        encoding="utf-8",
    )  # fmt: skip
    config = tmp_path / "project" / "plangate.toml"
    config.parent.mkdir()
    config.write_text(
        textwrap.dedent(
            f"""
            store = "server.db"
            model = "scripted:{answers}"
            [[mcp]]
            name = "time"
            command = {json.dumps(sys.executable)}
            args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
            effect_default = "read"
            """
        ),
        encoding="utf-8",
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANGATE_")}
    command = [sys.executable, "-c", "from plangate.cli.app import main; main()", "serve", "--no-auth",
               "--port", str(port), "--config", str(config), "--log-level", "warning"]  # fmt: skip
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.3)

        tools = {tool["name"]: tool for tool in httpx.get(f"{base}/v1/tools", timeout=10).json()["items"]}
        current = tools["time_get_current_time"]
        assert (current["effect"], current["domain"], current["pack"]) == ("read", "time", "mcp")
        assert current["parameters"]["required"] == ["timezone"]
        assert current["parameters"]["properties"]["timezone"]["type"] == "string"
        assert "time_convert_time" in tools

        started = httpx.post(f"{base}/v1/runs", json={"kind": "agent", "prompt": "Time in Tokyo?",
                                                       "mode": "react"}, timeout=10)  # fmt: skip
        assert started.status_code in (200, 201, 202), started.text
        run_id = started.json()["run"]["id"]
        deadline = time.monotonic() + 60
        while (run := httpx.get(f"{base}/v1/runs/{run_id}", timeout=10).json()["run"])["status"] not in (
            "completed", "aborted", "exhausted", "failed", "cancelled",
        ):  # fmt: skip
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
        assert run["status"] == "completed", run
        events = httpx.get(f"{base}/v1/runs/{run_id}/events", params={"after": 0}, timeout=10,
                           headers={"accept": "text/event-stream"})  # fmt: skip
        assert '"tool":"time_get_current_time"' in events.text.replace(" ", "")
        assert "Asia/Tokyo" in events.text
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=15)
        log.close()
    assert (config.parent / "server.db").exists()  # the file's store, relative to the file
