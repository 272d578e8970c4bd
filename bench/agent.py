"""Benchmark: a 200-round ReAct session in plangate and in its peers, per-round overhead and store size.

Every runtime runs the same session, in one process: a scripted model that answers instantly asks for one
read tool call per round (a different page each time, so no stall is detected), then finishes. The tool
answers instantly too, so what is measured is the runtime's own cost: building the prompt, reading the
decision, validating, running the tool, keeping the round.

- plangate: ``Agent(mode="react")`` with a ``ScriptedModel``, one ``@tool``, a ``SQLiteStore`` file (every
  round committed; WAL, ``synchronous=NORMAL``).
- LangGraph: ``langgraph.prebuilt.create_react_agent`` with a fake chat model (a small ``BaseChatModel``
  that supports ``bind_tools``), one langchain tool, and ``SqliteSaver`` on a file (a checkpoint per step).
- OpenAI Agents SDK: ``Runner.run`` with a fake ``Model`` (``get_response`` returns the round's function
  call, then the answer), one ``@function_tool``, and ``SQLiteSession`` on a file (the items of each turn
  added as they happen; WAL, the default ``synchronous=FULL``). Tracing is off: it would export to a server.
- PydanticAI: ``Agent`` with a ``FunctionModel`` (an async function: a sync one runs in a worker thread)
  and one async ``tool_plain``; its message history stays in memory: not durable, the floor to beat. Its
  "store" is that history as JSON (``ModelMessagesTypeAdapter``), what keeping it would take at least.

Per-round overhead = wall time of the whole session / rounds, median of the repetitions (the runtimes
alternate, so all see the same machine load). Store size = the database's ``page_count * page_size``
after a WAL checkpoint (the file size then matches it).

Targets: plangate's per-round overhead at most 0.30 ms, at least 25x lower than LangGraph's and 15x lower
than the Agents SDK's (the durable peers), and at least 2x lower than PydanticAI's in memory; its store at
most 1/100 the size of LangGraph's checkpoint database.

Prefix reuse (one more session of each, untimed): every prompt of the session is laid out with the chat
template of the bundled SmolLM2 model and tokenized by llama.cpp (vocabulary only), and each round's prompt is
compared with the previous round's. ``cached`` = the tokens of a round's prompt that are a prefix of the
previous round's prompt, over the round's prompt tokens (what a prefix cache serves; the target is >= 90%
from round 3 on); ``kept`` = the same shared prefix over the previous round's prompt tokens (100% when a
prompt only grows at its end). LangGraph's prebuilt ReAct agent is append-only by construction, the anchor;
its tools are sent before the messages as a system block of their JSON schemas, where an OpenAI-compatible
server's chat template puts them.

Growth (``--growth N``, plangate alone): the per-round overhead of a session of N rounds over that of the
measured one (``--rounds``), each the median of the repetitions: how much a round costs more late in a long
session (its prompt and its record grow; what is laid out again each round should not). No target is set;
the formula runs keep theirs at most 1.25 from 1,000 to 10,000 steps (``bench/formulas.py``).

Floors (``--floors``, with the timings): what bounds plangate's two figures against LangGraph from below.
Its round with the store in memory (nothing written to a file) beside its round on a file, alternating:
what the file's commit costs, against the round's budget (LangGraph's round / 25). And its store's fixed
part, a new store's size before any run (the schema: SQLite gives every table and index a page of its
own, used or not), beside what the session itself added, against the store's budget (LangGraph's / 100).

Run:  .venv/bin/python bench/agent.py                 (200 rounds, 5 repetitions)
      .venv/bin/python bench/agent.py --timings-only    (no prefix reuse)
      .venv/bin/python bench/agent.py --timings-only --repeat 3 --growth 800
      .venv/bin/python bench/agent.py --timings-only --repeat 3 --floors
      .venv/bin/python bench/agent.py --rounds 50 --repeat 3
      .venv/bin/python bench/agent.py --prefix-only     (only the prefix reuse, no timings)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from plangate.agent import Agent
from plangate.interactions import Answer
from plangate.models import ModelRequest, ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools import tool

ROUND_TARGET = 300e-6
"""Seconds a round of plangate's at most."""
OVERHEAD_TARGETS = {"langgraph": 25.0, "openai-agents": 15.0, "pydantic-ai": 2.0}
"""How many times lower than each peer's plangate's per-round overhead is, at least."""
SIZE_TARGET = 100.0


def observation(page: int) -> str:
    """What the read tool returns for a page, in both runtimes."""
    return f"page {page}: 3 items (alpha-{page}, beta-{page}, gamma-{page})"


