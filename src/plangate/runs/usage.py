"""What a run's model calls cost: tokens per model, the cost by a price table, and the budgets checked before
each call.

For: ``RunUsage`` (a run's tokens per model, added to once per model call and stored with the run's state in
the same commit as the step that made the call, so a resumed or taken-over run counts each call once),
``Budget`` (``max_tokens``, ``max_cost`` and the prices they are read with, kept in the run's input so
every process that advances the run judges it the same way) and ``budget_exhausted`` (the outcome of a run
whose budget ran out). Not for: counting tokens of a prompt (``agent/_tokens.py``) or showing usage
(``cli/_events.py``, the console).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate.config import ModelPrice
from plangate.models import Model, ModelChunk, ModelRequest, ModelWrapper, Usage
from plangate.runs.outcome import Outcome
from plangate.store import Store

_MILLION = 1_000_000


class ModelUsage(BaseModel):
    """The tokens of one model's calls in a run.

    Attributes:
        calls: model calls that reported usage.
        input_tokens: prompt tokens, cached ones included.
        output_tokens: generated tokens.
        cached_input_tokens: prompt tokens read from the provider's cache.
        cache_write_tokens: prompt tokens written to the provider's cache.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)

    def plus(self, usage: Usage) -> ModelUsage:
        """This usage and one more call's."""
        return ModelUsage(
            calls=self.calls + 1,
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            cached_input_tokens=self.cached_input_tokens + (usage.cached_input_tokens or 0),
            cache_write_tokens=self.cache_write_tokens + (usage.cache_write_tokens or 0),
        )

    def merged(self, other: ModelUsage) -> ModelUsage:
        """The sum of two tallies of the same model."""
        return ModelUsage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def cost(self, price: ModelPrice) -> float:
        """What these tokens cost at ``price`` (per million): cached and cache-written prompt tokens at their
        own prices where the table has them."""
        cached = min(self.cached_input_tokens, self.input_tokens)
        written = min(self.cache_write_tokens, self.input_tokens - cached)
        plain = self.input_tokens - cached - written
        read_price = price.input if price.cached_input is None else price.cached_input
        write_price = price.input if price.cache_write is None else price.cache_write
        total = (
            plain * price.input
            + cached * read_price
            + written * write_price
            + self.output_tokens * price.output
        )
        return total / _MILLION


class RunUsage(BaseModel):
    """A run's model usage, per model name (``provider:model``).

    Attributes:
        models: each model's tally.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelUsage] = Field(default_factory=dict)

    def plus(self, model: str, usage: Usage) -> RunUsage:
        """This usage and one more call of ``model``."""
        models = dict(self.models)
        models[model] = models.get(model, ModelUsage()).plus(usage)
        return RunUsage(models=models)

    def merged(self, other: RunUsage) -> RunUsage:
        """The usage of two runs together (a formula run and its steps' agents)."""
        models = dict(self.models)
        for name, tally in other.models.items():
            models[name] = models[name].merged(tally) if name in models else tally
        return RunUsage(models=models)

    @property
    def input_tokens(self) -> int:
        """Prompt tokens of every call."""
        return sum(tally.input_tokens for tally in self.models.values())

    @property
    def output_tokens(self) -> int:
        """Generated tokens of every call."""
        return sum(tally.output_tokens for tally in self.models.values())

    @property
    def tokens(self) -> int:
        """Input and output tokens together: what ``max_tokens`` counts."""
        return self.input_tokens + self.output_tokens

    def cost(self, prices: Mapping[str, ModelPrice]) -> float | None:
        """The run's cost by ``prices``, or None when a model it called has no price (or it called none)."""
        if not self.models or any(name not in prices for name in self.models):
            return None
        return sum(tally.cost(prices[name]) for name, tally in self.models.items())

    def summary(self, prices: Mapping[str, ModelPrice]) -> dict[str, JsonValue]:
        """The usage as outcomes and API responses show it: totals, each model's tally, and the cost when
        every model has a price."""
        shown: dict[str, JsonValue] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": sum(tally.cached_input_tokens for tally in self.models.values()),
            "calls": sum(tally.calls for tally in self.models.values()),
            "models": {name: tally.model_dump(mode="json") for name, tally in sorted(self.models.items())},
        }
        cost = self.cost(prices)
        if cost is not None:
            shown["cost"] = round(cost, 8)
        return shown

    @classmethod
    def of_summary(cls, shown: Mapping[str, JsonValue] | None) -> RunUsage:
        """The usage a ``summary`` shows (empty for None or a form this version cannot read)."""
        models = None if shown is None else shown.get("models")
        if not isinstance(models, dict):
            return cls()
        try:
            return cls.model_validate({"models": models})
        except ValueError:
            return cls()


