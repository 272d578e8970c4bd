"""Progress while a model works: a spinner with the phase and the seconds on a terminal (a real
pseudo-terminal here), nothing of it with ``--json`` or piped output, and the ``PLANGATE_LOCAL_THREADS``
advice when the machine is busier than its CPUs."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from plangate.cli import _working
from plangate.cli._working import Working, busy_advice, phase_of
from plangate.events import StatusEvent, ToolCallEvent

PLANGATE = str(Path(sys.executable).parent / "plangate")
DONE = [json.dumps({"action": "done", "speak": "Hello."}), "Hello."]


def on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run ``plangate ARGS`` with stdout and stderr on a pseudo-terminal; everything it wrote."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [PLANGATE, *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=cwd, env=env
    ) as process:
        os.close(follower)
        chunks: list[bytes] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the process closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif process.poll() is not None:
                break
        process.wait(timeout=10)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "hello.json").write_text(json.dumps(DONE), encoding="utf-8")
    values = {k: v for k, v in os.environ.items() if not k.startswith("PLANGATE_")}
    values.update(PLANGATE_STORE=f"sqlite:///{tmp_path / 'runs.db'}", COLUMNS="100", TERM="xterm")
    return values


def test_an_agent_shows_a_spinner_with_its_phase_and_seconds_on_a_terminal(
    tmp_path: Path, env: dict[str, str]
) -> None:
    said = on_a_terminal(
        ["agent", "Say hello", "-m", f"scripted:{tmp_path / 'hello.json'}", "--mode", "react"], tmp_path, env
    )
    assert "Hello." in said
    assert "thinking · 0 s" in said or "working on the plan · 0 s" in said, said


SPINNER = re.compile(r"· \d+ s\b")  # the spinner's phase and seconds ("thinking · 3 s")


def test_no_spinner_with_json_or_piped_output(tmp_path: Path, env: dict[str, str]) -> None:
    model = f"scripted:{tmp_path / 'hello.json'}"
    on_json = on_a_terminal(["agent", "Say hello", "-m", model, "--mode", "react", "--json"], tmp_path, env)
    assert not SPINNER.search(on_json), on_json
    piped = subprocess.run(
        [PLANGATE, "agent", "Say hello", "-m", model, "--mode", "react"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert not SPINNER.search(piped.stdout + piped.stderr)


def test_the_spinner_says_the_phase_and_the_seconds() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    with Working("thinking", console=console, shown=True) as working:
        working.began -= 12
        working.note(StatusEvent(run_id="r", seq=1, at=0.0, stage="plan", code="started", text="planning"))
        working._live.refresh()
        assert working.text() == "planning · 12 s"
        working.note(ToolCallEvent(run_id="r", seq=2, at=0.0, call_id="c", tool="place", arguments={}))
        working._live.refresh()
    assert "planning · 12 s" in screen.getvalue()
    assert "calling place · 12 s" in screen.getvalue()
    assert phase_of(StatusEvent(run_id="r", seq=3, at=0.0, stage="generate", code="attempt", text="")) == (
        "writing the query"
    )


def test_a_busy_machine_gets_the_local_threads_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANGATE_LOCAL_THREADS", raising=False)
    assert busy_advice("local", load=7.1, cpus=2) == (
        "the machine is busy: load average 7.1 on 2 CPUs, so the local model answers slowly; "
        "PLANGATE_LOCAL_THREADS=1 keeps it to one thread, which stalls least on shared CPUs"
    )
    assert busy_advice("local", load=1.5, cpus=2) is None  # not busy
    assert busy_advice("openai:gpt-4o-mini", load=7.1, cpus=2) is None  # not the local model


def test_the_threads_variable_named_here_is_the_local_models() -> None:
    local = pytest.importorskip("plangate.models.local")  # the local extra
    assert _working.THREADS_ENV == local.THREADS_ENV
