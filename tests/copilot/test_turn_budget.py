"""A copilot turn's budget: checked before each generation call and each attempt's formula run (which gets
what is left of it), the turn ending ``exhausted`` naming it; and its usage and cost, on the turn and in
its run's outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from copilot_helpers import DONE, answer_step, lines
from test_turn import GOOD_ANSWER, QUESTION, REVENUE, REVENUE_OPS, SHOP

from plangate.config import ModelPrice
from plangate.copilot import Copilot, ask
from plangate.errors import ConfigError
from plangate.events import OutcomeEvent
from plangate.models import ModelRequest, ScriptedModel
from plangate.store import SQLiteStore, Store

PRICE = ModelPrice(input=1.0, output=2.0)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened  # type: ignore[misc]
    opened.close()


def _rough(text: str) -> int:
    return -(-len(text) // 4)  # the scripted model's count


def _spent(request: ModelRequest, answered: str) -> int:
    """The tokens of one scripted call: its prompt and what it answered."""
    return sum(_rough(message.content) for message in request.messages) + _rough(answered)


def test_a_turn_has_its_usage_and_its_cost_with_prices(store: Store) -> None:
    model = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    turn = ask(QUESTION, SHOP, model=model, store=store, prices={"scripted": PRICE})
    assert turn.status == "done", turn.reason
    usage = turn.usage
    assert usage is not None and usage["calls"] == 2
    inputs, outputs = usage["input_tokens"], usage["output_tokens"]
    assert isinstance(inputs, int) and isinstance(outputs, int)
    assert usage["cost"] == pytest.approx((inputs * 1.0 + outputs * 2.0) / 1_000_000)
    assert store.get_run(turn.run_id).outcome["usage"] == usage  # type: ignore[index]
    assert turn.to_json()["usage"] == usage


def test_a_turn_stops_before_the_formula_run_once_its_budget_is_reached(store: Store) -> None:
    probe = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    ask(QUESTION, SHOP, model=probe, store=SQLiteStore(":memory:"))
    generation = _spent(probe.requests[0], REVENUE_OPS)
    model = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    turn = ask(QUESTION, SHOP, model=model, store=store, max_tokens=generation)
    assert len(model.requests) == 1  # the generation; its formula run was not started
    assert turn.status == "failed"
    assert (
        turn.reason
        == f"The turn reached its budget (max_tokens {generation}; spent {generation} tokens) and stopped."
    )
    assert store.list_runs(parent_run_id=turn.run_id).items == []
    run = store.get_run(turn.run_id)
    assert run.status == "exhausted" and run.outcome is not None
    assert (run.outcome["code"], run.outcome["stage"]) == ("budget_exhausted", "run")
    assert run.outcome["usage"] == turn.usage and turn.usage is not None and turn.usage["calls"] == 1
    events = store.events(turn.run_id)
    assert isinstance(events[-1], OutcomeEvent) and events[-1].status == "exhausted"


def test_the_formula_run_gets_what_is_left_and_a_retry_is_not_generated_past_it(store: Store) -> None:
    # the first attempt's answer invents a number: the review asks for a retry, whose generation the budget
    # (the first attempt's two calls) does not allow
    script = [REVENUE_OPS, "East led with 1,500,000.", REVENUE_OPS, GOOD_ANSWER]
    probe = ScriptedModel(script)
    ask(QUESTION, SHOP, model=probe, store=SQLiteStore(":memory:"))
    generation = _spent(probe.requests[0], script[0])
    first = generation + _spent(probe.requests[1], script[1])
    model = ScriptedModel(script)
    turn = ask(QUESTION, SHOP, model=model, store=store, max_tokens=first)
    assert len(model.requests) == 2
    [child] = store.list_runs(parent_run_id=turn.run_id, kind="formula").items
    assert child.input["budget"] == {"max_tokens": first - generation}  # what was left when it started
    assert [a.status for a in turn.attempts] == ["unusable", "failed"]
    assert "The turn reached its budget (max_tokens" in turn.attempts[1].reason
    run = store.get_run(turn.run_id)
    assert run.status == "exhausted" and run.outcome is not None
    assert (run.outcome["code"], run.outcome["stage"]) == ("budget_exhausted", "generate")


def test_max_cost_needs_a_price_and_bad_limits_are_refused_before_anything_is_stored(store: Store) -> None:
    with pytest.raises(ConfigError, match=r"ask max_cost: the model 'scripted' has no price"):
        ask(QUESTION, SHOP, model=ScriptedModel([REVENUE_OPS]), store=store, max_cost=0.5)
    with pytest.raises(ConfigError, match="ask max_tokens: expected an integer >= 1"):
        Copilot(model=ScriptedModel([]), store=store, max_tokens=0)
    assert store.list_runs().items == []
    model = ScriptedModel([REVENUE_OPS, GOOD_ANSWER])
    dear = {"scripted": ModelPrice(input=1_000_000.0, output=1_000_000.0)}
    turn = ask(QUESTION, SHOP, model=model, store=store, prices=dear, max_cost=0.5)
    assert len(model.requests) == 1 and "max_cost 0.5" in turn.reason


def test_a_formula_run_that_reaches_what_was_left_ends_the_turn_exhausted(store: Store) -> None:
    draft = {"op": "add_step", "step": {"id": "draft", "needs": ["revenue"], "llm": {"prompt": "Draft it."}}}
    answer = answer_step("revenue")
    answer["step"]["needs"] = ["revenue", "draft"]  # type: ignore[index]  # one after the other
    ops = lines(REVENUE, draft, answer, DONE)
    script = [ops, "A draft.", GOOD_ANSWER]
    probe = ScriptedModel(script)
    probed = ask(QUESTION, SHOP, model=probe, store=SQLiteStore(":memory:"))
    assert probed.status == "done", probed.reason
    first_two = _spent(probe.requests[0], ops) + _spent(probe.requests[1], "A draft.")
    # room for the generation and the draft step's call: the answer step's is refused
    model = ScriptedModel(script)
    turn = ask(QUESTION, SHOP, model=model, store=store, max_tokens=first_two)
    assert len(model.requests) == 2
    [child] = store.list_runs(parent_run_id=turn.run_id, kind="formula").items
    assert child.status == "exhausted"
    assert len(turn.attempts) == 1 and turn.attempts[0].run_id == child.id
    run = store.get_run(turn.run_id)
    assert run.status == "exhausted" and run.outcome is not None
    assert (run.outcome["code"], run.outcome["stage"]) == ("budget_exhausted", "run")
    assert f"max_tokens {first_two};" in run.outcome["user_message"]
