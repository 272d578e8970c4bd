"""A formula run's budget: checked before each model call of its ``llm`` steps, handed down to its agent
steps' agents and sub-formulas as what is left of it, the run ending ``exhausted`` naming it; and the prices
a run's calls are costed with, kept with the run from their first use."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import answer, memory_store, write_formula

from plangate.config import ModelPrice
from plangate.errors import ConfigError
from plangate.events import StepStateEvent
from plangate.formulas.retry import retry_run
from plangate.formulas.runtime import FormulaRunner, run_formula
from plangate.interactions import Approve
from plangate.models import FunctionModel, ModelRequest, ScriptedModel
from plangate.store import Store, open_store
from plangate.tools import ToolRegistry, tool

WORKER = Path(__file__).with_name("budget_worker.py")

THREE = """
[[steps]]
id = "a"
llm = { prompt = "Say A." }

[[steps]]
id = "b"
needs = ["a"]
llm = { prompt = "Say B." }

[[steps]]
id = "c"
needs = ["b"]
retries = 2
llm = { prompt = "Say C." }
"""


def _usage(store: Store, run_id: str) -> dict[str, Any]:
    outcome = store.get_run(run_id).outcome
    assert outcome is not None and isinstance(outcome.get("usage"), dict)
    usage: dict[str, Any] = outcome["usage"]
    return usage


def _first_call_tokens(path: Path) -> int:
    """What the first ``llm`` step of the formula at ``path`` spends, run without a budget."""
    store = memory_store()
    result = asyncio.run(FormulaRunner(store, model=ScriptedModel(["A.", "B.", "C."])).start(path))
    steps = [e for e in store.events(result.run_id) if isinstance(e, StepStateEvent) and e.usage]
    usage = steps[0].usage
    assert (
        usage is not None
        and isinstance(usage["input_tokens"], int)
        and isinstance(usage["output_tokens"], int)
    )
    return usage["input_tokens"] + usage["output_tokens"]


def test_max_tokens_ends_the_run_before_the_call_that_would_pass_it(tmp_path: Path) -> None:
    path = write_formula(tmp_path, "three", THREE)
    first = _first_call_tokens(path)
    store = memory_store()
    model = ScriptedModel(["A.", "B.", "C.", "C.", "C."])
    result = asyncio.run(FormulaRunner(store, model=model).start(path, max_tokens=first + 1))
    # a's call left room, b's reached the budget, and c's was never made (nor retried: it cannot help)
    assert len(model.requests) == 2
    assert result.status == "exhausted"
    assert [result.steps[s].status for s in "abc"] == ["complete", "complete", "failed"]
    assert f"the run reached its budget (max_tokens {first + 1}" in result.steps["c"].reason
    assert result.steps["c"].attempt == 1
    run = store.get_run(result.run_id)
    assert run.input["budget"] == {"max_tokens": first + 1}
    assert run.outcome is not None
    assert (run.outcome["status"], run.outcome["code"]) == ("exhausted", "budget_exhausted")
    assert f"max_tokens {first + 1}" in run.outcome["user_message"]
    assert _usage(store, result.run_id)["calls"] == 2


FOUR_AT_ONCE = "".join(f'\n[[steps]]\nid = "{s}"\nllm = {{ prompt = "Say {s}." }}\n' for s in "abcd")


def test_steps_that_call_the_model_at_once_cross_the_budget_by_one_call_at_most(tmp_path: Path) -> None:
    # Four llm steps need nothing, so they work at the same time, and each call takes a while: each looks
    # at the budget only once the calls before it are counted.
    path = write_formula(tmp_path, "four", FOUR_AT_ONCE)
    calls: list[str] = []

    async def slow(request: ModelRequest) -> str:
        calls.append(request.messages[-1].content)
        await asyncio.sleep(0.05)
        return "Done."

    store = memory_store()
    free = asyncio.run(FormulaRunner(store, model=FunctionModel(slow)).start(path))
    assert free.status == "completed" and len(calls) == 4  # without a budget they all run
    spent = _usage(store, free.run_id)
    per_call = (spent["input_tokens"] + spent["output_tokens"]) // 4
    calls.clear()
    result = asyncio.run(FormulaRunner(store, model=FunctionModel(slow)).start(path, max_tokens=per_call + 1))
    # the first call left room, the second reached the budget, the other two were never made
    assert len(calls) == 2
    assert result.status == "exhausted"
    ended = sorted(step.status for step in result.steps.values())
    assert ended == ["complete", "complete", "failed", "failed"]
    assert _usage(store, result.run_id)["calls"] == 2


def test_max_cost_needs_a_price_for_each_model_and_is_checked_like_tokens(tmp_path: Path) -> None:
    path = write_formula(tmp_path, "three", THREE)
    store = memory_store()
    with pytest.raises(ConfigError, match=r"formula max_cost: the model 'scripted' has no price"):
        asyncio.run(FormulaRunner(store, model=ScriptedModel(["A."])).start(path, max_cost=1.0))
    with pytest.raises(ConfigError, match="formula max_tokens: expected an integer >= 1"):
        asyncio.run(FormulaRunner(store, model=ScriptedModel(["A."])).start(path, max_tokens=0))
    assert store.list_runs().items == []  # nothing was stored
    expensive = {"scripted": ModelPrice(input=1_000_000.0, output=1_000_000.0)}
    model = ScriptedModel(["A.", "B.", "C."])
    result = run_formula(path, store=store, model=model, prices=expensive, max_cost=0.5)
    assert result.status == "exhausted" and len(model.requests) == 1
    outcome = store.get_run(result.run_id).outcome
    assert outcome is not None and "max_cost 0.5" in outcome["user_message"]


def test_an_agent_step_gets_what_is_left_and_its_exhaustion_ends_the_run(tmp_path: Path) -> None:
    calls: list[str] = []

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        calls.append(query)
        return f"found {query}"

    body = """
    [[steps]]
    id = "draft"
    llm = { prompt = "Draft a note." }

    [[steps]]
    id = "look"
    needs = ["draft"]
    retries = 1
    agent = { prompt = "Look at the week", tools = ["lookup"], mode = "react" }
    """
    path = write_formula(tmp_path, "look", body)
    looks = [
        json.dumps(
            {"action": "continue", "tool_call": {"name": "lookup", "arguments": {"query": f"page {n}"}}}
        )
        for n in range(40)
    ]
    store = memory_store()
    model = ScriptedModel(["A note.", *looks])
    runner = FormulaRunner(store, ToolRegistry([lookup]), model=model)
    result = asyncio.run(runner.start(path, max_tokens=2000))
    assert result.status == "exhausted", result.reason
    assert result.steps["look"].status == "failed" and result.steps["look"].attempt == 1
    assert "budget_exhausted" in result.steps["look"].reason
    draft = next(e for e in store.events(result.run_id) if isinstance(e, StepStateEvent) and e.usage)
    assert draft.usage is not None
    spent = int(str(draft.usage["input_tokens"])) + int(str(draft.usage["output_tokens"]))
    agent = store.list_runs(parent_run_id=result.run_id, kind="agent").items
    assert len(agent) == 1  # one agent, never started again
    assert agent[0].input["agent"]["budget"]["max_tokens"] == 2000 - spent
    usage = _usage(store, result.run_id)
    assert 2000 <= usage["input_tokens"] + usage["output_tokens"]
    # the draft's call and the agent's, each of which chose a lookup; the one after the last was never made
    assert usage["calls"] == 1 + len(calls) == len(model.requests)


def _step_tokens(store: Store, run_id: str, step_id: str) -> int:
    """What the calls of ``step_id`` in run ``run_id`` spent (input and output tokens)."""
    found = [e.usage for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.step_id == step_id]
    return sum(int(str(u["input_tokens"])) + int(str(u["output_tokens"])) for u in found if u is not None)


def test_a_sub_formula_gets_what_is_left_and_none_starts_once_it_is_reached(tmp_path: Path) -> None:
    write_formula(tmp_path, "child", THREE)
    body = """
    [[steps]]
    id = "draft"
    llm = { prompt = "Draft a note." }

    [[steps]]
    id = "sub"
    needs = ["draft"]
    formula = { name = "child" }
    """
    path = write_formula(tmp_path, "parent", body)
    probe = memory_store()
    probed = asyncio.run(
        FormulaRunner(
            probe, model=ScriptedModel(["A note.", "A.", "B.", "C."]), search_paths=[tmp_path]
        ).start(path)
    )
    assert probed.status == "completed", probed.reason
    draft = _step_tokens(probe, probed.run_id, "draft")
    child_a = _step_tokens(probe, f"{probed.run_id}.sub.sub1", "a")
    assert draft and child_a

    # room for the draft and the child's first call: the child's second reaches it, its third is refused
    store = memory_store()
    model = ScriptedModel(["A note.", "A.", "B.", "C."])
    runner = FormulaRunner(store, model=model, search_paths=[tmp_path])
    result = asyncio.run(runner.start(path, max_tokens=draft + child_a + 1))
    assert result.status == "exhausted", result.reason
    assert len(model.requests) == 3
    (child,) = store.list_runs(parent_run_id=result.run_id, kind="formula").items
    assert child.input["budget"] == {"max_tokens": child_a + 1}  # what was left when it started
    assert child.status == "exhausted"
    assert result.steps["sub"].status == "failed"

    # once the draft reached the budget, the sub-formula is not started at all
    store = memory_store()
    runner = FormulaRunner(store, model=ScriptedModel(["A note."]), search_paths=[tmp_path])
    result = asyncio.run(runner.start(path, max_tokens=draft))
    assert result.status == "exhausted", result.reason
    assert store.list_runs(parent_run_id=result.run_id).items == []


PRICED = """
[[steps]]
id = "draft"
llm = { prompt = "Draft a note." }

