"""The agent runtime as a run engine: agent runs created, advanced, answered and cancelled through the run
contract (``plangate.runs``).

For: ``AgentEngine``, what a server, a worker or the command line holds to drive agent runs with its own
tools and model: a new run is stored with its first commit (``create``), and continued by whoever advances
it next; a stored run is rebuilt with the tools it was started with (by name, and checked against their
recorded identities) and with its own model (the engine's when it is the one the run recorded, else rebuilt
from the run's spec). Not for: what a run does (``loop.py`` and its phases) or the Python API
(``agent.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from plangate.agent._fork import check_request, origin_of
from plangate.agent._state import AgentConfig, Mode
from plangate.agent.agent import Agent
from plangate.agent.replay import replay_async
from plangate.config import BudgetConfig, ModelPrice
from plangate.errors import ConfigError
from plangate.interactions import Resolution
from plangate.models import Model
from plangate.runs.contract import Answered, Origin, Replayed
from plangate.runs.tools import refused_last
from plangate.store import TERMINAL_STATUSES, Interaction, LeaseBook, RunRecord, RunStatus, Store
from plangate.tools import ToolRegistry
from plangate.vocab import RunKind


class AgentEngine:
    """Agent runs, with this process's tools and model.

    Args:
        store: where runs live.
        tools: every tool this process offers; a run gets the ones it names (all by default).
        model: the model of runs that name none: a ``Model``, a spec string, or None for the default
            (``$PLANGATE_MODEL``, …). A stored run keeps its own.
        leases: the lease book every run is advanced under (one per process, or per worker message).
        tool_specs: where ``tools`` came from (``module:attr``), recorded with each run.
        prices: what each model's tokens cost (``[prices]``): a new run keeps its model's price.
        budget: the budgets of new runs that name none (``[budget]``).
    """

    kind: RunKind = "agent"
    remote = True

    def __init__(
        self,
        store: Store,
        tools: ToolRegistry,
        *,
        model: Model | str | None = None,
        leases: LeaseBook | None = None,
        tool_specs: Sequence[str] = (),
        prices: Mapping[str, ModelPrice] | None = None,
        budget: BudgetConfig | None = None,
    ) -> None:
        self.prices: dict[str, ModelPrice] = dict(prices or {})
        self.budget = budget if budget is not None else BudgetConfig()
        self.store = store
        self.tools = tools
        self.model = model
        self.leases = leases if leases is not None else LeaseBook(store)
        self.tool_specs = list(tool_specs)

    def create(
        self,
        prompt: str,
        owner: str,
        *,
        model: Model | str | None = None,
        tools: Sequence[str] | None = None,
        max_rounds: int = 60,
        mode: Mode = "auto",
        always_execute: bool = False,
        plan_consent: bool = False,
        done_when: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> str:
        """Store a new run with its first commit (``queued``); whoever advances it next starts it.

        Raises:
            ConfigError: an unknown tool name, a model that cannot be resolved, an empty prompt or an
                invalid setting (nothing was stored).
        """
        agent = Agent(
            model=model if model is not None else self.model,
            tools=self._subset(tools),
            store=self.store,
            max_rounds=max_rounds,
            mode=mode,
            always_execute=always_execute,
            plan_consent=plan_consent,
            done_when=done_when,
            owner=owner,
            leases=self.leases,
            tool_specs=self.tool_specs,
            **self.budget.for_run(max_tokens, max_cost),
            prices=self.prices,
        )
        return agent.submit(prompt)

    def fork(self, run: RunRecord, request: Mapping[str, JsonValue]) -> str:
        """Store a fork of the agent run (``queued``, its history copied when it is first advanced).

        Raises:
            InteractionError: no such round, or no tool call to edit there; not an agent run.
            ConfigError: a request value is invalid, or its model cannot be resolved.
        """
        checked = check_request(request)
        agent = Agent(model=None, tools=self.tools, store=self.store, owner=run.owner, leases=self.leases)
        return agent.submit_fork(run.id, checked)

    def origin(self, run: RunRecord) -> Origin | None:
        """The run the agent run was forked from, and before which round; None for a run that is no fork."""
        record = origin_of(run.input)
        if record is None:
            return None
        return Origin(str(record.get("run_id")), "fork", f"before round {record.get('round')}")

    async def replay(self, run: RunRecord) -> Replayed:
        """Replay the finished agent run offline with this process's tools (``plangate.agent.replay``).

        Raises:
            InteractionError: it has not ended.
            ConfigError: this process lacks one of its tools.
        """
        return await replay_async(self.store, run, self.tools)

    async def advance(self, run_id: str) -> RunStatus:
        """Continue the run to its next wait or its end (an approved write runs first, exactly once)."""
        return (await self.agent_for(self.store.get_run(run_id)).resume_async(run_id)).status

    async def answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> Answered:
        """Commit the resolution of the run's open interaction; the run acts on it when advanced next."""
        run = self.store.get_run(interaction.run_id)
        await self.agent_for(run).resolve_async(run.id, interaction.id, resolution, by=by)
        return Answered(run.id, continuing=False)

    def cancel(self, run_id: str, reason: str) -> None:
        """End the run ``cancelled``; its open interaction expires."""
        Agent(model=None, tools=self.tools, store=self.store).cancel(run_id, reason)

    def due(self, run: RunRecord) -> bool:
        """Not ended, and not waiting on a person (an answered agent run is ``running`` again), or left
        waiting by a process that lacked its tools."""
        if run.status in TERMINAL_STATUSES:
            return False
        return run.status != "waiting" or refused_last(self.store, run)

    def tool_names(self, run: RunRecord) -> list[str]:
        """The tools the run was started with."""
        config = _config(run)
        return list(config.tools) if config is not None else []

    def describe(self, run: RunRecord) -> dict[str, JsonValue]:
        """Nothing more than the run's record and events show."""
        return {}

    def agent_for(self, run: RunRecord) -> Agent:
        """The agent that continues a stored run: the tools it names that this process has (the runtime
        refuses the run if one is missing or differs), and its own model when that can be told."""
        config = _config(run)
        if config is None:
            # Not readable as settings: the runtime reports the run's input in its own words.
            return Agent(model=self.model, tools=self.tools, store=self.store, leases=self.leases)
        known = [name for name in config.tools if name in self.tools]
        return Agent(
            model=self._model_of(config.model),
            tools=ToolRegistry([self.tools.get(name) for name in known]),
            store=self.store,
            owner=run.owner,
            leases=self.leases,
        )

    def _model_of(self, spec: str) -> Model | str | None:
        # A model object is reused only for the runs it started (same name); other runs rebuild theirs from
        # the spec they recorded, so a request's choice of model holds after a restart too.
        if isinstance(self.model, str):
            return self.model if self.model == spec else None
        if self.model is not None and self.model.name == spec:
            return self.model
        return None

    def _subset(self, names: Sequence[str] | None) -> ToolRegistry:
        if names is None:
            return self.tools
        missing = [name for name in names if name not in self.tools]
        if missing:
            offered = ", ".join(self.tools.names()) or "none"
            raise ConfigError(
                f"tools: unknown tool {', '.join(map(repr, missing))}; this server offers {offered}"
            )
        return ToolRegistry([self.tools.get(name) for name in dict.fromkeys(names)])


def _config(run: RunRecord) -> AgentConfig | None:
    try:
        return AgentConfig.model_validate(run.input.get("agent"))
    except ValueError:
        return None


__all__ = ["AgentEngine"]
