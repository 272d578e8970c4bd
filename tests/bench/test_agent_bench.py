"""bench/agent.py's sessions run to their end in every runtime (a few rounds; no timing is checked here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_modules import load

agent_bench = load("agent")


@pytest.mark.parametrize("name", sorted(agent_bench.SESSIONS))
def test_each_runtime_runs_the_session_and_keeps_it(tmp_path: Path, name: str) -> None:
    # each session asserts inside that its model was called once per round and once more, and that the
    # run ended with the final answer (the Agents SDK's also that every item reached its SQLite file)
    seconds, size = agent_bench.SESSIONS[name](tmp_path, 3)
    assert seconds > 0
    assert size > 0


def test_the_durable_peers_are_those_with_a_file() -> None:
    assert set(agent_bench.DURABLE_PEERS) == {"langgraph", "openai-agents"}
    assert set(agent_bench.SESSIONS) == {"plangate", "langgraph", "openai-agents", "pydantic-ai"}


def test_the_growth_report_runs_both_lengths_and_says_their_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    agent_bench.print_growth(3, 6, 1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["3", "rounds"]
    assert lines[2].split()[:2] == ["6", "rounds"]
    assert lines[3].startswith("growth 3 -> 6 rounds: ")
