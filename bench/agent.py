"""Benchmark: a 200-round ReAct session in plangate and in LangGraph, per-round overhead and store size.

Both agents run the same session, in one process, against a SQLite file in a temporary folder: a scripted
model that answers instantly asks for one read tool call per round (a different page each time, so no
stall is detected), then finishes. The tool answers instantly too, so what is measured is the runtime's
own cost: building the prompt, reading the decision, validating, running the tool, committing the round.

- plangate: ``Agent(mode="react")`` with a ``ScriptedModel``, one ``@tool``, a ``SQLiteStore`` file.
- LangGraph: ``langgraph.prebuilt.create_react_agent`` with a fake chat model (a small ``BaseChatModel``
  that supports ``bind_tools``), one langchain tool, and ``SqliteSaver`` on a file.

Per-round overhead = wall time of the whole session / rounds, median of the repetitions (the two runtimes
alternate, so both see the same machine load). Store size = the database's ``page_count * page_size``
after a WAL checkpoint (the file size then matches it).

Targets: plangate's per-round overhead at least 10x lower than LangGraph's; its store at most 1/20 the size
of LangGraph's checkpoint database.

Run:  .venv/bin/python bench/agent.py                 (200 rounds, 5 repetitions)
      .venv/bin/python bench/agent.py --rounds 50 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from plangate.agent import Agent
from plangate.models import ModelRequest, ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools import tool

OVERHEAD_TARGET = 10.0
SIZE_TARGET = 20.0


def observation(page: int) -> str:
    """What the read tool returns for a page, in both runtimes."""
    return f"page {page}: 3 items (alpha-{page}, beta-{page}, gamma-{page})"


# -- plangate ---------------------------------------------------------------------------------------------


def plangate_session(folder: Path, rounds: int) -> tuple[float, int]:
    """Run the session once; returns (seconds, store bytes)."""

    @tool
    async def lookup(page: int) -> str:
        """Read one page of the catalogue."""
        return observation(page)

    count = 0

    def script(request: ModelRequest) -> str:
        nonlocal count
        if request.purpose == "deliver":
            return "All pages read."
        count += 1
        if count <= rounds:
            call = {"name": "lookup", "arguments": {"page": count}}
            return json.dumps({"action": "continue", "reason": f"read page {count}", "tool_call": call})
        return json.dumps({"action": "done", "speak": "Finished."})

    path = folder / "plangate.db"
    store = SQLiteStore(path)
    agent = Agent(ScriptedModel(script), tools=[lookup], store=store, mode="react", max_rounds=rounds + 5)
    started = time.perf_counter()
    result = agent.run("Read every page of the catalogue")
    elapsed = time.perf_counter() - started
    store.close()
    assert result.status == "completed", result
    assert count == rounds + 1, count
    return elapsed, database_size(path)


# -- LangGraph --------------------------------------------------------------------------------------------


def langgraph_session(folder: Path, rounds: int) -> tuple[float, int]:
    """Run the same session in LangGraph once; returns (seconds, checkpoint database bytes)."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.prebuilt import create_react_agent

    @lc_tool
    def lookup(page: int) -> str:
        """Read one page of the catalogue."""
        return observation(page)

    class ScriptedChat(BaseChatModel):
        """Answers instantly: a tool call per round, then a final answer."""

        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any
        ) -> ChatResult:
            self.calls += 1
            if self.calls <= rounds:
                call = {"name": "lookup", "args": {"page": self.calls}, "id": f"call_{self.calls}"}
                message = AIMessage(content=f"read page {self.calls}", tool_calls=[call])
            else:
                message = AIMessage(content="All pages read.")
            return ChatResult(generations=[ChatGeneration(message=message)])

    path = folder / "langgraph.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    model = ScriptedChat()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prebuilt warns that it moved; it is still the one shipped
        graph = create_react_agent(model, [lookup], checkpointer=saver)
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * rounds + 10}
    started = time.perf_counter()
    state = graph.invoke({"messages": [("user", "Read every page of the catalogue")]}, config)
    elapsed = time.perf_counter() - started
    conn.close()
    assert model.calls == rounds + 1, model.calls
    assert state["messages"][-1].content == "All pages read."
    return elapsed, database_size(path)


# -- measuring --------------------------------------------------------------------------------------------


def database_size(path: Path) -> int:
    """Bytes the database holds once its WAL is checkpointed (``page_count * page_size``)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(pages) * int(size)


def repeat(rounds: int, times: int) -> dict[str, tuple[list[float], list[int]]]:
    """Run both sessions ``times`` times, alternating, so that both see the same machine load."""
    sessions: dict[str, Callable[[Path, int], tuple[float, int]]] = {
        "plangate": plangate_session,
        "langgraph": langgraph_session,
    }
    results: dict[str, tuple[list[float], list[int]]] = {name: ([], []) for name in sessions}
    for _ in range(times):
        for name, session in sessions.items():
            with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
                seconds, size = session(Path(folder), rounds)
            results[name][0].append(seconds)
            results[name][1].append(size)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="tool rounds in the session (default 200)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions; the median is reported")
    args = parser.parse_args()
    rounds, times = args.rounds, args.repeat
    results = repeat(rounds, times)

    print(f"ReAct session: {rounds} tool rounds + a final answer, {times} repetitions, SQLite files")
    header = ("runtime", "median ms/round", "min ms/round", "total s (median)", "store KiB")
    print(f"{header[0]:<10} {header[1]:>16} {header[2]:>13} {header[3]:>17} {header[4]:>10}")
    per_round: dict[str, float] = {}
    size: dict[str, int] = {}
    for name, (seconds, sizes) in results.items():
        per_round[name] = statistics.median(seconds) / rounds
        size[name] = int(statistics.median(sizes))
        print(
            f"{name:<10} {per_round[name] * 1000:>16.3f} {min(seconds) / rounds * 1000:>13.3f} "
            f"{statistics.median(seconds):>17.3f} {size[name] / 1024:>10.1f}"
        )
    overhead = per_round["langgraph"] / per_round["plangate"]
    store = size["langgraph"] / size["plangate"]
    print()
    print(f"{'target':<40} {'ratio':>8}  result")
    for label, ratio, target in (
        ("per-round overhead >= 10x lower", overhead, OVERHEAD_TARGET),
        ("store size <= 1/20 of LangGraph", store, SIZE_TARGET),
    ):
        print(f"{label:<40} {ratio:>7.1f}x  {'met' if ratio >= target else 'MISSED'}")


if __name__ == "__main__":
    main()
