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


def test_the_floors_report_says_the_round_in_memory_and_the_store_beyond_its_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seconds, size = agent_bench.plangate_session(tmp_path, 3)
    empty = agent_bench.empty_store_size(tmp_path)
    assert 0 < empty < size  # the session's rows are added to the schema's pages
    results = {"plangate": ([seconds], [size]), "langgraph": ([1.0], [1024 * 1024])}
    agent_bench.print_floors(3, 1, results)
    lines = capsys.readouterr().out.splitlines()
    labels = [line[:44].strip() for line in lines[1:]]
    assert labels == [
        "round, store on a file",
        "round, store in memory (no file written)",
        "budget (LangGraph / 25)",
        "store after the session",
        "an empty store (its schema)",
        "the session beyond it",
        "budget (LangGraph / 100)",
    ]
    figures = [line[44:].split()[0] for line in lines[1:]]
    assert figures[2] == f"{1.0 / 3 / 25 * 1e6:.1f}"
    assert figures[3:6] == [f"{size / 1024:.1f}", f"{empty / 1024:.1f}", f"{(size - empty) / 1024:.1f}"]
    assert figures[6] == f"{1024 * 1024 / 100 / 1024:.1f}"
    assert lines[6].endswith(f"(LangGraph's store / {1024 * 1024 / (size - empty):.1f})")


def test_a_session_in_memory_keeps_nothing_on_disk(tmp_path: Path) -> None:
    seconds, size = agent_bench.plangate_session(tmp_path, 3, memory=True)
    assert seconds > 0
    assert size == 0
    assert list(tmp_path.iterdir()) == []