class Budget(BaseModel):
    """What a run may spend, checked before each of its model calls.

    Attributes:
        max_tokens: input and output tokens of all its calls together, or None.
        max_cost: its cost by ``prices``, or None.
        prices: the price of each model the run may call (from ``[prices]`` in ``plangate.toml``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    def exceeded(self, usage: RunUsage) -> str | None:
        """The budget ``usage`` has reached (``max_tokens`` or ``max_cost``), or None when another call may
        be made."""
        if self.max_tokens is not None and usage.tokens >= self.max_tokens:
            return "max_tokens"
        if self.max_cost is not None:
            cost = usage.cost(self.prices)
            if cost is not None and cost >= self.max_cost:
                return "max_cost"
        return None

    def limit(self, name: str) -> str:
        """The budget ``name`` as a person reads it (``max_tokens 2000``)."""
        value = self.max_tokens if name == "max_tokens" else self.max_cost
        return f"{name} {value}"


class UsageTally:
    """The usage of the calls of models it wraps, added up in memory: for work that one process does from
    start to end (a copilot turn, never resumed), whose outcome then carries it."""

    def __init__(self) -> None:
        self.usage = RunUsage()

    def wrap(self, model: Model) -> Model:
        """``model``, with each call's usage added to this tally."""
        return _Counted(model, self)

    def summary(self) -> dict[str, JsonValue] | None:
        """The usage as an outcome shows it, or None when no call reported any."""
        return self.usage.summary({}) if self.usage.models else None


class _Counted(ModelWrapper):
    """A model seen through a ``UsageTally``; everything else it has is the inner model's."""

    def __init__(self, inner: Model, tally: UsageTally) -> None:
        self.inner = inner
        self.tally = tally

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The inner model's stream, unchanged; its usage counted when it ends or fails."""
        usage: Usage | None = None
        try:
            async for chunk in self.inner.stream(request):
                if isinstance(chunk, Usage):
                    usage = chunk if usage is None else usage + chunk
                yield chunk
        finally:
            if usage is not None:
                self.tally.usage = self.tally.usage.plus(self.inner.name, usage)


def children_usage(store: Store, run_id: str) -> dict[str, JsonValue] | None:
    """The usage of the runs ``run_id`` started (a formula's agent steps and sub-formulas, each of which
    counts its own children), as an outcome shows it: None when none of them called a model. The cost is
    their costs' sum, shown only when each of them had one."""
    shown: list[Mapping[str, JsonValue]] = []
    cursor: str | None = None
    while True:
        page = store.list_runs(parent_run_id=run_id, limit=200, cursor=cursor)
        for run in page.items:
            usage = None if run.outcome is None else run.outcome.get("usage")
            if isinstance(usage, dict):
                shown.append(usage)
        cursor = page.next_cursor
        if cursor is None:
            break
    return combined(shown)


def combined(parts: Iterable[Mapping[str, JsonValue] | None]) -> dict[str, JsonValue] | None:
    """Usages as outcomes show them (``RunUsage.summary``), added up into one: None when none called a
    model. The cost is their costs' sum, shown only when each of them had one."""
    usage = RunUsage()
    costs: list[float] = []
    counted = 0
    for shown in parts:
        if shown is None:
            continue
        counted += 1
        usage = usage.merged(RunUsage.of_summary(shown))
        cost = shown.get("cost")
        if isinstance(cost, int | float):
            costs.append(float(cost))
    if not counted:
        return None
    summary = usage.summary({})
    if len(costs) == counted:
        summary["cost"] = round(sum(costs), 8)
    return summary


def call_usage(
    model: str, usage: Usage | None, prices: Mapping[str, ModelPrice]
) -> dict[str, JsonValue] | None:
    """One model call's usage as an outcome shows it (with its cost when ``prices`` has the model), or None
    when the provider reported none."""
    return None if usage is None else RunUsage().plus(model, usage).summary(prices)


def budget_exhausted(stage: str, budget: Budget, name: str, usage: RunUsage) -> Outcome:
    """The outcome of a run that reached its budget ``name`` before a model call in ``stage``."""
    spent = f"{usage.tokens} tokens"
    cost = usage.cost(budget.prices)
    if cost is not None:
        spent += f", cost {cost:.6f}"
    return Outcome(
        status="exhausted",
        stage=stage,
        code="budget_exhausted",
        user_message=f"The run reached its budget ({budget.limit(name)}; spent {spent}) and stopped.",
        internal_reason=f"{name} reached before a model call in {stage}",
    )


__all__ = [
    "Budget",
    "ModelUsage",
    "RunUsage",
    "UsageTally",
    "budget_exhausted",
    "call_usage",
    "children_usage",
    "combined",
]
