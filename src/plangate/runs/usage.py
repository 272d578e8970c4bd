"""What a run's model calls cost: tokens per model, the cost by a price table, and the budgets checked before
each call.

For: ``RunUsage`` (a run's tokens per model, added to once per model call and stored with the run's state in
the same commit as the step that made the call, so a resumed or taken-over run counts each call once),
``Budget`` (``max_tokens``, ``max_cost`` and the prices they are read with, kept in the run's input so
every process that advances the run judges it the same way; ``left`` is what a run hands down to the runs it
starts), ``Spent`` (what a run spent so far, read from usages as outcomes show them), ``budget_exhausted`` /
``exhausted`` (the outcome of a run whose budget ran out), ``BudgetReached`` (the signal a metered call
raises instead of starting) and ``UsageTally`` (a turn's calls, counted and checked in memory). Not for:
counting tokens of a prompt (``agent/_tokens.py``), a formula run's spending (``formulas/_budget.py``) or
showing usage (``cli/_events.py``, the console).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate._models import built
from plangate.config import ModelPrice
from plangate.errors import ConfigError, Signal
from plangate.models import Model, ModelChunk, ModelRequest, ModelWrapper, Usage
from plangate.runs.outcome import Outcome
from plangate.store import TERMINAL_STATUSES, RunRecord, Store

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
        added = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens or 0,
            usage.cache_write_tokens or 0,
        )
        values = {
            "calls": self.calls + 1,
            "input_tokens": self.input_tokens + added[0],
            "output_tokens": self.output_tokens + added[1],
            "cached_input_tokens": self.cached_input_tokens + added[2],
            "cache_write_tokens": self.cache_write_tokens + added[3],
        }
        # counts of this tally (checked when it was made) plus counts that are plain and not negative: sums
        # nothing needs to check again; anything else a provider reported is validated, and refused
        if _counts(added):
            return built(ModelUsage, values)
        return ModelUsage(**values)

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


def _counts(values: tuple[object, ...]) -> bool:
    """Whether every value is a plain int, none negative."""
    for value in values:
        if type(value) is not int or value < 0:
            return False
    return True


_NO_USAGE = ModelUsage()


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
        models[model] = models.get(model, _NO_USAGE).plus(usage)
        return built(RunUsage, {"models": models})  # tallies made and checked already

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


@dataclass(frozen=True, slots=True)
class Spent:
    """What a run has spent so far.

    Attributes:
        tokens: input and output tokens of its calls together.
        cost: their cost (0 before any call), or None when a call of a model without a price is among them.
    """

    tokens: int = 0
    cost: float | None = 0.0

    @classmethod
    def of(cls, shown: Mapping[str, JsonValue] | None) -> Spent:
        """What a usage as outcomes show it (``RunUsage.summary``, ``combined``; None: no call) spent."""
        if shown is None:
            return cls()
        tokens = sum(
            value for key in ("input_tokens", "output_tokens") if isinstance(value := shown.get(key), int)
        )
        cost = shown.get("cost")
        return cls(tokens, float(cost) if isinstance(cost, int | float) else None)


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
        costed = self.max_cost is not None and usage.models  # a cost only where a limit reads it
        return self.reached(Spent(usage.tokens, usage.cost(self.prices) if costed else 0.0))

    def reached(self, spent: Spent) -> str | None:
        """The budget ``spent`` has reached, or None when another call may be made."""
        if self.max_tokens is not None and spent.tokens >= self.max_tokens:
            return "max_tokens"
        if self.max_cost is not None and spent.cost is not None and spent.cost >= self.max_cost:
            return "max_cost"
        return None

    def left(self, spent: Spent) -> Budget:
        """What is left of the budget once ``spent`` is spent (for a run this one starts: an agent step's
        agent, a sub-formula, a turn's formula run); call it only while ``reached`` says None."""
        return Budget(
            max_tokens=None if self.max_tokens is None else max(self.max_tokens - spent.tokens, 1),
            max_cost=None if self.max_cost is None else max(self.max_cost - (spent.cost or 0.0), 0.0),
        )

    def limit(self, name: str) -> str:
        """The budget ``name`` as a person reads it (``max_tokens 2000``)."""
        value = self.max_tokens if name == "max_tokens" else self.max_cost
        return f"{name} {value}"

    def limits(self) -> dict[str, JsonValue]:
        """``max_tokens`` and ``max_cost`` as a run's input keeps them (those that are set)."""
        shown: dict[str, JsonValue] = {}
        if self.max_tokens is not None:
            shown["max_tokens"] = self.max_tokens
        if self.max_cost is not None:
            shown["max_cost"] = self.max_cost
        return shown

    @classmethod
    def of_limits(cls, data: object) -> Budget | None:
        """The budget a run's input keeps (``limits``), or None for a run without one."""
        if not isinstance(data, dict):
            return None
        try:
            budget = cls.model_validate(
                {"max_tokens": data.get("max_tokens"), "max_cost": data.get("max_cost")}
            )
        except ValueError:
            return None
        return None if budget.max_tokens is None and budget.max_cost is None else budget


def run_budget(max_tokens: object, max_cost: object, where: str) -> Budget | None:
    """The budget ``max_tokens`` / ``max_cost`` ask for, or None when neither is set.

    Raises:
        ConfigError: a value that is not an integer >= 1 (``max_tokens``) or a number >= 0 (``max_cost``),
            named with ``where``.
    """
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ConfigError(f"{where} max_tokens: expected an integer >= 1 or None; found {max_tokens!r}")
    if max_cost is not None and (
        isinstance(max_cost, bool)
        or not isinstance(max_cost, int | float)
        or not 0 <= max_cost < float("inf")
    ):
        raise ConfigError(f"{where} max_cost: expected a number >= 0 or None; found {max_cost!r}")
    if max_tokens is None and max_cost is None:
        return None
    return Budget(max_tokens=max_tokens, max_cost=None if max_cost is None else float(max_cost))


def require_prices(
    budget: Budget | None, models: Iterable[str], prices: Mapping[str, ModelPrice], where: str
) -> None:
    """Refuse a ``max_cost`` that a model the run calls cannot be held to: it has no price.

    Raises:
        ConfigError: ``budget`` has a ``max_cost`` and one of ``models`` is not in ``prices``.
    """
    if budget is None or budget.max_cost is None:
        return
    for model in models:
        if model not in prices:
            raise ConfigError(
                f"{where} max_cost: the model {model!r} has no price; add [prices.{model!r}] to "
                "plangate.toml (or pass prices=)"
            )


class BudgetReached(Signal):
    """A metered call did not start: the work's budget is reached. Caught by the work that set the budget,
    which ends ``exhausted`` with ``outcome``."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        super().__init__(outcome.user_message)


class UsageTally:
    """The usage of the calls of models it wraps, added up in memory: for work that one process does from
    start to end (a copilot turn, never resumed), whose outcome then carries it.

    Args:
        prices: what each model's tokens cost (the tally's cost, when every model it counted has one).
        budget: what the work may spend, checked before each call (``BudgetReached`` instead of the call).
        elsewhere: the usage the work's runs count themselves (a turn's formula runs), as outcomes show it.
    """

    def __init__(
        self,
        prices: Mapping[str, ModelPrice] | None = None,
        budget: Budget | None = None,
        elsewhere: Callable[[], Mapping[str, JsonValue] | None] | None = None,
    ) -> None:
        self.usage = RunUsage()
        self.prices: Mapping[str, ModelPrice] = dict(prices or {})
        self.budget = budget
        self.elsewhere = elsewhere

    def wrap(self, model: Model, stage: str | None = None) -> Model:
        """``model``, with each call's usage added to this tally (and, with a budget, checked first: a
        call refused names ``stage``, else the request's purpose, as where the work stopped)."""
        return _Counted(model, self, stage)

    def summary(self) -> dict[str, JsonValue] | None:
        """The usage as an outcome shows it, or None when no call reported any."""
        return self.usage.summary(self.prices) if self.usage.models else None

    def total(self) -> dict[str, JsonValue] | None:
        """This tally's usage and the usage counted elsewhere, together (None: no call reported any)."""
        return combined([self.summary(), None if self.elsewhere is None else self.elsewhere()])

    def check(self, stage: str) -> None:
        """Before a call (or a run that makes calls) in ``stage``.

        Raises:
            BudgetReached: the budget is reached; the call is not made.
        """
        ended = self.exhausted(stage)
        if ended is not None:
            raise BudgetReached(ended)

    def exhausted(self, stage: str) -> Outcome | None:
        """The outcome of the work once its budget is reached (in ``stage``), or None while it is not."""
        budget = self.budget
        if budget is None:
            return None
        spent = Spent.of(self.total())
        name = budget.reached(spent)
        return None if name is None else exhausted(stage, budget, name, spent, what="turn")

    def left(self) -> Budget | None:
        """What is left of the budget for a run the work starts (None: it has no budget)."""
        return None if self.budget is None else self.budget.left(Spent.of(self.total()))


