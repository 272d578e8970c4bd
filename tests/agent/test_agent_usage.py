"""A run's token usage and cost: each model call counted once, in the outcome; budgets checked first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import agent, call, decision, make_desk, of_type, plan

from plangate.agent._state import AgentState
from plangate.config import ModelPrice
from plangate.errors import ConfigError
from plangate.interactions import Approve
from plangate.models import ModelRequest, ScriptedModel
from plangate.runs import Outcome
from plangate.store import open_store

WORKER = Path(__file__).with_name("usage_worker.py")


def _rough(text: str) -> int:
    """The scripted model's count: four characters a token, rounded up."""
    return -(-len(text) // 4)


def _tokens(model: ScriptedModel, responses: list[str]) -> tuple[int, int]:
    """What the scripted model reported for the calls it served (prompt, output), counted here again."""
    prompt = sum(_rough(message.content) for request in model.requests for message in request.messages)
    output = sum(_rough(text) for text in responses[: len(model.requests)])
    return prompt, output


def _requests(model: ScriptedModel) -> list[ModelRequest]:
    return list(model.requests)


def test_the_outcome_counts_every_model_call_of_every_phase() -> None:
    script = [
        plan(("Look", "seen")),
        call("lookup", query="the week"),
        decision("done", goal_check="seen"),
        "All seen.",
    ]
    runner, model = agent(script, make_desk(), mode="plan")
    result = runner.run("Look at the week")
    assert result.status == "completed" and result.outcome is not None
    purposes = [request.purpose for request in _requests(model)]
    assert purposes == ["plan", "execute", "execute", "deliver"]
    usage = result.outcome.usage
    assert usage is not None
    prompt, output = _tokens(model, script)
    assert (usage["input_tokens"], usage["output_tokens"], usage["calls"]) == (prompt, output, 4)
    assert usage["models"] == {
        "scripted": {
            "calls": 4,
            "input_tokens": prompt,
            "output_tokens": output,
            "cached_input_tokens": 0,
            "cache_write_tokens": 0,
        }
    }
    assert "cost" not in usage  # no price table
    # The outcome event, the stored outcome and the result agree.
    events = runner.store.events(result.run_id)
    assert of_type(events, "outcome")[0].usage == usage
    assert runner.store.get_run(result.run_id).outcome == result.outcome.stored()
    # Each execute round's event keeps its own call's usage.
    rounds = of_type(events, "round")
    assert [r.usage.input_tokens for r in rounds] == [
        sum(_rough(m.content) for m in request.messages) for request in _requests(model)[1:3]
    ]


def test_a_price_table_gives_the_cost() -> None:
    script = [call("lookup", query="x"), decision("done", goal_check="seen"), "Seen."]
    price = ModelPrice(input=2.0, output=8.0, cached_input=1.0)
    runner, model = agent(script, make_desk(), mode="react", prices={"scripted": price, "other": price})
    result = runner.run("Look")
    assert result.outcome is not None and result.outcome.usage is not None
    prompt, output = _tokens(model, script)
    assert result.outcome.usage["cost"] == pytest.approx((prompt * 2.0 + output * 8.0) / 1_000_000)
    # The run keeps its own model's price only.
    stored = runner.store.get_run(result.run_id).input
    assert stored["agent"]["budget"]["prices"] == {"scripted": price.model_dump(mode="json")}


def test_max_tokens_ends_the_run_before_the_call_that_would_pass_it() -> None:
    script = [call("lookup", query=f"page {n}") for n in range(10)]
    probe, probe_model = agent([script[0], decision("done", goal_check="x"), "x"], make_desk(), mode="react")
    probe.run("Read every page")
    first = sum(_rough(m.content) for m in probe_model.requests[0].messages) + _rough(script[0])
    runner, model = agent(script, make_desk(), mode="react", max_tokens=first + 1)
    result = runner.run("Read every page")
    assert result.status == "exhausted" and result.outcome is not None
    assert result.outcome.code == "budget_exhausted"
    assert "max_tokens" in result.outcome.user_message
    # Two calls: the first left room, the second reached the budget, and no third was made.
    assert len(model.requests) == 2
    assert result.outcome.usage is not None and result.outcome.usage["calls"] == 2


def test_max_cost_is_checked_with_the_price_and_a_model_without_one_is_refused() -> None:
    script = [call("lookup", query=f"page {n}") for n in range(10)]
    expensive = ModelPrice(input=1_000_000.0, output=1_000_000.0)
    runner, model = agent(script, make_desk(), mode="react", max_cost=0.5, prices={"scripted": expensive})
    result = runner.run("Read every page")
    assert result.outcome is not None and result.outcome.code == "budget_exhausted"
    assert "max_cost 0.5" in result.outcome.user_message
    assert len(model.requests) == 1
    with pytest.raises(ConfigError, match=r"max_cost: the model 'scripted' has no price"):
        agent(script, make_desk(), mode="react", max_cost=0.5)[0].run("Read")
    with pytest.raises(ConfigError, match="max_tokens: expected an integer >= 1"):
        agent(script, make_desk(), max_tokens=0)


def test_an_old_outcome_without_usage_reads_and_stores_as_before() -> None:
    stored: dict[str, Any] = {"status": "completed", "stage": "execute", "code": "done", "user_message": "ok"}
    outcome = Outcome.read(stored)
    assert outcome is not None and outcome.usage is None
    assert outcome.stored() == {**stored, "internal_reason": ""}
    assert "usage" not in json.loads(outcome.event().model_dump_json())


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


def _first_call_tokens(url: str) -> int:
    run_id, _ = _worker(url, "start", "0").split()
    store = open_store(url)
    try:
        snapshot = store.get_snapshot(run_id)
        assert snapshot is not None
        usage = AgentState.from_snapshot(snapshot).usage
    finally:
        store.close()
    assert usage is not None and usage.models["scripted"].calls == 1
    return usage.tokens


@pytest.mark.slow
def test_a_budget_is_counted_once_across_a_resume_in_another_process(store_url: str) -> None:
    first = _first_call_tokens(store_url)
    # The budget leaves room for one more call after the first process's, in the process that resumes.
    run_id, interaction_id = _worker(store_url, "start", str(first + 1)).split()
    end = json.loads(_worker(store_url, "approve", run_id, interaction_id))
    assert end["status"] == "exhausted"
    assert end["outcome"]["code"] == "budget_exhausted"
    assert end["calls"] == 1  # the resuming process made one call, then the budget stopped the next
    usage = end["outcome"]["usage"]
    assert usage["calls"] == 2  # the first process's call and the second's, each once
    store = open_store(store_url)
    try:
        rounds = [e for e in store.events(run_id) if e.type == "round"]
    finally:
        store.close()
    assert len(rounds) == 2
    assert rounds[0].usage.input_tokens + rounds[0].usage.output_tokens == first
    assert sum(r.usage.input_tokens for r in rounds) == usage["input_tokens"]
    assert sum(r.usage.output_tokens for r in rounds) == usage["output_tokens"]


def test_approving_in_this_process_counts_the_same_as_another() -> None:
    script = [call("place", task="gym", slot=3), decision("done", goal_check="placed"), "Placed."]
    runner, model = agent(script, make_desk(), mode="react")
    waiting = runner.run("Place the gym")
    assert waiting.interaction is not None
    end = runner.resume(waiting.run_id, waiting.interaction.id, Approve())
    assert end.outcome is not None and end.outcome.usage is not None
    assert end.outcome.usage["calls"] == len(model.requests) == 3


def test_a_cancelled_run_keeps_what_it_spent_in_its_outcome() -> None:
    # a formula run adds up its agent steps' outcomes: one cancelled (its step timed out, say) counts too
    runner, model = agent([call("place", task="gym", slot=3)], make_desk(), mode="react")
    waiting = runner.run("Place the gym")
    assert waiting.interaction is not None
    ended = runner.cancel(waiting.run_id, "not now")
    assert ended.outcome is not None and ended.outcome.usage is not None
    assert ended.outcome.usage["calls"] == len(model.requests) == 1
    assert runner.store.get_run(waiting.run_id).outcome["usage"] == ended.outcome.usage  # type: ignore[index]


def test_the_usage_so_far_of_a_run_whose_record_is_held_reads_no_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a formula's budget reads its running agent steps' usage from the records it listed
    runner, model = agent([call("place", task="gym", slot=3)], make_desk(), mode="react")
    waiting = runner.run("Place the gym")
    assert waiting.interaction is not None
    by_id = runner.usage(waiting.run_id)
    assert by_id is not None and by_id["calls"] == len(model.requests) == 1
    record = runner.store.get_run(waiting.run_id)
    read: list[str] = []
    get_run = runner.store.get_run

    def counted(run_id: str) -> Any:
        read.append(run_id)
        return get_run(run_id)

    monkeypatch.setattr(runner.store, "get_run", counted)
    assert runner.usage(record) == by_id
    assert read == []
