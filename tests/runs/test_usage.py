"""A run's usage: tallies per model, the cost with cached and cache-written tokens at their own prices,
the budgets, and the summary outcomes show."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.errors import ConfigError
from plangate.models import Message, ModelRequest, ScriptedModel, Usage, complete
from plangate.runs.usage import (
    Budget,
    BudgetReached,
    RunUsage,
    Spent,
    UsageTally,
    budget_exhausted,
    run_budget,
)


def test_cached_and_cache_written_prompt_tokens_cost_their_own_prices() -> None:
    usage = RunUsage().plus("a:m", Usage(1000, 200, cached_input_tokens=600, cache_write_tokens=100))
    price = ModelPrice(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    expected = (300 * 3.0 + 600 * 0.3 + 100 * 3.75 + 200 * 15.0) / 1_000_000
    assert usage.cost({"a:m": price}) == pytest.approx(expected)
    # Without their own prices they cost what any prompt token costs.
    plain = ModelPrice(input=3.0, output=15.0)
    assert usage.cost({"a:m": plain}) == pytest.approx((1000 * 3.0 + 200 * 15.0) / 1_000_000)


def test_a_model_without_a_price_leaves_the_cost_unknown_and_models_add_up() -> None:
    usage = RunUsage().plus("a:m", Usage(10, 1)).plus("b:n", Usage(20, 2)).plus("a:m", Usage(5, 5))
    assert usage.models["a:m"].calls == 2 and usage.models["a:m"].input_tokens == 15
    assert usage.tokens == 43
    assert usage.cost({"a:m": ModelPrice(input=1, output=1)}) is None
    shown = usage.summary({})
    assert "cost" not in shown and shown["calls"] == 3
    assert RunUsage.of_summary(shown) == usage
    assert RunUsage.of_summary({"models": "nonsense"}) == RunUsage()
    assert usage.merged(usage).tokens == 86


def test_a_budget_is_reached_at_its_limit_and_names_itself() -> None:
    usage = RunUsage().plus("a:m", Usage(90, 10))
    assert Budget(max_tokens=101).exceeded(usage) is None
    assert Budget(max_tokens=100).exceeded(usage) == "max_tokens"
    priced = Budget(max_cost=0.0001, prices={"a:m": ModelPrice(input=1.0, output=1.0)})
    assert priced.exceeded(usage) == "max_cost"  # 100 tokens at 1 per million: exactly the limit
    ended = budget_exhausted("execute", priced, "max_cost", usage)
    assert (ended.status, ended.code) == ("exhausted", "budget_exhausted")
    assert "max_cost 0.0001" in ended.user_message and "100 tokens" in ended.user_message


def test_what_is_left_of_a_budget_and_how_a_run_keeps_it() -> None:
    budget = Budget(max_tokens=1000, max_cost=0.5)
    spent = Spent.of({"input_tokens": 300, "output_tokens": 100, "cost": 0.2})
    assert (spent.tokens, spent.cost) == (400, 0.2)
    left = budget.left(spent)
    assert left.max_tokens == 600 and left.max_cost == pytest.approx(0.3)
    assert budget.reached(spent) is None and budget.reached(Spent(1000, 0.0)) == "max_tokens"
    assert Budget(max_cost=0.0).reached(Spent.of(None)) == "max_cost"  # nothing spent costs 0: no call
    assert Budget(max_cost=0.1).reached(Spent(10, None)) is None  # a cost that cannot be told stops nothing
    assert budget.limits() == {"max_tokens": 1000, "max_cost": 0.5}
    assert Budget.of_limits(budget.limits()) == budget
    assert Budget.of_limits({}) is None and Budget.of_limits("nonsense") is None
    assert run_budget(None, None, "x") is None
    with pytest.raises(ConfigError, match=r"^x max_tokens: expected an integer >= 1 or None; found True$"):
        run_budget(True, None, "x")
    with pytest.raises(ConfigError, match=r"^x max_cost: expected a number >= 0 or None; found inf$"):
        run_budget(None, float("inf"), "x")


def test_a_tally_with_a_budget_makes_no_call_once_it_is_reached() -> None:
    elsewhere: dict[str, JsonValue] | None = RunUsage().plus("b:n", Usage(5, 0)).summary({})
    tally = UsageTally(budget=Budget(max_tokens=12), elsewhere=lambda: elsewhere)
    model = tally.wrap(ScriptedModel(["1234"]), "generate")
    request = ModelRequest("copilot", [Message("user", "12345678")])
    asyncio.run(complete(model, request))  # 5 spent elsewhere: the call is made (2 + 1 tokens more)
    assert tally.usage.tokens == 3 and tally.left() == Budget(max_tokens=4)
    assert tally.exhausted("generate") is None
    elsewhere = RunUsage().plus("b:n", Usage(9, 0)).summary({})
    with pytest.raises(BudgetReached) as reached:
        asyncio.run(complete(model, request))
    assert (reached.value.outcome.code, reached.value.outcome.stage) == ("budget_exhausted", "generate")
    assert reached.value.outcome.user_message == (
        "The turn reached its budget (max_tokens 12; spent 12 tokens) and stopped."
    )
