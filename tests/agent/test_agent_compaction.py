"""The execute prompt stays within its token budget on long runs: estimate, compaction, summary, fallback."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from agent_helpers import memory_store, of_type

from plangate.agent import Agent
from plangate.agent._context import PINNED
from plangate.agent._state import AgentState, Memory, read_input
from plangate.agent._tokens import Meter, clip, estimate_tokens, text_tokens
from plangate.errors import ConfigError
from plangate.events import StatusEvent
from plangate.interactions import Answer
from plangate.models import Message, ModelChunk, ModelRequest, ScriptedModel, Usage, Wire
from plangate.store import Store
from plangate.tools import ToolRegistry, tool

BUDGET = 6_000
LIMIT = BUDGET - BUDGET // 10  # the default reserve is a tenth of the budget
LAST_ROUND = 155
STEP_ENDS = (50, 100)
FILL = "the quarterly figures hold steady across every region and product line; " * 16
STEPS = ("Read part one", "Read part two", "Read part three")


# -- the estimate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "tokens"),
    [
        ([], 0),
        ([""], 6),
        (["abcd"], 1 + 6),
        (["abcde"], 2 + 6),
        (["你好世界"], 4 + 6),
        (["こんにちは"], 5 + 6),  # kana
        (["안녕"], 2 + 6),  # hangul
        (["，。"], 2 + 6),  # CJK punctuation
        (["éé"], 1 + 6),
        (["Привет"], 3 + 6),  # other scripts: one token per two characters
        (["ab你é"], 1 + 1 + 6),  # 1 CJK + (2 ASCII / 4 + 1 other / 2 = 1, rounded up)
        (["abcde", "你好"], (2 + 6) + (2 + 6)),
        (["a" * 400, "é" * 3], (100 + 6) + (2 + 6)),
    ],
)
def test_the_estimate_counts_cjk_ascii_and_other_characters(texts: list[str], tokens: int) -> None:
    assert estimate_tokens([Message("user", text) for text in texts]) == tokens


@pytest.mark.parametrize("text", ["x" * 1_000, "数据" * 500, "données " * 200, "mixed 数据 é " * 100])
def test_clip_cuts_the_middle_to_fit_and_keeps_both_ends(text: str) -> None:
    clipped = clip(text, 40)

    assert text_tokens(clipped) <= 40
    assert " [...] " in clipped
    assert text.startswith(clipped.split(" [...] ")[0]) and text.endswith(clipped.split(" [...] ")[1])
    assert clip("short", 40) == "short"


def test_the_meter_scales_the_estimate_by_the_providers_own_count() -> None:
    meter = Meter()
    prompt = [Message("user", "a" * 400)]  # estimated at 106

    assert (meter.tokens(106), meter.room(1_000)) == (106, 1_000)
    meter.observe(prompt, 212)
    assert (meter.tokens(106), meter.room(1_000)) == (212, 500)
    meter.observe(prompt, 0)  # no count: the last one stands
    assert meter.scale == 2.0
    meter.observe(prompt, 10_000)  # not measuring the same thing: clamped
    assert meter.scale == 4.0


# -- a long run -----------------------------------------------------------------------------------------


def _registry() -> ToolRegistry:
    @tool
    def read_page(n: int) -> str:
        """Read one page of the report."""
        return f"page {n}: {FILL}"

    return ToolRegistry([read_page])


def _prompt(request: ModelRequest) -> str:
    """Everything a request shows after its system message: the run's history, then the state message."""
    return "\n\n".join(message.content for message in request.messages[1:])


def _read(number: int) -> str:
    """How a prompt shows the result of reading page ``number`` (the record stays verbatim)."""
    return f"page {number}: {FILL}"


def _round(request: ModelRequest) -> int:
    found = re.search(r"Round (\d+) of", request.messages[-1].content)
    assert found is not None
    return int(found.group(1))


def _summarise(request: ModelRequest) -> str:
    """A summariser that keeps every page number it was shown, from the records and the summary so far."""
    text = request.messages[-1].content
    pages = {int(n) for n in re.findall(r"observation: page (\d+):", text)}
    for listed in re.findall(r"Pages read: ([\d,]+)", text):
        pages |= {int(n) for n in listed.split(",")}
    notes = re.findall(r"^Note: .*$", text, re.MULTILINE)
    notes += [f"Note: the user said {said}" for said in re.findall(r"\[user said\]\n(.*)", text)]
    return "\n".join([f"Pages read: {','.join(map(str, sorted(pages)))}", *notes])