# -- plangate ---------------------------------------------------------------------------------------------


Turns = list[tuple[str, str]]
"""A prompt as (role, text) turns, the way a chat template reads it."""


def plangate_session(
    folder: Path, rounds: int, prompts: list[Turns] | None = None, talk: bool = False, memory: bool = False
) -> tuple[float, int]:
    """Run the session once; returns (seconds, store bytes). ``prompts`` collects each execute prompt.

    ``talk``: each round also says what it does (``speak``, as LangGraph's messages carry text), and half way
    the model asks the user whether to go on, and a person answers. ``memory``: on a SQLite store in memory
    (no file written: 0 bytes kept), for ``--floors``.
    """

    @tool
    async def lookup(page: int) -> str:
        """Read one page of the catalogue."""
        return observation(page)

    count = 0
    asked = False

    def script(request: ModelRequest) -> str:
        nonlocal count, asked
        if request.purpose == "deliver":
            return "All pages read."
        if talk and not asked and count == rounds // 2:
            asked = True
            return json.dumps({"action": "ask_user", "speak": QUESTION})
        count += 1
        if count <= rounds:
            call = {"name": "lookup", "arguments": {"page": count}}
            said = {"speak": f"Reading page {count}."} if talk else {}
            return json.dumps(
                {"action": "continue", **said, "reason": f"read page {count}", "tool_call": call}
            )
        return json.dumps({"action": "done", "speak": "Finished."})

    path = folder / "plangate.db"
    store = SQLiteStore(":memory:" if memory else path)
    model = ScriptedModel(script)
    agent = Agent(model, tools=[lookup], store=store, mode="react", max_rounds=rounds + 5)
    started = time.perf_counter()
    result = agent.run("Read every page of the catalogue")
    if talk and result.interaction is not None:
        result = agent.resume(result.run_id, result.interaction.id, Answer(text=ANSWER))
    elapsed = time.perf_counter() - started
    store.close()
    assert result.status == "completed", result
    assert count == rounds + 1, count
    if prompts is not None:
        for request in model.requests:
            if request.purpose == "execute":
                prompts.append([(message.role, message.content) for message in request.messages])
    return elapsed, 0 if memory else database_size(path)


QUESTION = "Shall I go on?"
ANSWER = "Yes, go on."


# -- LangGraph --------------------------------------------------------------------------------------------


def langgraph_session(
    folder: Path, rounds: int, prompts: list[Turns] | None = None, talk: bool = False
) -> tuple[float, int]:
    """Run the same session in LangGraph once; returns (seconds, checkpoint database bytes). ``prompts``
    collects each model call's prompt; ``talk`` as for plangate (the answer continues the same thread)."""
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
        pages: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any
        ) -> ChatResult:
            if prompts is not None:
                prompts.append(langgraph_turns(messages, [lookup]))
            self.calls += 1
            if talk and self.calls == rounds // 2 + 1:
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=QUESTION))])
            self.pages += 1
            if self.pages <= rounds:
                call = {"name": "lookup", "args": {"page": self.pages}, "id": f"call_{self.pages}"}
                text = f"Reading page {self.pages}." if talk else f"read page {self.pages}"
                message = AIMessage(content=text, tool_calls=[call])
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
    if talk:
        state = graph.invoke({"messages": [("user", ANSWER)]}, config)
    elapsed = time.perf_counter() - started
    conn.close()
    assert model.calls == rounds + 1 + talk, model.calls
    assert state["messages"][-1].content == "All pages read."
    return elapsed, database_size(path)