class _Counted(ModelWrapper):
    """A model seen through a ``UsageTally``; everything else it has is the inner model's."""

    def __init__(self, inner: Model, tally: UsageTally, stage: str | None = None) -> None:
        self.inner = inner
        self.tally = tally
        self.stage = stage

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The inner model's stream, unchanged; its usage counted when it ends or fails. With a budget, the
        call is made only while the budget is not reached (``BudgetReached`` otherwise)."""
        self.tally.check(self.stage or request.purpose)
        usage: Usage | None = None
        try:
            async for chunk in self.inner.stream(request):
                if isinstance(chunk, Usage):
                    usage = chunk if usage is None else usage + chunk
                yield chunk
        finally:
            if usage is not None:
                self.tally.usage = self.tally.usage.plus(self.inner.name, usage)


def children_usage(
    store: Store,
    run_id: str,
    live: Callable[[RunRecord], Mapping[str, JsonValue] | None] | None = None,
) -> dict[str, JsonValue] | None:
    """The usage of the runs ``run_id`` started (a formula's agent steps and sub-formulas, each of which
    counts its own children), as an outcome shows it: None when none of them called a model. The cost is
    their costs' sum, shown only when each of them had one. An ended run counts by its outcome; one that
    has not ended by ``live`` (its count so far), else not at all."""
    shown: list[Mapping[str, JsonValue] | None] = []
    cursor: str | None = None
    while True:
        page = store.list_runs(parent_run_id=run_id, limit=200, cursor=cursor)
        for run in page.items:
            if live is not None and run.status not in TERMINAL_STATUSES:
                shown.append(live(run))
                continue
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
    return exhausted(
        stage, budget, name, Spent(usage.tokens, usage.cost(budget.prices) if usage.models else 0.0)
    )


def exhausted(stage: str, budget: Budget, name: str, spent: Spent, *, what: str = "run") -> Outcome:
    """The outcome of work (a ``run``, a ``turn``) that reached its budget ``name`` before a model call in
    ``stage``, having spent ``spent``."""
    shown = f"{spent.tokens} tokens"
    if spent.cost is not None:
        shown += f", cost {spent.cost:.6f}"
    return Outcome(
        status="exhausted",
        stage=stage,
        code="budget_exhausted",
        user_message=f"The {what} reached its budget ({budget.limit(name)}; spent {shown}) and stopped.",
        internal_reason=f"{name} reached before a model call in {stage}",
    )


__all__ = [
    "Budget",
    "BudgetReached",
    "ModelUsage",
    "RunUsage",
    "Spent",
    "UsageTally",
    "budget_exhausted",
    "call_usage",
    "children_usage",
    "combined",
    "exhausted",
    "require_prices",
    "run_budget",
]