[[steps]]
id = "ok"
needs = ["draft"]
human = { prompt = "Send it?" }

[[steps]]
id = "send"
needs = ["ok"]
llm = { prompt = "Write it out." }
"""
CHEAP = {"scripted": ModelPrice(input=1.0, output=2.0)}
DEAR = {"scripted": ModelPrice(input=100.0, output=200.0)}


def test_a_run_keeps_the_price_of_a_model_from_its_first_use(tmp_path: Path) -> None:
    store = memory_store()
    path = write_formula(tmp_path, "priced", PRICED)
    waiting = asyncio.run(FormulaRunner(store, model=ScriptedModel(["Hi."]), prices=CHEAP).start(path))
    assert waiting.status == "waiting" and waiting.interaction is not None
    # another runner (another process: nothing in memory) with other prices ends the run
    later = FormulaRunner(store, model=ScriptedModel(["Hi there."]), prices=DEAR)
    answer(later, waiting.interaction.id, Approve())
    ended = asyncio.run(later.resume(waiting.run_id))
    assert ended.status == "completed", ended.reason
    usage = _usage(store, ended.run_id)
    assert usage["calls"] == 2
    expected = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)
    snapshot = store.get_snapshot(ended.run_id)
    assert snapshot is not None and snapshot.state["prices"] == {"scripted": {"input": 1.0, "output": 2.0}}


def _worker(url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(WORKER), url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_budget_and_prices_hold_across_a_resume_in_another_process(store_url: str, tmp_path: Path) -> None:
    more = '\n[[steps]]\nid = "more"\nneeds = ["send"]\nllm = { prompt = "And more." }\n'
    path = write_formula(tmp_path, "priced", PRICED + more)
    probe = memory_store()
    probed = asyncio.run(FormulaRunner(probe, model=ScriptedModel(["Hi."])).start(path))
    assert probed.status == "waiting"
    spent = _step_tokens(probe, probed.run_id, "draft")
    # room for one more call after the first process's, in the process that resumes
    run_id, interaction_id = _worker(store_url, "start", str(path), str(spent + 1)).split()
    end = json.loads(_worker(store_url, "approve", run_id, interaction_id))
    assert end["status"] == "exhausted"
    assert end["calls"] == 1  # the resuming process made one call, then the budget stopped the next
    outcome = end["outcome"]
    assert outcome["code"] == "budget_exhausted" and f"max_tokens {spent + 1}" in outcome["user_message"]
    usage = outcome["usage"]
    assert usage["calls"] == 2  # the first process's call and the second's, each once
    # both calls costed at the first process's prices, which the run kept (the second's are 100 times dearer)
    expected = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)
    store = open_store(store_url)
    try:
        steps = {e.step_id: e for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.usage}
    finally:
        store.close()
    assert sorted(steps) == ["draft", "send"]


def test_a_retry_keeps_the_origins_limits_and_prices(tmp_path: Path) -> None:
    store = memory_store()
    path = write_formula(tmp_path, "three", THREE)
    origin = FormulaRunner(store, model=ScriptedModel(["A.", "B.", "C."]), prices=CHEAP)
    ended = asyncio.run(origin.start(path, max_tokens=10_000))
    assert ended.status == "completed", ended.reason
    # retried from c by a process with other prices: c's call is costed as a's and b's were
    later = FormulaRunner(store, model=ScriptedModel(["C again."]), prices=DEAR, search_paths=[tmp_path])
    retried = retry_run(later, ended.run_id, "c")
    assert store.get_run(retried).input["budget"] == {"max_tokens": 10_000}
    again = asyncio.run(later.resume(retried))
    assert again.status == "completed", again.reason
    usage = _usage(store, retried)
    assert usage["calls"] == 1
    assert usage["cost"] == pytest.approx((usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1e6)


def test_a_sub_formula_whose_models_have_no_price_fails_its_step_saying_so(tmp_path: Path) -> None:
    write_formula(tmp_path, "child", THREE)
    path = write_formula(tmp_path, "parent", '[[steps]]\nid = "sub"\nformula = { name = "child" }\n')
    store = memory_store()
    runner = FormulaRunner(store, model=ScriptedModel(["A."]), search_paths=[tmp_path])
    result = asyncio.run(runner.start(path, max_cost=1.0))  # the parent's own steps call no model
    assert result.status == "failed"
    assert result.steps["sub"].reason == (
        "sub-formula child: formula max_cost: the model 'scripted' has no price; add [prices.'scripted'] "
        "to plangate.toml (or pass prices=)"
    )
    assert store.list_runs(parent_run_id=result.run_id).items == []
