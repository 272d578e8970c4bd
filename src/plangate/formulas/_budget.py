"""A formula run's budget and prices: what the run may spend, what it has spent, what its calls cost.

For: ``RunBudget``, made by the scheduler of a run whose input keeps a budget (``max_tokens``, ``max_cost``):
before each model call of an ``llm`` step (``refusal``) and before a step starts a run of its own (an agent
step's agent, a sub-formula, a fan-out's sub-runs: ``left``, what is left of the budget, becomes that run's),
it adds up what the run has spent — its own ``llm`` steps (its state, every attempt's call) and the runs its
steps started (an ended one's outcome, a running or waiting one's count so far) — so a second process that
continues the run judges it by what the first one spent. ``RunPrices``: the price a call is costed with, the
run's own when it recorded one (the first time it used the model), else this process's, then recorded. Not
for: counting a call (``runs/usage.py``) or deciding how the run ends (``_scheduler.py``).

The run's ``llm`` calls are made one at a time (``calling``): each looks at the budget with the usage of the
calls before it counted (``hold``, until the step's transition carries it into the run's state), so the run
crosses its budget by one call at most, however many of its steps work at the same time. Runs that steps
start at the same time each get what was left when they started, and each keeps to that (together they
may spend that many times what was left).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.errors import ConfigError, PlangateError
from plangate.formulas._executors import StepOutcome
from plangate.formulas._outcome import STAGE
from plangate.formulas._runstate import RunState
from plangate.formulas.plan import AgentExecutor, LlmExecutor, Plan
from plangate.models import Model, resolve_model
from plangate.runs import Outcome
from plangate.runs.usage import (
    Budget,
    Spent,
    children_usage,
    combined,
    exhausted,
    require_prices,
    run_budget,
)
from plangate.store import RunRecord, Store

BUDGET_KEY = "budget"
"""Where a formula run's input keeps its budget (``{max_tokens, max_cost}``)."""


class AgentUsage(Protocol):
    """What reads the usage of an agent run that has not ended (``StepAgent.usage``)."""

    def usage(self, run: RunRecord) -> dict[str, JsonValue] | None: ...


class RunPrices:
    """The prices of one run's calls: those the run recorded, else this process's (recorded at first use).

    Args:
        state: the run's state (``RunState.prices``).
        process: this process's prices (``[prices]``).
    """

    def __init__(self, state: RunState, process: Mapping[str, ModelPrice]) -> None:
        self.state = state
        self.process = process

    def has(self, model: str) -> bool:
        """Whether a call of ``model`` can be costed."""
        return model in self.state.prices or model in self.process

    def of(self, model: str) -> ModelPrice | None:
        """The price a call of ``model`` is costed with (recorded by the run the first time), or None."""
        price = self.state.prices.get(model)
        if price is None:
            price = self.process.get(model)
            if price is not None:
                self.state.record_price(model, price)
        return price

    def table(self) -> dict[str, ModelPrice]:
        """Every price a call may be costed with, the run's own winning (for an agent step's agent, which
        keeps its model's with its own run)."""
        return {**self.process, **self.state.prices}