@dataclass
class Script:
    """The model's side of a long planned run, read off each prompt (so a new object continues it)."""

    ask_at: int | None = None
    malformed_every: int | None = None
    compact: Callable[[ModelRequest], str] = _summarise

    def __call__(self, request: ModelRequest) -> str:
        if request.purpose == "compact":
            return self.compact(request)
        if request.purpose == "plan":
            steps = [{"content": step, "done_when": "its pages are read"} for step in STEPS]
            return json.dumps({"action": "plan_done", "plan_steps": steps})
        if request.purpose == "deliver":
            return "The report is read."
        number = _round(request)
        if self.malformed_every and number % self.malformed_every == 3:
            return "not a decision"
        if number == self.ask_at:
            return json.dumps({"action": "ask_user", "speak": "Which appendix should I read?"})
        if number in STEP_ENDS or number == LAST_ROUND:
            action = "done" if number == LAST_ROUND else "next_plan"
            return json.dumps({"action": action, "goal_check": "its pages are read"})
        speak = f"Read up to page {number}." if number % 7 == 0 else None
        call = {"name": "read_page", "arguments": {"n": number}}
        return json.dumps({"action": "continue", "speak": speak, "tool_call": call})

    def reads(self, number: int) -> bool:
        """Whether round ``number`` reads a page."""
        malformed = bool(self.malformed_every) and number % (self.malformed_every or 1) == 3
        return 2 <= number < LAST_ROUND and number not in (*STEP_ENDS, self.ask_at) and not malformed


@dataclass
class Provider:
    """A scripted model whose provider reports ``factor`` times the estimate as input tokens (0: no usage),
    so the tests know exactly what the runtime's meter saw."""

    script: Callable[[ModelRequest], str]
    factor: float = 0.0
    scripted: ScriptedModel = field(init=False)

    def __post_init__(self) -> None:
        self.scripted = ScriptedModel(self.script)

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def wire(self) -> Wire:
        return "json"

    @property
    def requests(self) -> list[ModelRequest]:
        return self.scripted.requests

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        async for chunk in self.scripted.stream(request):
            if not isinstance(chunk, Usage):
                yield chunk
            elif self.factor:
                yield Usage(round(self.factor * estimate_tokens(request.messages)), chunk.output_tokens)


def _agent(model: Provider, store: Store) -> Agent:
    return Agent(
        model=model, tools=_registry(), store=store, mode="plan", max_rounds=200, context_budget=BUDGET
    )


def _long_run(script: Script, factor: float = 0.0) -> tuple[Provider, Store, str]:
    model, store = Provider(script, factor), memory_store()
    result = _agent(model, store).run("Read the quarterly report")
    assert (result.status, result.answer) == ("completed", "The report is read.")
    return model, store, result.run_id


def _step(number: int) -> int:
    return sum(1 for end in STEP_ENDS if number > end)


def _memory(store: Store, run_id: str) -> Memory:
    snapshot = store.get_snapshot(run_id)
    assert snapshot is not None
    memory = AgentState.from_snapshot(snapshot).memory
    assert memory is not None
    return memory


def _compactions(store: Store, run_id: str) -> list[StatusEvent]:
    events: list[StatusEvent] = of_type(store.events(run_id), "status")
    return [event for event in events if event.code == "context_compacted"]


_FOLDED = re.compile(
    r"folded (\d+) older record\(s\) \((\d+) conversation turn\(s\), (\d+) tool record\(s\)\) into the run's "
    r"summary; prompt estimate ([\d,]+) -> ([\d,]+) tokens"
)


