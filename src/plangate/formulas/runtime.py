"""The formula executor: runs a plan's steps as a DAG, waits at gates and on people, resumes after a crash.

For: ``run_formula`` / ``resume_run`` and the ways a person moves a waiting run on (resolve an interaction,
complete a manual step, cancel). Every transition is committed (events, and the snapshot when the plan or a
checkpoint is due) before anything it allows starts, so a process killed at any instant loses at most the
work in flight. Not for: cooking plans (``cook.py``) or what each executor does (``_executors.py``,
``_agent_steps.py``).

An agent step's agent is a child run; its questions and consent requests are the formula run's too: the
run's result shows them, and ``answer`` given one commits it for the agent, which continues when its
formula run is advanced.

Only the holder of a run's lease advances it (``LeaseBook``): ``start`` and ``resume`` keep it while they
work, so two processes never advance one run, and a run another live process advances is refused with
``RunLeased``. ``answer`` is the one way to answer, wherever the run is: handed to this runner's live
scheduler (nothing that runs is interrupted, and a suspended sub-run that was answered continues alone),
committed at rest, or left in the store for the process advancing the run, whose scheduler takes it
between two passes. A run is advanced only with the tools it was started with (``plangate.runs.tools``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, Unpack

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.errors import (
    ConfigError,
    FormulaError,
    InteractionError,
    NotFoundError,
    RunLeased,
    StaleInteraction,
)
from plangate.events import StatusEvent, StepStateEvent
from plangate.formulas import retry
from plangate.formulas._agent_steps import AgentSteps, RuntimeStepAgent, StepAgent, step_of_child
from plangate.formulas._answers import STORED_ANSWERS, answer_step, commit_answer
from plangate.formulas._budget import BUDGET_KEY, RunBudget, new_budget
from plangate.formulas._executors import MAX_NESTING, StepOutcome
from plangate.formulas._frozen import frozen
from plangate.formulas._outcome import formula_outcome, with_steps_usage
from plangate.formulas._runstate import SNAPSHOT_VERSION, RunState
from plangate.formulas._scheduler import Scheduler
from plangate.formulas.plan import Plan
from plangate.interactions import Edit, Resolution, resolution_dict
from plangate.models import Model
from plangate.runs import telemetry
from plangate.runs import tools as tool_identities
from plangate.runs.telemetry.logs import advancing
from plangate.runs.usage import Budget
from plangate.store import (
    DEFAULT_LEASE_TTL,
    TERMINAL_STATUSES,
    DocumentConflict,
    Documents,
    Interaction,
    LeaseBook,
    RunRecord,
    RunStatus,
    Store,
    Transaction,
    open_store,
)
from plangate.tools import ToolRegistry

FormulaSource = str | Path | Plan

logger = logging.getLogger("plangate.formulas")

_HANDED_WAIT = 10.0
"""Seconds an answer left for the process advancing its run waits for it to be taken before ``answer``
returns (it stays stored either way, and that process takes it at its next look)."""
_HANDED_POLL = 0.2


@dataclass(frozen=True)
class StepView:
    """A step of a finished or suspended run, as callers see it."""

    id: str
    title: str
    status: str
    reason: str
    attempt: int
    output: dict[str, JsonValue] | None


@dataclass(frozen=True)
class FormulaResult:
    """Where a formula run stands after ``run_formula`` / ``resume_run`` returned.

    Attributes:
        status: ``completed``, ``failed``, ``exhausted`` (its budget ran out), ``cancelled``, or ``waiting``
            (a person, a gate or a manual step holds it; ``interaction`` is the open question when there is
            one).
        reason: one line saying why it ended or what it waits for.
    """

    run_id: str
    status: RunStatus
    reason: str
    # left out of the repr: a 10,000-step run's would print every step (and ``asyncio.run`` formats the
    # result of the task it ran when it puts back the SIGINT handler)
    steps: dict[str, StepView] = field(default_factory=dict, repr=False)
    interaction: Interaction | None = None

    @property
    def outputs(self) -> dict[str, dict[str, JsonValue]]:
        """The output of every completed step, by id."""
        return {sid: s.output or {} for sid, s in self.steps.items() if s.status == "complete"}


@dataclass(frozen=True)
class Answered:
    """Where a person's answer went.

    Attributes:
        run_id: the formula run that holds the answered step (for an agent step's agent: its formula run).
        continuing: a scheduler of this runner is advancing the run (or the branch that waited) with it;
            False: nothing here is, and the run continues with ``resume`` of its root.
    """

    run_id: str
    continuing: bool


class FormulaRunner:
    """Runs formulas against one store and one tool registry.

    Args:
        store: where runs live: a ``Store``, a store URL or a file path (``.plangate/plangate.db``), or None
            for ``$PLANGATE_STORE`` / ``.plangate/plangate.db``.
        tools: what ``tool`` steps call; an ``agent`` step gets the ones it names.
        model: the model of ``agent`` and ``llm`` steps that name none: a ``Model``, a spec string, or None
            for the default model (``resolve_model(None)``). A resumed agent step without one continues
            with the model its agent recorded.
        agent_runner: what runs the agents of agent steps; by default the agent runtime
            (``plangate.agent``), imported only when an agent step runs.
        concurrency: how many steps work at once, at most.
        poll_interval: how often, in seconds, a gate that reads files or the environment is looked at again
            while other work runs (a gate on steps is looked at when one of them moves on).
        checkpoint_every: the fewest events between two snapshots of the run; a plan of more than a quarter
            as many steps waits four events per step (a snapshot costs the size of the plan).
        prices: what each model's tokens cost (``[prices]``), for the cost of ``llm`` steps' calls.

    Example::

        runner = FormulaRunner(open_store(), tools=ToolRegistry([run_tests, publish]))
        result = await runner.start("release", {"version": "1.2.0"})
        if result.interaction:
            await runner.answer(result.interaction.id, Approve())
            result = await runner.resume(result.run_id)
    """

    def __init__(
        self,
        store: Store | str | Path | None = None,
        tools: ToolRegistry | None = None,
        *,
        search_paths: Iterable[str | Path] | None = None,
        concurrency: int = 8,
        root: Path | None = None,
        env: Mapping[str, str] | None = None,
        poll_interval: float = 1.0,
        checkpoint_every: int = 1024,
        clock: Callable[[], float] = time.time,
        tool_specs: Iterable[str] = (),
        model: Model | str | None = None,
        agent_runner: StepAgent | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        lease_holder: str | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        if concurrency < 1:
            raise FormulaError(f"concurrency must be at least 1, got {concurrency}")
        store = _store(store)
        self.store = store
        self.tools = tools if tools is not None else ToolRegistry()
        self.search_paths = list(search_paths) if search_paths is not None else None
        self.concurrency = concurrency
        self.root = root if root is not None else Path.cwd()
        self.env = env
        self.poll_interval = poll_interval
        self.checkpoint_every = checkpoint_every
        self.clock = clock
        # where the tools came from (``module:attr``), kept with the run so another process can resume it
        self.tool_specs = list(tool_specs)
        self.model = model
        # what each model's tokens cost (``[prices]``): an llm step's usage carries its cost
        self.prices: Mapping[str, ModelPrice] = dict(prices or {})
        # whoever advances a run holds its lease; one book per runner, counted per run
        self.leases = LeaseBook(store, holder=lease_holder, ttl=lease_ttl)
        self.agent_steps = AgentSteps(
            self, agent_runner if agent_runner is not None else RuntimeStepAgent(store, self.leases)
        )
        self._live: dict[str, Scheduler] = {}

    @property
    def shares_loop(self) -> bool:
        """Other runs than one are advanced by this runner now (``RunHost.shares_loop``)."""
        return len(self._live) > 1

    # -- planning -----------------------------------------------------------------------------------------

    def plan(self, formula: FormulaSource, vars: Mapping[str, object] | None = None) -> Plan:
        """Load, cook and check ``formula``; any error-level issue stops here, before anything is stored.

        Raises:
            FormulaError: the formula cannot be loaded or cooked, or ``check`` found errors (all listed).
        """
        from plangate.formulas.check import check, check_formula

        if isinstance(formula, Plan):
            plan, issues = formula, check(formula, tools=self.tools)
        else:
            found, issues = check_formula(
                formula, dict(vars or {}), tools=self.tools, search_paths=self.search_paths
            )
            if found is None:
                raise FormulaError(
                    "; ".join(f"{i.path}: {i.message}" if i.path else i.message for i in issues)
                )
            plan = found
        errors = [i for i in issues if i.level == "error"]
        if errors:
            listed = "; ".join(f"{i.path}: {i.message}" if i.path else i.message for i in errors)
            raise FormulaError(f"{plan.formula} does not pass check: {listed}")
        return plan

    # -- running ------------------------------------------------------------------------------------------

    async def start(
        self,
        formula: FormulaSource,
        vars: Mapping[str, object] | None = None,
        *,
        owner: str = "local",
        parent_run_id: str | None = None,
        always_execute: bool = False,
        run_id: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> FormulaResult:
        """Check, store and run a formula until it ends or waits.

        Args:
            always_execute: write steps run without asking a person (``plangate run --yes``); recorded
                in the run's input and events, and inherited by its sub-runs.
            run_id: the new run's id (a sub-run's, committed by its parent first); random when None.
            max_tokens: the input and output tokens the run's model calls may use together (its ``llm``
                steps' and the runs its steps start: agents, sub-formulas); checked before each call, and a
                run that reached it ends ``exhausted`` (code ``budget_exhausted``). None: no limit.
            max_cost: the most the run may cost by ``prices`` (checked the same way); every model its
                ``llm`` and agent steps call needs a price.

        Raises:
            FormulaError: the formula does not pass check; nothing was stored.
            ConfigError: a budget that is not valid, or ``max_cost`` with a model that has no price.
        """
        plan = self.plan(formula, vars)
        with frozen(len(plan.steps)):  # from here: what a large plan's run makes is what the collector walks
            state = self._new_state(plan)
            run_input = self.input_for(plan, always_execute, self._budget(plan, max_tokens, max_cost))
            run = self.leases.create_run(
                "formula", plan.formula, run_input, owner=owner, parent_run_id=parent_run_id, run_id=run_id
            )
            return await self._advance(run.id, state, created=run)

    def create(
        self,
        formula: FormulaSource,
        vars: Mapping[str, object] | None = None,
        *,
        owner: str = "local",
        always_execute: bool = False,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> str:
        """Check and store a formula run with its first commit (``running``); returns its id, and
        ``advance`` runs it. Synchronous, so that a server creates it off its event loop. ``max_tokens``
        and ``max_cost``: its budget, as ``start`` takes it.

        Raises:
            FormulaError: the formula does not pass check; nothing was stored.
            ConfigError: a budget that is not valid, or ``max_cost`` with a model that has no price.
        """
        budget = (max_tokens, max_cost)
        return self._create(formula, vars, owner, always_execute, "running", budget=budget)

    async def advance(self, run_id: str) -> FormulaResult:
        """Run a run ``create`` stored, from its first commit, until it ends or waits.

        Raises:
            RunLeased: another live process advances the run (it took it over since); nothing changed.
        """
        return await self._advance(run_id, None, fresh=True)

    def submit(
        self,
        formula: FormulaSource,
        vars: Mapping[str, object] | None = None,
        *,
        owner: str = "local",
        always_execute: bool = False,
        run_id: str | None = None,
        schedule: Mapping[str, object] | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> str:
        """Check and store a formula run with its first commit (``queued``), without advancing it.

        For handing runs to workers: whoever resumes the run next (``resume``) starts its steps. Returns
        the run's id (``run_id``, when given: a schedule's slot names it first). ``schedule``: the slot
        that started it, kept in the run's input. ``max_tokens`` and ``max_cost``: its budget, as ``start``
        takes it.

        Raises:
            FormulaError: the formula does not pass check; nothing was stored.
            ConfigError: a budget that is not valid, or ``max_cost`` with a model that has no price.
        """
        budget = (max_tokens, max_cost)
        return self._create(formula, vars, owner, always_execute, "queued", run_id, schedule, budget)

    def _create(
        self,
        formula: FormulaSource,
        vars: Mapping[str, object] | None,
        owner: str,
        always_execute: bool,
        status: RunStatus,
        run_id: str | None = None,
        schedule: Mapping[str, object] | None = None,
        budget: tuple[int | None, float | None] = (None, None),
    ) -> str:
        plan = self.plan(formula, vars)
        state = self._new_state(plan)
        run_input = self.input_for(plan, always_execute, self._budget(plan, *budget))
        if schedule is not None:
            run_input["schedule"] = dict(schedule)
        run = self.leases.create_run("formula", plan.formula, run_input, owner=owner, run_id=run_id)
        with self.leases.held(run.id):
            self._first_commit(run, state, status=status)
        return run.id

    def _new_state(self, plan: Plan) -> RunState:
        """A new run's state, its plan encoded for its first snapshot now: a plan that JSON cannot hold (a
        NaN, an infinity) is refused before anything is stored.

        Raises:
            FormulaError: the plan cannot be stored; nothing was.
        """
        try:
            return RunState.new(plan)
        except ConfigError as exc:
            raise FormulaError(f"{plan.formula} cannot be stored: {exc}") from None

    def _budget(self, plan: Plan, max_tokens: int | None, max_cost: float | None) -> Budget | None:
        return new_budget(plan, max_tokens, max_cost, self.model, self.prices)

    def input_for(self, plan: Plan, always_execute: bool, budget: Budget | None = None) -> dict[str, object]:
        """What a new run of ``plan`` stores as its input: the formula, its vars, the tools' specs and
        identities, the digest of the plan (a retry compares it with the formula as it is then), and its
        budget when it has one."""
        named = [self.tools.get(name) for name in plan.tool_names() if name in self.tools]
        run_input: dict[str, object] = {
            "formula": plan.formula,
            "vars": dict(plan.vars),
            "tools": list(self.tool_specs),
            tool_identities.INPUT_KEY: tool_identities.identities(named),
            retry.DIGEST_KEY: retry.plan_digest(plan),
        }
        if always_execute:
            run_input["always_execute"] = True
        if budget is not None:
            run_input[BUDGET_KEY] = budget.limits()
        return run_input

    async def resume(self, run_id: str) -> FormulaResult:
        """Continue a run from its last committed transition (after a restart, or once a person answered).

        Steps that were ``running`` when the process stopped run again (their completion was never
        committed), except those whose work is committed to: a write whose intent is recorded is
        reconciled (never run again blindly), a sub-run whose id is recorded is adopted. Completed steps
        never run twice.

        Raises:
            RunLeased: another live process advances the run; nothing changed.
        """
        return await self._advance(run_id, None)

    def load(self, run_id: str) -> RunState:
        """The run's state as committed: its snapshot plus the events after it."""
        snapshot = self.store.get_snapshot(run_id)
        if snapshot is None:
            raise NotFoundError(f"run {run_id!r} has no formula state (is it a formula run?)")
        state = RunState.from_snapshot(snapshot.state, snapshot.version, snapshot.seq)
        state.fold(self.store.events(run_id, after=snapshot.seq))
        return state

    async def _advance(
        self, run_id: str, new: RunState | None, *, fresh: bool = False, created: RunRecord | None = None
    ) -> FormulaResult:
        """Hold the run's lease and advance it: from ``new``, a new run's state (its first commit), else
        from the store (``fresh``: just after its first commit, so there is nothing to recover).
        ``created``: the run as this runner just created it, with its lease (nobody changed it since: it is
        not read again)."""
        if run_id in self._live:
            raise RunLeased(
                f"run {run_id!r} is being advanced by this runner already; nothing changed",
                run_id=run_id,
                holder=self.leases.holder,
            )
        async with self.leases.kept(run_id):
            # read under the lease: what nobody else can change now
            run = created if created is not None else self.store.get_run(run_id)
            if new is not None:
                state = new  # its first transition commits with the scheduler's first pass
            elif retry.retry_of(run.input) is not None and self.store.get_snapshot(run_id) is None:
                state = retry.materialize(self, run, self._transaction)  # a retry's first commit
            else:
                state = self.load(run_id)
                if run.status in TERMINAL_STATUSES:
                    return self._result(run_id, state, run.status, self._ended_reason(state, run.status))
                try:
                    tool_identities.check(run_id, run.input, state.plan.tool_names(), self.tools)
                except tool_identities.ToolsDiffer as refused:
                    tool_identities.refuse(self.store, run_id, refused, self._transaction)
                    raise
            # the run as read above: its id, owner, name and input, which no commit since changed
            # nothing was asked yet of a run whose first commit was just made, or that nobody started (a
            # submitted run, ``queued``), and such a run has nothing to recover: it starts
            resumed = new is None and not fresh and run.status != "queued"
            scheduler = Scheduler(self, run, state, asking=resumed)
            if new is not None:
                scheduler.commits.begin(self._started(run, state.plan))
            self._live[run_id] = scheduler
            traced = None if scheduler.trace is None else scheduler.trace.trace_id
            try:
                # the run's id on the lines logged meanwhile; a large plan out of the collector's walks
                with advancing(run_id, traced), frozen(len(state.steps)):
                    status, reason = await scheduler.run(resumed=resumed)
            finally:
                del self._live[run_id]
        return self._result(run_id, state, status, reason)

    def _first_commit(self, run: RunRecord, state: RunState, status: RunStatus = "running") -> RunState:
        """The run's first transition: started, its plan and step states as its first snapshot."""
        with self._transaction(run.id) as tx:
            tx.extend(self._started(run, state.plan))
            tx.set_status(status)
            tx.set_snapshot(state.to_snapshot(), version=SNAPSHOT_VERSION)
            state.seq = tx.events[-1].seq
        return state

    @staticmethod
    def _started(run: RunRecord, plan: Plan) -> list[StatusEvent]:
        """The events of a run's first transition."""
        events = [StatusEvent(stage="run", code="started", text=f"running {plan.formula}")]
        if run.input.get("always_execute") is True:
            text = "write steps run without asking a person: the run was started with always_execute (--yes)"
            events.append(StatusEvent(stage="run", code="always_execute", text=text))
        return events

    @contextlib.contextmanager
    def _transaction(self, run_id: str) -> Iterator[Transaction]:
        """A transaction on a run whose lease this runner holds (checked inside it: a lease lost since is
        refused, and nothing commits)."""
        with self.leases.transaction(run_id) as tx:
            yield tx

    @contextlib.contextmanager
    def _holding(self, run_id: str) -> Iterator[list[str]]:
        """Hold the leases of ``run_id`` and of every run above it, for a change made from outside their
        schedulers (an answer, a manual completion); yields the chain, the run first.

        Raises:
            RunLeased: another live process advances one of them; nothing changed.
        """
        chain = [run_id]
        while (parent := self.store.get_run(chain[-1]).parent_run_id) is not None:
            chain.append(parent)
        with contextlib.ExitStack() as stack:
            for held in reversed(chain):
                stack.enter_context(self.leases.held(held))
            yield chain

    async def sub_run(
        self,
        parent_run_id: str,
        owner: str,
        formula: str,
        vars: dict[str, JsonValue],
        run_id: str,
        *,
        always_execute: bool = False,
        budget: RunBudget | None = None,
    ) -> tuple[str, str, dict[str, JsonValue]]:
        """Start the sub-run ``run_id`` of ``parent_run_id`` (its id committed by the parent), or adopt it
        when it exists already; returns its id, status and outputs. A new sub-run of a parent with a
        ``budget`` gets what is left of it; once that is reached it is not started (``exhausted``)."""
        try:
            self.store.get_run(run_id)
        except NotFoundError:
            depth = self._depth(parent_run_id) + 1
            if depth > MAX_NESTING:
                raise FormulaError(
                    f"it would be nested {depth} runs deep, over the most of {MAX_NESTING}: "
                    "does a formula run itself, through its sub-formulas or fan-outs?"
                ) from None
            left = None if budget is None else budget.left()
            if isinstance(left, StepOutcome):
                return run_id, "exhausted", {}
            result = await self.start(
                formula,
                vars,
                owner=owner,
                parent_run_id=parent_run_id,
                always_execute=always_execute,
                run_id=run_id,
                max_tokens=None if left is None else left.max_tokens,
                max_cost=None if left is None else left.max_cost,
            )
        else:
            # created, but its process may have stopped before its first commit: then it starts now
            new = None
            if self.store.get_snapshot(run_id) is None:
                new = self._new_state(self.plan(formula, vars))
            result = await self._advance(run_id, new)
        outputs: dict[str, JsonValue] = {k: dict(v) for k, v in result.outputs.items()}
        return result.run_id, result.status, outputs

    def _depth(self, run_id: str) -> int:
        """How many runs hold ``run_id``, itself included (a run without a parent: 1)."""
        depth, parent = 1, self.store.get_run(run_id).parent_run_id
        while parent is not None and depth <= MAX_NESTING:
            depth, parent = depth + 1, self.store.get_run(parent).parent_run_id
        return depth

    def end_sub_runs(self, run_ids: Iterable[str], reason: str) -> None:
        """Cancel the formula sub-runs among ``run_ids`` that exist and have not ended (with theirs)."""
        for run_id in run_ids:
            try:
                child = self.store.get_run(run_id)
            except NotFoundError:
                continue
            if child.kind == "formula" and child.status not in TERMINAL_STATUSES:
                self.cancel(run_id, reason)

    # -- people -------------------------------------------------------------------------------------------

    async def answer(
        self, interaction_id: str, resolution: Resolution, *, by: str | None = None, owner: str | None = None
    ) -> Answered:
        """Apply a person's answer wherever the run is — live in this runner, advanced by another process, or
        at rest — without disturbing anything else; the one way a formula run is answered.

        When this runner is advancing the run, its live scheduler applies the answer between two of its
        passes: steps that run go on untouched. At rest, the answer commits here (holding the leases of the
        run and of the runs above it), and when a run above is live in this runner, only its step that
        waits on this sub-run continues. When another process advances the run, the answer is left for it
        (in the store) and taken between two of its passes; if that process lets the run wait first, the
        answer commits here. An agent step's agent gets its answer committed, not acted on: the approved
        call runs when its formula run is advanced next (here if it is live, else by whoever resumes it).
        No tool runs in this call.

        Returns:
            Where the answer went, and whether something already continues the run with it (else the
            caller resumes the run's root).

        Raises:
            NotFoundError: no such interaction (for this owner).
            StaleInteraction: it was already resolved; nothing changed.
            InteractionError: the resolution does not fit; nothing changed.
            RunLeased: another live process advances an agent step's formula run; answer once it waits.
        """
        interaction = self.store.get_interaction(interaction_id, owner=owner)
        run = self.store.get_run(interaction.run_id)
        if run.kind == "agent":
            parent_id = await self._resolve_agent(run, interaction_id, resolution, by)
            return Answered(parent_id, self._poke_above(run.id))
        live = self._live.get(run.id)
        if live is not None:
            await live.answer(interaction, resolution, by)
            return Answered(run.id, True)
        try:
            self._resolve_step(interaction, resolution, by)
        except RunLeased:
            return await self._hand_over(interaction, resolution, by)
        return Answered(run.id, self._poke_above(run.id))

    async def _hand_over(self, interaction: Interaction, resolution: Resolution, by: str | None) -> Answered:
        """Leave the answer for the process advancing the run, and wait until it took it — or until that
        process let the run wait, when the answer commits here."""
        self._store_answer(interaction, resolution, by)
        deadline = self.clock() + _HANDED_WAIT
        while self.clock() < deadline:
            if self.store.get_interaction(interaction.id).status != "open":
                return Answered(interaction.run_id, True)  # taken by the process advancing the run
            try:
                self._resolve_step(interaction, resolution, by)
            except RunLeased:
                await asyncio.sleep(_HANDED_POLL)
                continue
            except StaleInteraction:
                return Answered(interaction.run_id, True)  # taken meanwhile
            return Answered(interaction.run_id, self._poke_above(interaction.run_id))
        logger.info(
            "answer to %s stored; the process advancing run %s applies it", interaction.id, interaction.run_id
        )
        return Answered(interaction.run_id, True)

    def _store_answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> None:
        """Keep the answer in the store for the process that advances the run now: its scheduler applies it
        between two of its passes (``_scheduler.py``); the run itself is not touched.

        Raises:
            StaleInteraction: it is not open, or an answer to it is stored already; nothing changed.
            InteractionError: the resolution does not fit the step that asked; nothing changed.
        """
        if interaction.status != "open":
            raise StaleInteraction(
                f"interaction {interaction.id!r} is {interaction.status}, not open; nothing changed"
            )
        state = self.load(interaction.run_id)
        step = next((s for s in state.steps.values() if s.wait.get("interaction_id") == interaction.id), None)
        if step is not None:
            answer_step(
                step, resolution, self.tools, list(state.plan.index).index(step.id), asked=interaction.kind
            )  # it fits
        elif isinstance(resolution, Edit):
            raise InteractionError("edit applies to a tool call's consent; nothing here takes it")
        value = {"resolution": resolution_dict(resolution), "by": by}
        try:
            Documents(self.store).put(STORED_ANSWERS, interaction.id, value, expected_version=None)
        except DocumentConflict:
            raise StaleInteraction(
                f"interaction {interaction.id!r} was answered already; nothing changed"
            ) from None

    def root_of(self, run_id: str) -> str:
        """The id of the run at the top of ``run_id``'s parents (itself when it has none)."""
        return self.store.root_of(run_id)

    async def _resolve_agent(
        self, child: RunRecord, interaction_id: str, resolution: Resolution, by: str | None
    ) -> str:
        parent_id = child.parent_run_id
        parent = self.store.get_run(parent_id) if parent_id is not None else None
        if parent is None or parent.kind != "formula":
            raise InteractionError(
                f"interaction {interaction_id!r} belongs to the agent run {child.id!r}, which no formula "
                "run started: resolve it through the agent (Agent.resume, or plangate approve)"
            )
        step_id = step_of_child(parent.id, child.id)
        plan = self.load(parent.id).plan
        step = plan.index.get(step_id) if step_id is not None else None
        with self._holding(parent.id):  # the agent's answer commits under its formula run's lease
            await self.agent_steps.resolve(child, step, interaction_id, resolution, by)
        return parent.id

    def _resolve_step(self, interaction: Interaction, resolution: Resolution, by: str | None) -> str:
        run_id = interaction.run_id
        with self._holding(run_id):
            state = self.load(run_id)
            step = next(
                (s for s in state.steps.values() if s.wait.get("interaction_id") == interaction.id), None
            )
            answered = None
            if step is not None:
                answered = answer_step(
                    step,
                    resolution,
                    self.tools,
                    list(state.plan.index).index(step.id),
                    asked=interaction.kind,
                )
            elif isinstance(resolution, Edit):
                raise InteractionError("edit applies to a tool call's consent; nothing here takes it")
            with self._transaction(run_id) as tx:
                commit_answer(tx, interaction, resolution, by, answered)
        if telemetry.tracing() is not None or telemetry.metrics.current() is not None:
            # the wait's span and the answer's count, from this commit (no scheduler of the run here)
            trace = telemetry.run_trace(self.store, run_id, "formula", self.store.get_run(run_id).name)
            telemetry.committed(trace, "formula", tx.events, self.store)
        return run_id

    def _poke_above(self, run_id: str) -> bool:
        """Continue the step that waits on ``run_id`` in the nearest run above it that this runner is
        advancing (each run between them was suspended, and resumes from the store)."""
        child = run_id
        while (parent := self.store.get_run(child).parent_run_id) is not None:
            live = self._live.get(parent)
            if live is not None:
                return live.poke(child)
            child = parent
        return False

    def complete_step(self, run_id: str, step_id: str, output: Mapping[str, JsonValue] | None = None) -> None:
        """Complete a manual step that is waiting for someone, with ``output``.

        Raises:
            NotFoundError: no such run or step.
            InteractionError: the step is not waiting for a manual completion.
            RunLeased: another live process advances the run; nothing changed.
        """
        if run_id in self._live:
            raise ConfigError(
                f"run {run_id!r} is being advanced by this runner; complete the step once it waits"
            )
        with self._holding(run_id):
            state = self.load(run_id)
            step = state.steps.get(step_id)
            if step is None:
                raise NotFoundError(f"run {run_id!r} has no step {step_id!r}")
            if step.status != "waiting" or step.wait.get("kind") != "manual":
                raise InteractionError(
                    f"step {step_id!r} is {step.status}, not waiting for a manual completion"
                    + (f" ({step.reason})" if step.reason else "")
                )
            with self._transaction(run_id) as tx:
                tx.append(
                    StepStateEvent(
                        step_id=step_id,
                        status="complete",
                        reason="completed by hand",
                        attempt=step.attempt,
                        output=dict(output or {}),
                    )
                )

    def cancel(self, run_id: str, reason: str = "cancelled") -> None:
        """Cancel a run that has not ended, with its sub-runs (recursively) and its steps' agents first:
        every unfinished step is cancelled and its interaction expires. A process advancing the run stops
        at its next commit."""
        run = self.store.get_run(run_id)
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run_id!r} already ended ({run.status})")
        try:
            state: RunState | None = self.load(run_id)
        except NotFoundError:  # no state yet (a retry waiting in its owner's queue): no step to cancel
            state = None
        self._cancel_children(run_id, reason)
        # read before the transaction (a store read inside one waits on it, on SQLite)
        ended = with_steps_usage(formula_outcome("cancelled", reason), self.store, run_id, state)
        with self.store.transaction(run_id) as tx:
            for step in state.steps.values() if state is not None else ():
                if not step.terminal:
                    tx.append(
                        StepStateEvent(
                            step_id=step.id, status="cancelled", reason=reason, attempt=step.attempt
                        )
                    )
                interaction_id = step.wait.get("interaction_id")
                if isinstance(interaction_id, str) and not step.terminal and step.status == "waiting":
                    with contextlib.suppress(InteractionError):  # answered already: nothing to expire
                        tx.expire_interaction(interaction_id)
            tx.append(StatusEvent(stage="run", code="cancelled", text=reason))
            tx.append(ended.event())
            tx.set_status("cancelled", outcome=ended.stored())

    def _cancel_children(self, run_id: str, reason: str) -> None:
        cursor: str | None = None
        while True:
            page = self.store.list_runs(parent_run_id=run_id, limit=100, cursor=cursor)
            for child in page.items:
                if child.status in TERMINAL_STATUSES:
                    continue
                if child.kind == "formula":
                    if self.store.get_snapshot(child.id) is None:
                        self._end_unstarted(child.id, reason)
                    else:
                        self.cancel(child.id, reason)
                else:
                    self.agent_steps.agents.cancel(child.id, reason)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def _end_unstarted(self, run_id: str, reason: str) -> None:
        # created (its id committed by its parent) but stopped before its first commit: nothing to cancel
        # but the run itself
        with self.store.transaction(run_id) as tx:
            tx.append(StatusEvent(stage="run", code="cancelled", text=reason))
            ended = formula_outcome("cancelled", reason)
            tx.append(ended.event())
            tx.set_status("cancelled", outcome=ended.stored())

    # -- results ------------------------------------------------------------------------------------------

    def _result(self, run_id: str, state: RunState, status: RunStatus, reason: str) -> FormulaResult:
        views = {
            sid: StepView(
                sid,
                state.plan.index[sid].title if sid in state.plan.index else sid,
                s.status,
                s.reason,
                s.attempt,
                s.output,
            )
            for sid, s in state.steps.items()
        }
        interaction = None
        if status == "waiting":
            opened = self.store.list_interactions(status="open", run_id=run_id)
            interaction = opened[0] if opened else None
            if interaction is None:
                interaction = self._child_interaction(run_id)
        return FormulaResult(run_id, status, reason, views, interaction)

    def _child_interaction(self, run_id: str) -> Interaction | None:
        for child in self.store.list_runs(parent_run_id=run_id, status="waiting", limit=100).items:
            opened = self.store.list_interactions(status="open", run_id=child.id)
            if opened:
                return opened[0]
            nested = self._child_interaction(child.id)
            if nested is not None:
                return nested
        return None

    @staticmethod
    def _ended_reason(state: RunState, status: str) -> str:
        failed = [s.id for s in state.steps.values() if s.status == "failed"]
        return f"{status}: failed steps {', '.join(failed)}" if failed else status


