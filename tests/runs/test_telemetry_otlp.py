"""Spans sent over OTLP/HTTP by real processes to Arize Phoenix, read back from Phoenix: a run consented to
and resumed in another process is one trace, with the expected tree and each span once.

Phoenix is the session's (``phoenix_plugin.py``); the processes export through its tee, which keeps every
span it passed on, so a span sent twice with one id (which Phoenix would keep once) fails the test too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from phoenix_plugin import PhoenixServer, shape, tree
from plangate.runs.telemetry._spans import derived_id
from plangate.store import open_store

WORKER = Path(__file__).parents[1] / "agent" / "agent_worker.py"


def _worker(phoenix: PhoenixServer, store: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(WORKER), store, *args],
        capture_output=True,
        text=True,
        env=phoenix.env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def trace_of(store: str, run_id: str) -> str:
    """The trace id (hex) of ``run_id``'s trace: derived from the run at the top of its parent chain."""
    with open_store(store) as opened:
        return f"{derived_id(128, 'trace', opened.root_of(run_id)):032x}"


@pytest.mark.slow
def test_a_run_resumed_in_another_process_is_one_trace_each_span_once(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'plangate.db'}"
    run_id, interaction_id = _worker(phoenix, store, "start").split()
    trace = trace_of(store, run_id)
    # the call of the step that asked, sent by the first process
    assert [span["name"] for span in phoenix.sent(trace)] == ["chat scripted"]
    assert _worker(phoenix, store, "approve", run_id, interaction_id).startswith("completed")

    expected = [
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("chat scripted", "invoke_agent plangate"),
        ("execute_tool place", "invoke_agent plangate"),
        ("invoke_agent plangate", None),
        ("plangate.wait confirm", "invoke_agent plangate"),
    ]
    spans = phoenix.spans(trace, len(expected))
    print(f"\n{tree(spans)}")  # the tree as Phoenix has it (pytest -s)
    assert shape(spans) == expected
    sent = [span["span_id"] for span in phoenix.sent(trace)]
    assert len(sent) == len(set(sent)) == len(expected), "a span was sent twice"
    root = next(span for span in spans if span["parent_id"] is None)
    attributes = root["attributes"]
    assert isinstance(attributes, dict)
    assert attributes["plangate.run.id"] == run_id and attributes["plangate.outcome.code"] == "done"