def test_a_long_run_stays_under_budget_and_never_loses_the_pinned_blocks() -> None:
    script = Script()
    model, store, run_id = _long_run(script)

    executes = [request for request in model.requests if request.purpose == "execute"]
    assert len(executes) == LAST_ROUND - 1
    assert max(estimate_tokens(request.messages) for request in model.requests) <= LIMIT
    for request in executes:
        number, closing = _round(request), request.messages[-1].content
        step = _step(number)
        assert all(f"## {name}\n" in closing for name in PINNED)
        assert f"Step {step + 1} of 3: {STEPS[step]}\nDone when: its pages are read" in closing
        assert f"{step + 1}. [>] {STEPS[step]}" in closing and f"Round {number} of 200" in closing
        if script.reads(number - 1):  # the latest record is always there verbatim, just before the state
            record = (
                f'[round {number - 1} · step {_step(number - 1) + 1}]\ncall: read_page {{"n":{number - 1}}}'
            )
            assert f"{record}\nobservation: {_read(number - 1)}\n\n## current_plan\n" in closing
        assert request.messages[1].content.startswith("Read the quarterly report")  # the request stays
    # The whole run could never fit: it was compacted many times, each time with a status event.
    events = _compactions(store, run_id)
    assert len(events) >= 10 and all(event.stage == "execute" for event in events)
    assert len(events) == sum(1 for request in model.requests if request.purpose == "compact")
    folds = [_FOLDED.fullmatch(event.text) for event in events]
    assert all(fold is not None for fold in folds), events[0].text
    counts = [[int(part.replace(",", "")) for part in fold.groups()] for fold in folds if fold]
    assert all(total == turns + acts and after < before for total, turns, acts, before, after in counts)
    memory = _memory(store, run_id)
    assert (memory.turns, memory.acts) == (sum(c[1] for c in counts), sum(c[2] for c in counts))
    assert memory.turns > 0 and memory.dropped == 0


def test_summaries_are_cumulative() -> None:
    script = Script()
    model, store, run_id = _long_run(script)

    # Each compact request carries the summary the previous one wrote...
    compacts = [request for request in model.requests if request.purpose == "compact"]
    summaries = [_summarise(request) for request in compacts]
    for earlier, later in zip(summaries, compacts[1:], strict=False):
        assert earlier in later.messages[-1].content
    # ...so the last summary names every page folded out of the prompt since round 1, and no other.
    memory = _memory(store, run_id)
    read = [number for number in range(2, LAST_ROUND) if script.reads(number)]
    assert memory.summary == f"Pages read: {','.join(map(str, read[: memory.acts]))}"
    last = [request for request in model.requests if request.purpose == "execute"][-1]
    # The summary follows the request it stands after, at the start of the prompt's history (the plan steps
    # completed stay, in their order: a plan has few).
    assert last.messages[1].content.startswith(
        "Read the quarterly report\n\n## run_summary\nThe oldest turns and records of this run, summarised:\n"
        f"{memory.summary}\n\nStep 1 is complete (its pages are read). Now on step 2.\n\n"
    )
    assert _read(read[memory.acts - 1]) not in _prompt(last) and _read(read[memory.acts]) in _prompt(last)


def test_the_providers_token_counts_make_the_runtime_compact_sooner() -> None:
    plain_model, plain_store, plain_run = _long_run(Script())
    counted_model, counted_store, counted_run = _long_run(Script(), factor=2.0)

    # The provider counts twice the estimate: every prompt after its first count is kept within half.
    assert max(estimate_tokens(request.messages) for request in counted_model.requests) <= LIMIT // 2
    assert max(estimate_tokens(request.messages) for request in plain_model.requests) > LIMIT // 2
    assert len(_compactions(counted_store, counted_run)) > len(_compactions(plain_store, plain_run))
    # The status reports the counted tokens: twice the estimate it started from.
    first = _FOLDED.fullmatch(_compactions(counted_store, counted_run)[0].text)
    assert first is not None and int(first.group(4).replace(",", "")) > LIMIT


def test_a_new_agent_resumes_with_the_summary_intact() -> None:
    script = Script(ask_at=120)
    one = Provider(script)
    runner = _agent(one, memory_store())
    waiting = runner.run("Read the quarterly report")
    assert waiting.interaction is not None
    runner.resume(waiting.run_id, waiting.interaction.id, Answer(text="appendix B"))

    store = memory_store()
    first = Provider(script)
    asked = _agent(first, store).run("Read the quarterly report")
    assert asked.interaction is not None
    stored = _memory(store, asked.run_id)
    assert stored.summary.startswith("Pages read: 2,3,4,")
    # A new agent, model and tools, with nothing but the ids; the budget comes with the run.
    second = Provider(script)
    done = Agent(model=second, tools=_registry(), store=store).resume(
        asked.run_id, asked.interaction.id, Answer(text="appendix B")
    )

    assert done.status == "completed"
    assert stored.summary in second.requests[0].messages[1].content
    messages = [list(request.messages) for request in one.requests]
    assert [list(request.messages) for request in first.requests + second.requests] == messages
    assert max(estimate_tokens(request.messages) for request in second.requests) <= LIMIT
    assert "Note: the user said appendix B" in _memory(store, asked.run_id).summary