def _store(store: Store | str | Path | None) -> Store:
    if isinstance(store, Path):
        return open_store(str(store))
    return store if store is not None and not isinstance(store, str) else open_store(store)


class RunnerOptions(TypedDict, total=False):
    """The keyword options of :class:`FormulaRunner`, as :func:`run_formula` and :func:`resume_run` take
    them (each is described there)."""

    search_paths: Iterable[str | Path] | None
    concurrency: int
    root: Path | None
    env: Mapping[str, str] | None
    poll_interval: float
    checkpoint_every: int
    clock: Callable[[], float]
    tool_specs: Iterable[str]
    model: Model | str | None
    agent_runner: StepAgent | None
    lease_ttl: float
    lease_holder: str | None
    prices: Mapping[str, ModelPrice] | None


def run_formula(
    formula: FormulaSource,
    vars: Mapping[str, object] | None = None,
    *,
    store: Store | str | Path | None = None,
    tools: ToolRegistry | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    **options: Unpack[RunnerOptions],
) -> FormulaResult:
    """Run a formula (a name, a file or a cooked plan) until it ends or waits on a person.

    Args:
        formula: a formula name on the search path, a file path, or a :class:`Plan`.
        vars: the formula's variables (strings are converted to each var's declared type).
        store: a store, a store URL or file path, or None for ``PLANGATE_STORE`` / ``.plangate/plangate.db``.
        tools: the tools ``tool`` steps may call (and ``agent`` steps name).
        max_tokens: the run's token budget (see :meth:`FormulaRunner.start`).
        max_cost: the run's cost budget, by ``prices`` (see :meth:`FormulaRunner.start`).
        **options: passed to :class:`FormulaRunner` (``model``, ``search_paths``, ``concurrency``, ...).
    """
    runner = FormulaRunner(_store(store), tools, **options)
    return asyncio.run(runner.start(formula, vars, max_tokens=max_tokens, max_cost=max_cost))


def resume_run(
    run_id: str,
    *,
    store: Store | str | Path | None = None,
    tools: ToolRegistry | None = None,
    **options: Unpack[RunnerOptions],
) -> FormulaResult:
    """Continue a formula run from its last committed transition (``options`` as :func:`run_formula`'s)."""
    runner = FormulaRunner(_store(store), tools, **options)
    return asyncio.run(runner.resume(run_id))


__all__ = [
    "MAX_NESTING",
    "Answered",
    "FormulaResult",
    "FormulaRunner",
    "RunnerOptions",
    "StepView",
    "resume_run",
    "run_formula",
]