class RunBudget:
    """The budget of one formula run, checked against what it spent (see the module's docstring).

    Args:
        limits: the run's ``max_tokens`` / ``max_cost``.
        store: where the run and the runs its steps started live.
        run_id: the run.
        state: the run's state (its ``llm`` steps' usage, its prices).
        prices: this process's prices.
        agents: what reads a running agent step's agent's usage so far.
    """

    def __init__(
        self,
        limits: Budget,
        store: Store,
        run_id: str,
        state: RunState,
        prices: Mapping[str, ModelPrice],
        agents: AgentUsage,
    ) -> None:
        self.limits = limits
        self.store = store
        self.run_id = run_id
        self.state = state
        self.prices = RunPrices(state, prices)
        self.agents = agents
        self._calling = asyncio.Lock()
        self._held: dict[str, dict[str, JsonValue] | None] = {}  # by step: calls not in the state yet
        self._steps_seen = -1  # the plan's length when ``_starts`` was last worked out
        self._starts = True

    @classmethod
    def of(
        cls,
        run: RunRecord,
        state: RunState,
        prices: Mapping[str, ModelPrice],
        agents: AgentUsage,
        store: Store,
    ) -> RunBudget | None:
        """The budget of ``run``, or None when its input keeps none."""
        limits = Budget.of_limits(run.input.get(BUDGET_KEY))
        return None if limits is None else cls(limits, store, run.id, state, prices, agents)

    def spent(self) -> Spent:
        """What the run has spent: its ``llm`` steps' calls and the runs its steps started."""
        parts = [self.state.usage(), *self._held.values()]
        if self._starts_runs():
            parts.append(_children(self.store, self.run_id, self.agents))
        return Spent.of(combined(parts))

    def _starts_runs(self) -> bool:
        """Whether a step of the plan starts runs (an agent, a sub-formula, a fan-out): a plan with none
        has no runs of its own to read from the store (looked at again only once the plan grew)."""
        steps = self.state.plan.steps
        if len(steps) != self._steps_seen:
            self._steps_seen = len(steps)
            self._starts = self.state.plan.starts_runs()
        return self._starts

    def calling(self) -> asyncio.Lock:
        """What an ``llm`` step holds from its look at the budget until its call's usage is held."""
        return self._calling

    def hold(self, step_id: str, usage: dict[str, JsonValue] | None) -> None:
        """Count a call of ``step_id`` until its next transition carries its usage (``settle``)."""
        self._held[step_id] = combined([self._held.get(step_id), usage])

    def settle(self, step_id: str) -> None:
        """``step_id``'s usage is in the run's state now: stop counting it apart."""
        self._held.pop(step_id, None)

    def refusal(self, model: str) -> StepOutcome | None:
        """Why a call of ``model`` may not be made (the budget is reached, or ``max_cost`` cannot be held
        to: the model has no price), as the step's outcome; None: it may."""
        if self.limits.max_cost is not None and not self.prices.has(model):
            try:
                require_prices(self.limits, [model], {}, "the run's")
            except ConfigError as exc:
                return StepOutcome("failed", reason=str(exc))
        return self.exhausted()

    def exhausted(self) -> StepOutcome | None:
        """The outcome of a step that may not start its model call: the budget is reached; None: it may."""
        left = self.left()
        return left if isinstance(left, StepOutcome) else None

    def left(self) -> Budget | StepOutcome:
        """What is left of the budget for a run a step starts now (an agent, a sub-formula); once it is
        reached, the outcome of the step instead (the run is not started)."""
        spent = self.spent()
        name = self.limits.reached(spent)
        if name is None:
            return self.limits.left(spent)
        shown = f"{spent.tokens} tokens" + ("" if spent.cost is None else f", cost {spent.cost:.6f}")
        reason = f"the run reached its budget ({self.limits.limit(name)}; spent {shown})"
        return StepOutcome("failed", reason=reason, exhausted=True)

    def ending(self, failed: Outcome) -> Outcome:
        """How a run that ``failed`` ends: ``exhausted`` (code ``budget_exhausted``, the budget named) when
        what it spent (the outcome's usage) reached its budget, else as it failed."""
        spent = Spent.of(failed.usage)
        name = self.limits.reached(spent)
        if name is None:
            return failed
        ended = exhausted(STAGE, self.limits, name, spent)
        return ended.model_copy(update={"usage": failed.usage, "internal_reason": failed.user_message})


def new_budget(
    plan: Plan,
    max_tokens: int | None,
    max_cost: float | None,
    model: Model | str | None,
    prices: Mapping[str, ModelPrice],
) -> Budget | None:
    """The budget a new run of ``plan`` keeps (None: none), its ``max_cost`` refused unless every model the
    plan's ``llm`` and agent steps call (theirs, else ``model``, else the default) has a price.

    Raises:
        ConfigError: a value that is not valid, or a model without a price.
    """
    budget = run_budget(max_tokens, max_cost, "formula")
    if budget is None or budget.max_cost is None:
        return budget
    specs = {
        step.executor.model: None
        for step in plan.steps
        if isinstance(step.executor, LlmExecutor | AgentExecutor)
    }
    names = []
    for spec in specs:
        chosen = spec if spec is not None else model
        names.append(chosen.name if isinstance(chosen, Model) else resolve_model(chosen).name)
    require_prices(budget, names, prices, "formula")
    return budget


def _children(store: Store, run_id: str, agents: AgentUsage) -> dict[str, JsonValue] | None:
    """The usage of the runs ``run_id``'s steps started: an ended one's outcome, else its count so far (an
    agent's snapshot; a sub-formula's steps and the runs they started)."""
    return children_usage(store, run_id, lambda child: _so_far(store, child, agents))


def _so_far(store: Store, run: RunRecord, agents: AgentUsage) -> dict[str, JsonValue] | None:
    """The usage of ``run``, a run a step started that has not ended, so far."""
    try:
        if run.kind == "agent":
            return agents.usage(run)
        snapshot = store.get_snapshot(run.id)
        if run.kind != "formula" or snapshot is None:
            return None
        state = RunState.from_snapshot(snapshot.state, snapshot.version, snapshot.seq)
        state.fold(store.events(run.id, after=snapshot.seq))
    except PlangateError:  # gone, or of a form this version cannot read: nothing to add
        return None
    return combined([state.usage(), _children(store, run.id, agents)])


__all__ = ["BUDGET_KEY", "AgentUsage", "RunBudget", "RunPrices", "new_budget"]
