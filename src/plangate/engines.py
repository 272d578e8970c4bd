"""The engines one process drives runs with: formula, agent and copilot runs, over one store and one set of
tools, sharing one lease book.

For: ``build``, what the server, the command line and the workers call to get the same engines with
their own tools, formulas and model, registered by kind (``plangate.runs.Engines``) for the ``Runs``
facade, and kept by name for the calls that create runs (each engine's ``create`` takes what its kind
needs). Not for: advancing anything (the facade and the engines).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from plangate.agent.engine import AgentEngine
from plangate.config import BudgetConfig, ModelPrice
from plangate.copilot.engine import AskEngine
from plangate.formulas.engine import FormulaEngine
from plangate.formulas.runtime import FormulaRunner
from plangate.models import Model
from plangate.runs import Engines
from plangate.runs.operations import attach
from plangate.store import DEFAULT_LEASE_TTL, LeaseBook, Store
from plangate.tools import ToolRegistry


@dataclass(frozen=True)
class ProcessEngines:
    """The engines of one process.

    Attributes:
        registry: every engine, by the kind of run it advances.
        formulas: formula runs (its ``runner`` checks and plans formulas too).
        agents: agent runs.
        asks: copilot turns' ``ask`` runs.
        leases: the lease book every run of this process is advanced under.
    """

    registry: Engines
    formulas: FormulaEngine
    agents: AgentEngine
    asks: AskEngine
    leases: LeaseBook


def build(
    store: Store,
    tools: ToolRegistry | None = None,
    *,
    model: Model | str | None = None,
    search_paths: Iterable[str | Path] | None = None,
    root: Path | None = None,
    tool_specs: Iterable[str] = (),
    lease_ttl: float = DEFAULT_LEASE_TTL,
    prices: Mapping[str, ModelPrice] | None = None,
    budget: BudgetConfig | None = None,
) -> ProcessEngines:
    """The engines of a process that offers ``tools`` and formulas on ``search_paths``.

    Args:
        store: where runs live.
        tools: the tools runs may call.
        model: the model of agent runs, agent steps and llm steps that name none (None: the default).
        search_paths: directories searched for formulas (sub-formulas) before the default places.
        root: what formula conditions resolve ``file.exists`` against (default: the working directory).
        tool_specs: where ``tools`` came from (``module:attr``), recorded with runs.
        lease_ttl: seconds a run's lease lasts unless renewed.
        prices: what each model's tokens cost (``[prices]``), kept by new agent runs for their cost, and
            the cost of llm steps' calls.
        budget: the budgets of new agent and formula runs that name none (``[budget]``).
    """
    attach(store)  # this process's runs feed the webhooks' outbox and the owners' daily spending
    registry = tools if tools is not None else ToolRegistry()
    specs = list(tool_specs)
    runner = FormulaRunner(
        store,
        registry,
        search_paths=list(search_paths) if search_paths is not None else None,
        root=root,
        tool_specs=specs,
        model=model,
        lease_ttl=lease_ttl,
        prices=prices,
    )
    formulas = FormulaEngine(runner, budget)
    agents = AgentEngine(
        store, registry, model=model, leases=runner.leases, tool_specs=specs, prices=prices, budget=budget
    )
    asks = AskEngine(store, runner.leases)
    return ProcessEngines(Engines([formulas, agents, asks]), formulas, agents, asks, runner.leases)


__all__ = ["ProcessEngines", "build"]
