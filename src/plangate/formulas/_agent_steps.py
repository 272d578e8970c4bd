"""Agent steps: a formula step that runs an agent as a child run, waits while it waits, and reads its end.

For: the ``StepAgent`` protocol the executor drives (start, resume and cancel an agent run), its default
implementation on ``plangate.agent`` (imported only when an agent step runs: formulas and the agent are peer
engines, and neither needs the other at import time), and ``AgentSteps``, which turns an agent run into a
``StepOutcome`` and routes a person's answer to the agent. Not for: the agent's loop (``plangate.agent``) or
the scheduling around the step (``_scheduler.py``).

A step's agent runs have ids made of the formula run, the step and a counter (``<run>.<step>.agent<n>``):
a step interrupted by a crash finds the agent it had started and resumes it instead of starting a second
one, and an answer to the agent's question leads back to the step it belongs to.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.errors import InteractionError, NotFoundError, PlangateError, StoreError, UserError
from plangate.formulas._executors import StepOutcome
from plangate.formulas.plan import AgentExecutor, CookedStep
from plangate.formulas.templates import render_runtime, to_text
from plangate.interactions import Resolution
from plangate.models import Model
from plangate.runs.usage import Budget
from plangate.store import TERMINAL_STATUSES, Interaction, LeaseBook, RunKind, RunRecord, RunStatus, Store
from plangate.tools import ToolRegistry

if TYPE_CHECKING:
    from plangate.agent import AgentResult
    from plangate.formulas._budget import RunBudget


#: What the agent runtime gives a run when a step names no ``max_rounds``.
DEFAULT_MAX_ROUNDS = 60
_CHILD = re.compile(r"\.agent(\d+)$")
_ENDED_BADLY: frozenset[str] = frozenset({"aborted", "exhausted", "cancelled", "failed"})


@dataclass(frozen=True)
class AgentSetup:
    """What an agent step's agent works with.

    Attributes:
        tools: only the tools the step names, all active from the first round (the step chose them; there
            is nothing for the agent to discover).
        model: a model, a spec, or None: the agent's default at start, the run's own model on resume.
        owner: who the agent run belongs to (the formula run's owner).
        max_rounds: the agent's round budget.
        mode: how the agent starts (``auto``: route first; ``plan``; ``react``).
        done_when: the step's goal as a condition over the agent's receipts, which the agent runtime checks
            after each one (the step completes with the proof), or None.
        budget: what is left of the formula run's budget when the agent starts (it keeps it as its own), or
            None.
        prices: what each model's tokens cost (the formula run's prices first): the agent keeps its model's.
    """

    tools: ToolRegistry
    model: Model | str | None
    owner: str
    max_rounds: int = DEFAULT_MAX_ROUNDS
    mode: Literal["auto", "plan", "react"] = "auto"
    done_when: str | None = None
    budget: Budget | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentRunView:
    """Where a step's agent run stands, as the step reads it.

    Attributes:
        status: the agent run's status (``waiting``, ``completed``, ``aborted``, ``exhausted``, ...).
        outcome: ``{status, stage, code, user_message}`` once it ended.
        interaction: its open question or consent request while ``waiting``.
        receipts: its evidence, each ``{step_index, source, name, success, summary}``.
    """

    run_id: str
    status: RunStatus
    answer: str | None = None
    outcome: dict[str, str] | None = None
    interaction: Interaction | None = None
    receipts: list[JsonValue] = field(default_factory=list)


class StepAgent(Protocol):
    """Runs the agents of agent steps; inject one into ``FormulaRunner(agent_runner=...)``."""

    async def start(self, prompt: str, setup: AgentSetup, *, run_id: str, parent_run_id: str) -> AgentRunView:
        """Create the agent run ``run_id`` as a child of ``parent_run_id`` and advance it until it waits or
        ends."""
        ...

    async def resume(
        self,
        run_id: str,
        setup: AgentSetup,
        interaction_id: str | None = None,
        resolution: Resolution | None = None,
        *,
        by: str | None = None,
    ) -> AgentRunView:
        """Apply ``resolution`` to the run's open interaction (when given), then advance it; a run that
        waits or ended is returned as it stands."""
        ...

    def cancel(self, run_id: str, reason: str) -> None:
        """End the agent run ``cancelled``; its open interaction expires."""
        ...

    async def record(
        self, run_id: str, setup: AgentSetup, interaction_id: str, resolution: Resolution, *, by: str | None
    ) -> None:
        """Commit ``resolution`` of the run's open interaction and nothing more: no tool runs, the run is
        not advanced (whoever advances it next does)."""
        ...

    def usage(self, run: RunRecord) -> dict[str, JsonValue] | None:
        """The model usage of an agent run that has not ended, so far, as its outcome would show it."""
        ...


class RuntimeStepAgent:
    """``StepAgent`` on ``plangate.agent.Agent``, over the formula runner's store.

    Args:
        store: the formula runner's store.
        leases: the formula runner's lease book: an agent run holds its own lease under the same holder,
            and its commits are fenced by it.
    """

    def __init__(self, store: Store, leases: LeaseBook | None = None) -> None:
        self.store = store
        self.leases = leases
        # One model object per spec (and per agent run started here) for this runner's life: a scripted
        # model goes on where it was when its agent resumes in this process, instead of from its start.
        self._models: dict[str, Model] = {}
        self._started: dict[str, Model] = {}

    def _model(self, spec: Model | str | None, run_id: str | None = None) -> Model | str | None:
        if isinstance(spec, str):
            if spec not in self._models:
                from plangate.models import resolve_model

                self._models[spec] = resolve_model(spec)
            return self._models[spec]
        if spec is None and run_id is not None:
            return self._started.get(run_id)
        return spec

    async def start(self, prompt: str, setup: AgentSetup, *, run_id: str, parent_run_id: str) -> AgentRunView:
        from plangate.agent import Agent
        from plangate.models import resolve_model

        model = self._model(setup.model)
        if model is None:
            model = self._started[run_id] = resolve_model(None)
        budget = setup.budget
        agent = Agent(
            model=model,
            tools=setup.tools,
            store=_child_store(self.store, parent_run_id, run_id),
            max_rounds=setup.max_rounds,
            mode=setup.mode,
            owner=setup.owner,
            leases=self.leases,
            done_when=setup.done_when,
            max_tokens=None if budget is None else budget.max_tokens,
            max_cost=None if budget is None else budget.max_cost,
            prices=setup.prices,
        )
        return self._view(await agent.run_async(prompt))

    async def resume(
        self,
        run_id: str,
        setup: AgentSetup,
        interaction_id: str | None = None,
        resolution: Resolution | None = None,
        *,
        by: str | None = None,
    ) -> AgentRunView:
        from plangate.agent import Agent

        model = self._model(setup.model, run_id)
        agent = Agent(model=model, tools=setup.tools, store=self.store, owner=setup.owner, leases=self.leases)
        return self._view(await agent.resume_async(run_id, interaction_id, resolution, by=by))

    def cancel(self, run_id: str, reason: str) -> None:
        from plangate.agent import Agent

        Agent(store=self.store).cancel(run_id, reason)

    async def record(
        self, run_id: str, setup: AgentSetup, interaction_id: str, resolution: Resolution, *, by: str | None
    ) -> None:
        from plangate.agent import Agent

        agent = Agent(
            model=setup.model, tools=setup.tools, store=self.store, owner=setup.owner, leases=self.leases
        )
        await agent.resolve_async(run_id, interaction_id, resolution, by=by)

    def usage(self, run: RunRecord) -> dict[str, JsonValue] | None:
        from plangate.agent import Agent

        return Agent(store=self.store).usage(run)

    def _view(self, result: AgentResult) -> AgentRunView:
        outcome = result.outcome
        receipts: list[JsonValue] = [
            {
                "step_index": r.step_index,
                "source": r.source,
                "name": r.name,
                "success": r.success,
                "summary": r.summary,
            }
            for r in self.store.receipts(result.run_id)
        ]
        return AgentRunView(
            run_id=result.run_id,
            status=result.status,
            answer=result.answer,
            outcome=None
            if outcome is None
            else {
                "status": outcome.status,
                "stage": outcome.stage,
                "code": outcome.code,
                "user_message": outcome.user_message,
            },
            interaction=result.interaction,
            receipts=receipts,
        )


class _ChildStore:
    """The store as a step's agent sees it while starting: the run it creates is the step's child run.

    The agent runtime creates its own run and takes no parent; this is the one seam that makes the run a
    child of the formula run (so ``_child_interaction``, the server's cancel and the CLI find it) with the
    id the step will look for after a crash. Everything else goes to the real store.
    """

    def __init__(self, store: Store, parent_run_id: str, run_id: str) -> None:
        self._store = store
        self._parent_run_id = parent_run_id
        self._run_id = run_id

    def create_run(
        self,
        kind: RunKind,
        name: str,
        input: Mapping[str, object],
        *,
        owner: str = "local",
        parent_run_id: str | None = None,
        run_id: str | None = None,
        lease: tuple[str, float] | None = None,
    ) -> RunRecord:
        return self._store.create_run(
            kind,
            name,
            input,
            owner=owner,
            parent_run_id=self._parent_run_id,
            run_id=self._run_id,
            lease=lease,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _child_store(store: Store, parent_run_id: str, run_id: str) -> Store:
    return cast(Store, _ChildStore(store, parent_run_id, run_id))


def child_run_id(run_id: str, step_id: str, n: int) -> str:
    """The id of the ``n``-th agent run of step ``step_id`` in formula run ``run_id``."""
    return f"{run_id}.{step_id}.agent{n}"


def step_of_child(parent_run_id: str, child_run_id: str) -> str | None:
    """The step of ``parent_run_id`` that started the agent run ``child_run_id`` (None: none did)."""
    prefix = f"{parent_run_id}."
    found = _CHILD.search(child_run_id)
    if not child_run_id.startswith(prefix) or found is None or found.start() <= len(prefix):
        return None
    return child_run_id[len(prefix) : found.start()]


class AgentHost(Protocol):
    """What agent steps read from their formula runner, at each use."""

    @property
    def store(self) -> Store:
        """Where the formula runs live; their steps' agent runs live there too, as their children."""
        ...

    @property
    def tools(self) -> ToolRegistry:
        """The runner's registry; an agent step gets the tools it names."""
        ...

    @property
    def model(self) -> Model | str | None:
        """The model of agent steps that name none (None: the agent's default)."""
        ...


class AgentSteps:
    """How a formula runner runs its agent steps.

    Args:
        host: the runner (its store, tools and default model are read at each use).
        agents: what runs the agents.
    """

    def __init__(self, host: AgentHost, agents: StepAgent) -> None:
        self.host = host
        self.agents = agents

    @property
    def store(self) -> Store:
        return self.host.store

    def setup(
        self,
        executor: AgentExecutor,
        owner: str,
        budget: Budget | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> AgentSetup:
        """The tools, model and budget of an agent step (``budget``: what is left of the run's, and
        ``prices``, for an agent it starts).

        Raises:
            UnknownToolError: the runner lacks a tool the step names.
        """
        named = [self.host.tools.get(name) for name in dict.fromkeys(executor.tools)]
        tools = ToolRegistry([dataclasses.replace(item, domain="core", pack="core") for item in named])
        return AgentSetup(
            tools=tools,
            model=executor.model if executor.model is not None else self.host.model,
            owner=owner,
            max_rounds=executor.max_rounds if executor.max_rounds is not None else DEFAULT_MAX_ROUNDS,
            mode=executor.mode,
            done_when=executor.done_when,
            budget=budget,
            prices=dict(prices or {}),
        )

    async def run(
        self,
        step: CookedStep,
        executor: AgentExecutor,
        run_id: str,
        owner: str,
        vars: Mapping[str, JsonValue],
        outputs: Mapping[str, Mapping[str, JsonValue]],
        existing: Sequence[str] = (),
        *,
        budget: RunBudget | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> StepOutcome:
        """Start the step's agent, or resume the one it has (``existing``, or one a crash cut off).

        An agent this process cannot continue (a tool or the model missing here) leaves the step waiting
        with the reason, its agent untouched: resuming the run where those exist picks it up. A new agent
        of a run with a ``budget`` gets what is left of it, and is not started once it is reached; a
        resumed one keeps the budget it started with.
        """
        child = existing[0] if existing else self._adoptable(run_id, step.id)
        left: Budget | None = None
        if budget is not None and not isinstance(child, str):
            given = budget.left()
            if isinstance(given, StepOutcome):
                return given  # reached: no agent is started
            left = given
        try:
            setup = self.setup(executor, owner, left, prices)
            if isinstance(child, str):
                return step_outcome(await self.agents.resume(child, setup))
        except StoreError:
            raise  # the store, not the agent: the run stops where it stands (``STOPS_THE_RUN``)
        except UserError as exc:
            if isinstance(child, str):
                return StepOutcome(
                    "waiting", reason=f"agent {child} cannot continue here: {exc}", run_ids=[child]
                )
            return StepOutcome("failed", reason=f"agent: {exc}")
        except PlangateError as exc:
            return StepOutcome("failed", reason=f"agent: {exc}")
        try:
            rendered = render_runtime(executor.prompt, vars, outputs, path=f"{step.id}.agent.prompt")
        except PlangateError as exc:
            return StepOutcome("failed", reason=f"prompt: {exc}")
        prompt = rendered if isinstance(rendered, str) else to_text(rendered)
        new_id = child_run_id(run_id, step.id, child)
        try:
            view = await self.agents.start(prompt, setup, run_id=new_id, parent_run_id=run_id)
        except StoreError:
            raise
        except PlangateError as exc:
            return StepOutcome("failed", reason=f"agent: {exc}")
        return step_outcome(view)

    def _adoptable(self, run_id: str, step_id: str) -> str | int:
        """The step's agent run to resume (its id), or the number the next one gets.

        The latest run is resumed unless it ended badly (a retry starts afresh): one that completed or still
        works is what the step was doing when its process stopped (or when the step's ``timeout`` cut it
        off: a retry then continues that agent, with what is left of its round budget). A run created but
        never committed to has nothing to resume from, and is cancelled.
        """
        n = 0
        latest: RunRecord | None = None
        while True:
            try:
                found = self.store.get_run(child_run_id(run_id, step_id, n + 1))
            except NotFoundError:
                break
            latest, n = found, n + 1
        if latest is None or latest.status in _ENDED_BADLY:
            return n + 1
        if self.store.get_snapshot(latest.id) is None:
            self.agents.cancel(latest.id, "never started: its process stopped first")
            return n + 1
        return latest.id

    async def resolve(
        self,
        child: RunRecord,
        plan_step: CookedStep | None,
        interaction_id: str,
        resolution: Resolution,
        by: str | None,
    ) -> None:
        """Commit a person's answer to the open interaction of a step's agent, and nothing more: whoever
        advances the formula run next continues the agent (and runs the call it approved).

        Raises:
            InteractionError: ``plan_step`` is not an agent step.
            StaleInteraction: the interaction is not the agent's open one; nothing changed.
        """
        if plan_step is None or not isinstance(plan_step.executor, AgentExecutor):
            raise InteractionError(
                f"agent run {child.id!r} belongs to no agent step of formula run {child.parent_run_id!r}"
            )
        setup = self.setup(plan_step.executor, child.owner)
        await self.agents.record(child.id, setup, interaction_id, resolution, by=by)

    def cancel_children(self, run_id: str, reason: str) -> None:
        """Cancel every agent run of ``run_id``'s steps that has not ended."""
        cursor: str | None = None
        while True:
            page = self.store.list_runs(parent_run_id=run_id, kind="agent", limit=100, cursor=cursor)
            for child in page.items:
                if child.status not in TERMINAL_STATUSES:
                    self.agents.cancel(child.id, reason)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def step_outcome(view: AgentRunView) -> StepOutcome:
    """What an agent run means for its step: waiting, complete with its answer, or failed with its reason."""
    if view.status == "waiting":
        asked = view.interaction.prompt if view.interaction is not None else "an answer"
        return StepOutcome(
            "waiting", reason=f"agent {view.run_id} waits on a person: {asked}", run_ids=[view.run_id]
        )
    outcome = view.outcome or {}
    output: dict[str, JsonValue] = {
        "answer": view.answer or "",
        "outcome": {"status": outcome.get("status", view.status), "code": outcome.get("code", "")},
        "run_id": view.run_id,
        "receipts": list(view.receipts),
    }
    if view.status == "completed":
        return StepOutcome(
            "complete", output, f"agent completed ({outcome.get('code', 'done')})", [view.run_id]
        )
    if view.status in _ENDED_BADLY:
        why = outcome.get("user_message") or outcome.get("code") or view.status
        code = outcome.get("code", view.status)
        reason = f"agent {view.status} ({code}): {why}"
        # an agent's budget is what was left of its formula run's: the run's is reached too
        return StepOutcome("failed", output, reason, [view.run_id], exhausted=code == "budget_exhausted")
    return StepOutcome("failed", output, f"agent {view.run_id} stopped while {view.status}", [view.run_id])


__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "AgentHost",
    "AgentRunView",
    "AgentSetup",
    "AgentSteps",
    "RuntimeStepAgent",
    "StepAgent",
    "child_run_id",
    "step_of_child",
    "step_outcome",
]
