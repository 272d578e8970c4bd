"""A run's usage: tallies per model, the cost with cached and cache-written tokens at their own prices,
the budgets, and the summary outcomes show."""

from __future__ import annotations

import pytest

from plangate.config import ModelPrice
from plangate.models import Usage
from plangate.runs.usage import Budget, RunUsage, budget_exhausted


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
