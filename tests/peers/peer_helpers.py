"""What the peer tests share: free loopback ports, stopping a process group, handles of running peers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a process and its group: SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass(frozen=True)
class LlamaServer:
    """A running ``python -m llama_cpp.server``: its OpenAI-compatible base URL and its log."""

    base_url: str
    log: Path


@dataclass(frozen=True)
class HangingServer:
    """A server that takes requests and never answers; ``requests()`` counts the ones it received."""

    base_url: str
    count_file: Path

    def requests(self) -> int:
        if not self.count_file.exists():
            return 0
        return len(self.count_file.read_text().splitlines())


__all__ = ["HangingServer", "LlamaServer", "free_port", "stop"]