def langgraph_turns(messages: Sequence[Any], tools: Sequence[Any]) -> Turns:
    """A LangGraph prompt as an OpenAI-compatible server lays it out: the tools' schemas first, then each
    message, tool calls as their JSON."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    schemas = "\n".join(json.dumps(convert_to_openai_tool(item), separators=(",", ":")) for item in tools)
    turns: Turns = [("system", f"Tools:\n{schemas}")]
    for message in messages:
        role = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}[message.type]
        text = str(message.content)
        calls = getattr(message, "tool_calls", None)
        if calls:
            text += "\n" + json.dumps(
                [{"name": c["name"], "arguments": c["args"], "id": c["id"]} for c in calls],
                separators=(",", ":"),
            )
        turns.append((role, text))
    return turns


# -- OpenAI Agents SDK ------------------------------------------------------------------------------------


def openai_agents_session(folder: Path, rounds: int) -> tuple[float, int]:
    """Run the same session in the OpenAI Agents SDK once; returns (seconds, session database bytes)."""
    from agents import Agent as SdkAgent
    from agents import ModelResponse, Runner, SQLiteSession, Usage, function_tool, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    @function_tool
    async def lookup(page: int) -> str:
        """Read one page of the catalogue."""
        return observation(page)

    class ScriptedSdkModel(Model):
        """Answers instantly: a function call per round, then a final message."""

        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.calls += 1
            item: Any
            if self.calls <= rounds:
                item = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{self.calls}",
                    call_id=f"call_{self.calls}",
                    name="lookup",
                    arguments=json.dumps({"page": self.calls}),
                    status="completed",
                )
            else:
                text = ResponseOutputText(type="output_text", text="All pages read.", annotations=[])
                item = ResponseOutputMessage(
                    type="message", id="msg_final", role="assistant", status="completed", content=[text]
                )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the bench runs without streaming")

    path = folder / "openai-agents.db"
    session = SQLiteSession("bench", path)
    model = ScriptedSdkModel()
    agent = SdkAgent(name="reader", instructions="Read every page.", model=model, tools=[lookup])
    started = time.perf_counter()
    # a loop of its own, closed at the end (``run_sync`` leaves a default loop open behind it)
    asking = Runner.run(agent, "Read every page of the catalogue", session=session, max_turns=rounds + 5)
    result = asyncio.run(asking)
    elapsed = time.perf_counter() - started
    session.close()
    assert result.final_output == "All pages read.", result.final_output
    assert model.calls == rounds + 1, model.calls
    conn = sqlite3.connect(path)
    try:
        stored = conn.execute("SELECT count(*) FROM agent_messages").fetchone()[0]
    finally:
        conn.close()
    assert stored == 2 * rounds + 2, stored  # the input, each call and its output, the answer
    return elapsed, database_size(path)


# -- PydanticAI -------------------------------------------------------------------------------------------


def pydantic_ai_session(folder: Path, rounds: int) -> tuple[float, int]:
    """Run the same session in PydanticAI once; returns (seconds, its message history's JSON bytes)."""
    from pydantic_ai import Agent as PaiAgent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
        TextPart,
        ToolCallPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    calls = 0

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls <= rounds:
            call = ToolCallPart("lookup", {"page": calls}, tool_call_id=f"call_{calls}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("All pages read.")])

    agent = PaiAgent(FunctionModel(respond), instructions="Read every page.")

    @agent.tool_plain
    async def lookup(page: int) -> str:
        """Read one page of the catalogue."""
        return observation(page)

    limits = UsageLimits(request_limit=rounds + 5)
    started = time.perf_counter()
    result = asyncio.run(agent.run("Read every page of the catalogue", usage_limits=limits))
    elapsed = time.perf_counter() - started
    assert result.output == "All pages read.", result.output
    assert calls == rounds + 1, calls
    return elapsed, len(ModelMessagesTypeAdapter.dump_json(result.all_messages()))


# -- prefix reuse -----------------------------------------------------------------------------------------


class Tokens:
    """Prompts as tokens: the bundled SmolLM2 model's chat template and its tokenizer (llama.cpp, vocabulary
    only: nothing is evaluated)."""

    def __init__(self) -> None:
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from plangate.models.local import packaged_model_path

        self.llama = llama_cpp.Llama(model_path=str(packaged_model_path()), vocab_only=True, verbose=False)
        template = self.llama.metadata["tokenizer.chat_template"]
        self.formatter = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")

    def __call__(self, turns: Turns) -> list[int]:
        messages: Any = [{"role": role, "content": text} for role, text in turns]
        prompt = self.formatter(messages=messages).prompt
        return list(self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))


def shared_prefix(left: Sequence[int], right: Sequence[int]) -> int:
    """How many tokens two sequences share from their start."""
    count = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        count += 1
    return count


def prefix_reuse(prompts: list[Turns], tokens: Tokens) -> list[tuple[int, int, float, float]]:
    """Per round from the second: (round, prompt tokens, cached share, kept share)."""
    encoded = [tokens(turns) for turns in prompts]
    found = []
    for number, (before, after) in enumerate(itertools.pairwise(encoded), start=2):
        shared = shared_prefix(before, after)
        found.append((number, len(after), shared / len(after), shared / len(before)))
    return found


def prefix_report(rounds: int, talk: bool) -> dict[str, list[tuple[int, int, float, float]]]:
    """One session of each runtime, its prompts collected, and their prefix reuse."""
    tokens = Tokens()
    reuse = {}
    for name, session in (("plangate", plangate_session), ("langgraph", langgraph_session)):
        prompts: list[Turns] = []
        with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
            session(Path(folder), rounds, prompts, talk)
        reuse[name] = prefix_reuse(prompts, tokens)
    return reuse


def print_prefix(reuse: dict[str, list[tuple[int, int, float, float]]]) -> None:
    print("Prefix reuse per round, SmolLM2's chat template and tokenizer (cached = shared prefix / this")
    print("round's prompt; kept = shared prefix / the previous round's prompt)")
    marks = (2, 3, 10, 50)
    header = ("runtime", "share", *(f"round {n}" for n in marks), "last", "median 3+", "min 3+")
    print(" ".join(f"{h:>10}" for h in header))
    for name, rows in reuse.items():
        later = [row for row in rows if row[0] >= 3]
        for label, column in (("cached", 2), ("kept", 3)):
            by_round = {row[0]: row[column] for row in rows}
            values = [float(row[column]) for row in later]
            cells = [
                name if column == 2 else "",
                label,
                *(f"{by_round[n]:.1%}" if n in by_round else "-" for n in marks),
                f"{rows[-1][column]:.1%}" if rows else "-",
                f"{statistics.median(values):.1%}" if values else "-",
                f"{min(values):.1%}" if values else "-",
            ]
            print(" ".join(f"{cell:>10}" for cell in cells))
    for name, rows in reuse.items():
        if rows:
            print(f"{name}: {rows[0][1]} prompt tokens at round 2, {rows[-1][1]} at round {rows[-1][0]}")
    plangate = [row for row in reuse["plangate"] if row[0] >= 3]
    if plangate:
        lowest = min(k for _, _, _, k in plangate)
        verdict = "met" if lowest >= 0.9 else "MISSED"
        print(f"{'target: kept >= 90% from round 3 on':<40} {lowest:>7.1%}  {verdict}")


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


def empty_store_size(folder: Path) -> int:
    """Bytes a new plangate store holds before any run: its schema, a page for each table and index."""
    path = folder / "empty.db"
    SQLiteStore(path).close()
    return database_size(path)


Session = Callable[[Path, int], tuple[float, int]]

SESSIONS: dict[str, Session] = {
    "plangate": plangate_session,
    "langgraph": langgraph_session,
    "openai-agents": openai_agents_session,
    "pydantic-ai": pydantic_ai_session,
}
DURABLE_PEERS = ("langgraph", "openai-agents")
"""The peers that keep the session on disk as plangate does; PydanticAI keeps it in memory."""


def repeat(rounds: int, times: int) -> dict[str, tuple[list[float], list[int]]]:
    """Run every session ``times`` times, alternating, so that all see the same machine load."""
    results: dict[str, tuple[list[float], list[int]]] = {name: ([], []) for name in SESSIONS}
    for _ in range(times):
        for name, session in SESSIONS.items():
            with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
                seconds, size = session(Path(folder), rounds)
            results[name][0].append(seconds)
            results[name][1].append(size)
    return results


def print_timings(rounds: int, times: int, results: dict[str, tuple[list[float], list[int]]]) -> None:
    """The table of every runtime, then plangate's ratio to each peer against the targets."""
    print(f"ReAct session: {rounds} tool rounds + a final answer, {times} repetitions, load {load()}")
    header = ("runtime", "median µs/round", "min µs/round", "total s (median)", "store KiB", "kept")
    print(f"{header[0]:<14} {header[1]:>16} {header[2]:>13} {header[3]:>17} {header[4]:>10}  {header[5]}")
    per_round: dict[str, float] = {}
    size: dict[str, int] = {}
    for name, (seconds, sizes) in results.items():
        per_round[name] = statistics.median(seconds) / rounds
        size[name] = int(statistics.median(sizes))
        kept = "in memory (history as JSON)" if name == "pydantic-ai" else "SQLite file"
        print(
            f"{name:<14} {per_round[name] * 1e6:>16.1f} {min(seconds) / rounds * 1e6:>13.1f} "
            f"{statistics.median(seconds):>17.3f} {size[name] / 1024:>10.1f}  {kept}"
        )
    print()
    print(f"{'target':<56} {'ratio':>8}  result")
    mine = per_round["plangate"]
    met = "met" if mine <= ROUND_TARGET else "MISSED"
    print(f"{'per-round overhead <= 0.30 ms':<56} {mine * 1e3:>6.3f}ms  {met}")
    checks = [
        (
            f"per-round overhead >= {target:g}x below {peer}"
            + (" (memory)" if peer == "pydantic-ai" else ""),
            per_round[peer] / mine,
            target,
        )
        for peer, target in OVERHEAD_TARGETS.items()
    ]
    checks.append(
        (f"store size <= 1/{SIZE_TARGET:g} of langgraph", size["langgraph"] / size["plangate"], SIZE_TARGET)
    )
    for label, ratio, target in checks:
        print(f"{label:<56} {ratio:>7.1f}x  {'met' if ratio >= target else 'MISSED'}")
    versus_sdk = size["openai-agents"] / size["plangate"]
    print(f"{'store size, openai-agents / plangate (no target)':<56} {versus_sdk:>7.1f}x")


def print_growth(rounds: int, longer: int, times: int) -> None:
    """plangate's per-round overhead at ``rounds`` and at ``longer`` rounds (alternating), and their ratio."""
    seconds: dict[int, list[float]] = {rounds: [], longer: []}
    for _ in range(times):
        for count in seconds:
            with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
                seconds[count].append(plangate_session(Path(folder), count)[0] / count)
    median = {count: statistics.median(values) for count, values in seconds.items()}
    print(f"plangate per round, {times} repetitions, load {load()}")
    for count, value in median.items():
        print(f"{count:>6} rounds  {value * 1e6:>8.1f} µs/round (min {min(seconds[count]) * 1e6:.1f})")
    print(f"growth {rounds} -> {longer} rounds: {median[longer] / median[rounds]:.2f}x per round (no target)")


def print_floors(rounds: int, times: int, results: dict[str, tuple[list[float], list[int]]]) -> None:
    """What bounds plangate's figures against LangGraph's from below (see the docstring): its round on a
    file and with the store in memory (alternating), and its store's fixed part (an empty store) beside
    the session's own rows; each beside its budget, LangGraph's figure over the target ratio."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(times):
        for memory in seconds:
            with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
                seconds[memory].append(plangate_session(Path(folder), rounds, memory=memory)[0] / rounds)
    on_file, in_memory = (statistics.median(seconds[memory]) for memory in (False, True))
    peer = statistics.median(results["langgraph"][0]) / rounds
    with tempfile.TemporaryDirectory(prefix="plangate-bench-") as folder:
        empty = empty_store_size(Path(folder))
    kept = int(statistics.median(results["plangate"][1]))
    peer_size = int(statistics.median(results["langgraph"][1]))
    rows = kept - empty
    ratio = OVERHEAD_TARGETS["langgraph"]
    print(f"Floors, {times} repetitions, load {load()}; budget = LangGraph's figure / the target ratio")
    print(f"{'round, store on a file':<44} {on_file * 1e6:>9.1f} µs")
    print(f"{'round, store in memory (no file written)':<44} {in_memory * 1e6:>9.1f} µs")
    print(f"{f'budget (LangGraph / {ratio:g})':<44} {peer / ratio * 1e6:>9.1f} µs")
    print(f"{'store after the session':<44} {kept / 1024:>9.1f} KiB")
    print(f"{'  an empty store (its schema)':<44} {empty / 1024:>9.1f} KiB")
    print(
        f"{'  the session beyond it':<44} {rows / 1024:>9.1f} KiB"
        f"  (LangGraph's store / {peer_size / rows if rows > 0 else float('inf'):.1f})"
    )
    print(f"{f'budget (LangGraph / {SIZE_TARGET:g})':<44} {peer_size / SIZE_TARGET / 1024:>9.1f} KiB")


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes), as uptime prints them."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="tool rounds in the session (default 200)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions; the median is reported")
    parser.add_argument(
        "--growth", type=int, metavar="N", help="plangate's per-round overhead at N rounds over --rounds'"
    )
    parser.add_argument(
        "--floors", action="store_true", help="also measure what bounds plangate from below (see above)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--prefix-only", action="store_true", help="measure only the prefix reuse")
    which.add_argument("--timings-only", action="store_true", help="measure only the timings")
    args = parser.parse_args()
    rounds, times = args.rounds, args.repeat
    if not args.timings_only:
        for talk in (False, True):
            kind = (
                "with visible text each round and a question answered half way" if talk else "tool calls only"
            )
            print(f"Session {kind}:")
            print_prefix(prefix_report(rounds, talk))
            print()
    if args.prefix_only:
        return
    results = repeat(rounds, times)
    print_timings(rounds, times, results)
    if args.floors:
        print()
        print_floors(rounds, times, results)
    if args.growth:
        print()
        print_growth(rounds, args.growth, times)


if __name__ == "__main__":
    main()