# -- the fallback ---------------------------------------------------------------------------------------


def _fails(request: ModelRequest) -> str:
    raise RuntimeError("summariser down")


@pytest.mark.parametrize(
    ("compact", "why"),
    [
        (_fails, "the compact call failed: RuntimeError: summariser down"),
        (lambda request: "", "the compact call returned no text"),
        (lambda request: "  \n ", "the compact call returned no text"),
    ],
)
def test_a_failed_summary_falls_back_to_dropping_the_oldest_records(
    compact: Callable[[ModelRequest], str], why: str
) -> None:
    model, store, run_id = _long_run(Script(compact=compact))

    assert max(estimate_tokens(request.messages) for request in model.requests) <= LIMIT
    events = _compactions(store, run_id)
    assert events and all(f" without a summary ({why}); prompt estimate " in e.text for e in events)
    assert all(e.text.startswith("dropped ") for e in events)
    memory = _memory(store, run_id)
    assert memory.summary == "" and memory.dropped == memory.turns + memory.acts > 0
    last = [request for request in model.requests if request.purpose == "execute"][-1]
    closing = last.messages[-1].content
    assert f"({memory.dropped} older turn(s) or record(s) were dropped without a summary" in (
        last.messages[1].content
    )
    assert all(f"## {name}\n" in closing for name in PINNED) and "Step 3 of 3: Read part three" in closing
    assert _read(LAST_ROUND - 1) in closing


def test_a_summary_that_fails_once_keeps_the_earlier_summary_and_later_ones_fold_it_in() -> None:
    calls: list[int] = []

    def flaky(request: ModelRequest) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("summariser down")
        return _summarise(request)

    script = Script(compact=flaky)
    _, store, run_id = _long_run(script)

    events = _compactions(store, run_id)
    assert events[1].text.startswith("dropped ") and not events[2].text.startswith("dropped ")
    # The second compaction names the records that reached no summary.
    lost = re.match(r"dropped (\d+) older record\(s\) \((\d+) conversation turn\(s\), (\d+)", events[1].text)
    assert lost is not None
    memory = _memory(store, run_id)
    assert memory.dropped == int(lost.group(1))
    read = [number for number in range(2, LAST_ROUND) if script.reads(number)]
    first = _FOLDED.fullmatch(events[0].text)
    assert first is not None
    kept, gone = int(first.group(3)), int(lost.group(3))
    summary_pages = memory.summary.removeprefix("Pages read: ").split(",")
    expected = read[:kept] + read[kept + gone : memory.acts]
    assert summary_pages == [str(number) for number in expected]


# -- what is never folded -------------------------------------------------------------------------------


def test_corrections_stay_out_of_the_conversation_and_out_of_the_summary() -> None:
    model, store, run_id = _long_run(Script(malformed_every=10))

    corrected = [
        request
        for request in model.requests
        if request.purpose == "execute" and "## correction\n" in request.messages[-1].content
    ]
    assert len(corrected) == len(of_type(store.events(run_id), "correction")) >= 10
    for request in model.requests:
        *conversation, closing = request.messages
        assert all("not accepted" not in m.content and "decision" not in m.content for m in conversation[1:])
        if request.purpose == "compact":
            assert "not accepted" not in closing.content and "## correction" not in closing.content
    # The correction is in the round right after the malformed one, and gone the round after.
    for request in model.requests:
        if request.purpose == "execute":
            number = _round(request)
            assert ("## correction\n" in request.messages[-1].content) == (number % 10 == 4)


def test_the_latest_records_stay_verbatim_even_when_older_ones_cannot_reach_the_target() -> None:
    def answer(request: ModelRequest) -> str:
        if request.purpose == "compact":
            return _summarise(request)
        if request.purpose == "deliver":
            return "Read."
        number = _round(request)
        if number == 30:
            return json.dumps({"action": "done"})
        return json.dumps(
            {"action": "continue", "tool_call": {"name": "read_page", "arguments": {"n": number}}}
        )

    model, store = Provider(answer), memory_store()
    # Instructions that alone take half the limit: folding every older record still leaves the prompt
    # above the target, and the two latest records stay since the limit allows them.
    instructions = "Be thorough. " * 950
    runner = Agent(
        model=model,
        tools=_registry(),
        store=store,
        mode="react",
        context_budget=BUDGET,
        system_prompt=instructions,
    )

    result = runner.run("Read the report")

    assert result.status == "completed"
    assert max(estimate_tokens(request.messages) for request in model.requests) <= LIMIT
    executes = [request for request in model.requests if request.purpose == "execute"]
    for request in executes[2:]:
        number, prompt = _round(request), _prompt(request)
        assert _read(number - 1) in prompt and _read(number - 2) in prompt
    assert len(_compactions(store, result.run_id)) >= 5


@pytest.mark.parametrize("observation", ["r" * 40_000, "数" * 12_000])
def test_a_record_larger_than_the_budget_is_folded_and_cut_to_fit_its_compact_request(
    observation: str,
) -> None:
    @tool
    def dump() -> str:
        """Return everything."""
        return observation

    def answer(request: ModelRequest) -> str:
        if request.purpose == "compact":
            assert " [...] " in request.messages[-1].content
            return "dump returned a very long text"
        if request.purpose == "deliver":
            return "Done."
        if _round(request) == 1:
            return json.dumps({"action": "continue", "tool_call": {"name": "dump", "arguments": {}}})
        return json.dumps({"action": "done"})

    model = Provider(answer)
    store = memory_store()
    result = Agent(model=model, tools=[dump], store=store, mode="react", context_budget=BUDGET).run("Dump")

    assert result.status == "completed"
    assert [request.purpose for request in model.requests] == ["execute", "compact", "execute", "deliver"]
    assert max(estimate_tokens(request.messages) for request in model.requests) <= LIMIT
    prompt = _prompt(model.requests[2])
    assert "summarised:\ndump returned a very long text" in prompt and observation[:100] not in prompt
    assert all(f"## {name}\n" in model.requests[2].messages[-1].content for name in PINNED)
    assert _compactions(store, result.run_id)[0].text.startswith("folded 1 older record(s) (0 conversation")


# -- settings -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"context_budget": 999}, "context_budget: expected an integer >= 1000; found 999"),
        ({"context_budget": True}, "context_budget: expected an integer >= 1000; found True"),
        ({"context_budget": "big"}, "context_budget: expected an integer >= 1000; found 'big'"),
        ({"context_budget": 5_000, "context_reserve": 4_500}, "expected an integer from 0 to 4000"),
        ({"context_reserve": -1}, "context_reserve: expected an integer from 0 to 79000"),
    ],
)
def test_context_settings_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Agent(model=ScriptedModel([]), store=memory_store(), **options)


def test_context_settings_default_to_the_spec_and_are_kept_with_the_run() -> None:
    store = memory_store()
    default = Agent(model=ScriptedModel(['{"action": "done"}', "ok"]), store=store, mode="react").run("hi")
    small = Agent(
        model=ScriptedModel(['{"action": "done"}', "ok"]), store=store, mode="react", context_budget=5_000
    )

    config = read_input(default.run_id, store.get_run(default.run_id).input)[1]
    assert (config.context_budget, config.context_reserve) == (80_000, 8_000)
    # Defaults are left out of the stored settings, so a run that uses them is stored as before.
    stored = store.get_run(default.run_id).input["agent"]
    assert isinstance(stored, dict) and "context_budget" not in stored
    run_id = small.run("hi").run_id
    config = read_input(run_id, store.get_run(run_id).input)[1]
    assert (config.context_budget, config.context_reserve, config.context_limit) == (5_000, 500, 4_500)
    # The smallest budget keeps the whole of it for the prompt.
    assert Agent(model=ScriptedModel([]), store=store, context_budget=1_000).context_reserve == 0
