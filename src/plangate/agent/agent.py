"""``Agent``: the public API of the agent runtime (run, stream, resume, cancel).

For: turning the caller's model, tools and store into runs, and finding a stored run again with nothing
but its id, in this process or another one: the model comes from the agent, or is rebuilt from the spec
the run recorded (``resolve_model``); the tools come from the agent's registry, by name. Not for: what a
run does (``loop.py`` and the phase modules).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Coroutine, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Generic, TypeVar, cast, get_args

from pydantic import JsonValue

from plangate.agent import _interactions
from plangate.agent._fork import ForkRequest, create_fork
from plangate.agent._intent import Goal, infer_goal
from plangate.agent._output import OutputSpec
from plangate.agent._state import (
    CONTEXT_BUDGET,
    MIN_CONTEXT,
    SNAPSHOT_VERSION,
    AgentConfig,
    AgentState,
    Mode,
    Phase,
    read_input,
    run_input,
)
from plangate.agent._stream import AgentStream
from plangate.agent._style import PromptStyle
from plangate.agent._transcript import Evidence, Transcript
from plangate.agent.loop import RunLoop, load_loop, style_of
from plangate.agent.result import AgentResult, Outcome, OutputT
from plangate.conditions import ConditionSyntaxError, compile_done_when
from plangate.conditions.errors import caret_lines
from plangate.config import ModelPrice
from plangate.errors import ConfigError, InteractionError, PlangateError, StaleInteraction
from plangate.events import JsonObject
from plangate.interactions import Resolution
from plangate.models import Model, resolve_model
from plangate.runs.tools import ToolsDiffer, identities, refuse
from plangate.runs.usage import Budget, require_prices, run_budget
from plangate.store import TERMINAL_STATUSES, LeaseBook, RunRecord, Store, open_store
from plangate.tools import DepsT, Tool, ToolRegistry, Toolset, deps_scope

T = TypeVar("T")

_MODES: tuple[str, ...] = get_args(Mode)
_FIRST_PHASE: dict[str, Phase] = {"auto": "route", "plan": "plan", "react": "execute"}
_NAME_LENGTH = 80


class Agent(Generic[DepsT, OutputT]):
    """An agent that plans, acts through tools only with consent for writes, and proves each plan step.

    Generic in its tools' dependencies and its output, as ``Agent[MyDeps, Answer]`` (inferred from
    ``deps_type`` and ``output_type``): ``run(..., deps=...)`` takes a ``MyDeps`` and ``result.output`` is an
    ``Answer``.

    Args:
        model: a ``Model``, a spec string (``openai:gpt-4o-mini``), or None for ``$PLANGATE_MODEL``. A resumed
            run uses this model when given, else rebuilds the one it was started with from its spec.
        tools: a ``ToolRegistry`` or a list of tools.
        store: a store, a store URL, or None for ``$PLANGATE_STORE`` / ``.plangate/plangate.db``.
        max_rounds: planning and execute calls a run may make; then it ends ``exhausted``.
        mode: ``auto`` (route first), ``plan`` (always plan) or ``react`` (act without a plan).
        always_execute: run write tools without asking for consent.
        plan_consent: show the plan to a person for consent before executing it.
        system_prompt: extra instructions added to every system message.
        context_budget: the tokens a prompt may use; past ``context_budget - context_reserve`` the oldest
            turns and tool records are folded into a summary of the run.
        context_reserve: the tokens of the budget kept free (for the answer, and for estimates that run
            short); None: a tenth of the budget (8,000 of the default 80,000), as long as 1,000 tokens are
            left for the prompt.
        owner: who the runs belong to.
        done_when: the goal as a condition over the run's evidence receipts, e.g.
            ``"receipts.any(tool == 'place' and success)"`` (fields ``tool``, ``success``, ``step``,
            ``source``, ``output.…``; ``receipts.any/all/count``). The runtime checks it after every receipt:
            once it holds, the run is complete, with that receipt as its proof, and goes to deliver with no
            model call to say so; until then the model cannot declare ``done``. None: the model declares it.
        tool_specs: where the tools came from (``module:attr``), recorded with each run for the command line
            to find them again; the runtime itself never imports anything from a stored run.
        max_tokens: the input and output tokens a run's model calls may use together; checked before each
            call, and a run that reached it ends ``exhausted`` (code ``budget_exhausted``). None: no limit.
        max_cost: the most a run may cost by ``prices`` (checked the same way); its model needs a price.
        prices: what each model's tokens cost per million (``[prices]`` of ``plangate.toml``), by model
            name; the run keeps its model's price, and its outcome shows its cost.
        leases: hold each run's lease while advancing it (renewed meanwhile), and fence every commit by it:
            a run another live holder advances is refused (``RunLeased``), and a process that lost the lease
            (frozen past it, taken over) commits and writes nothing more. None: no lease is taken (one
            process, one caller at a time).
        output_type: the type of the run's answer (a pydantic model, or another type pydantic validates):
            the prompts state its JSON schema, the answer of ``done`` is validated against it (one that does
            not fit is a correction the model reads, counted against the correction limit), and
            ``result.output`` holds the typed object. None: the answer is text (``result.output`` is it).
        deps_type: the type of the ``deps`` that ``run`` and ``resume`` pass to tools taking a
            ``RunContext[...]`` first parameter (for type checkers only; never stored).
        infer_goal: without a ``done_when``, tell a question from an action by rule and give the run the
            goal that proves it (``plangate.agent._intent``): a question completes once a read succeeded,
            answered from its observation (outcome ``answered``); a request of N changes once N writes
            succeeded (``proven``); the model need not say ``done``. None (the default): only for models
            that ask for compact prompts (the small local default); True: any model; False: never.

    Example::

        agent = Agent(model="openai:gpt-4o-mini", tools=[get_overview, place], store="sqlite:///runs.db")
        result = agent.run("Free up Monday morning")
        while result.waiting:
            result = agent.resume(result.run_id, result.interaction.id, Approve())
        print(result.answer)

    Raises:
        ConfigError: an option has an invalid value (``done_when`` that is not a condition over receipts,
            with the column), or the tools are not tools.
    """

    def __init__(
        self,
        model: Model | str | None = None,
        tools: ToolRegistry | Iterable[Tool] | None = None,
        store: Store | str | None = None,
        *,
        max_rounds: int = 60,
        mode: Mode = "auto",
        always_execute: bool = False,
        plan_consent: bool = False,
        system_prompt: str | None = None,
        context_budget: int = CONTEXT_BUDGET,
        context_reserve: int | None = None,
        owner: str = "local",
        tool_specs: Iterable[str] = (),
        leases: LeaseBook | None = None,
        done_when: str | None = None,
        output_type: type[OutputT] | None = None,
        deps_type: type[DepsT] | None = None,
        infer_goal: bool | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ConfigError(f"Agent max_rounds: expected an integer >= 1; found {max_rounds!r}")
        if mode not in _MODES:
            raise ConfigError(f"Agent mode: expected one of {', '.join(_MODES)}; found {mode!r}")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ConfigError(
                f"Agent system_prompt: expected a string or None; found {type(system_prompt).__name__}"
            )
        reserve = _context_reserve(context_budget, context_reserve)
        _check_done_when(done_when)
        self._model_spec = model
        self._resolved: Model | None = model if isinstance(model, Model) else None
        self.registry = _registry(tools)
        self.store: Store = open_store(store) if store is None or isinstance(store, str) else store
        self.max_rounds = max_rounds
        self.mode: Mode = mode
        self.always_execute = bool(always_execute)
        self.plan_consent = bool(plan_consent)
        self.system_prompt = system_prompt
        self.context_budget = context_budget
        self.context_reserve = reserve
        self.owner = owner
        self.tool_specs = [str(spec) for spec in tool_specs]
        self.leases = leases
        self.done_when = done_when
        self.output_type = output_type
        self.deps_type = deps_type
        self._output = None if output_type is None else OutputSpec.of(output_type)
        self.infer_goal = infer_goal
        limits = run_budget(max_tokens, max_cost, "Agent")
        self.max_tokens = None if limits is None else limits.max_tokens
        self.max_cost = None if limits is None else limits.max_cost
        self.prices: dict[str, ModelPrice] = dict(prices or {})

    # -- starting runs ------------------------------------------------------------------------------------

    def run(self, prompt: str, *, deps: DepsT | None = None) -> AgentResult[OutputT]:
        """Start a run and advance it until it ends or waits on a person (see ``run_async``)."""
        return _sync(self.run_async(prompt, deps=deps))

    async def run_async(self, prompt: str, *, deps: DepsT | None = None) -> AgentResult[OutputT]:
        """Start a run and advance it until it ends or waits on a person.

        ``deps`` reach every tool that takes a ``RunContext`` as its first parameter, as ``ctx.deps``.

        Returns:
            The result: ``waiting`` with the open ``interaction``, or ended with its ``outcome`` and
            ``answer``.

        Raises:
            ConfigError: no model could be resolved, or the prompt is empty.
        """
        loop = self._start(prompt)
        async with self._lease(loop.run_id):
            with deps_scope(deps, loop.run_id):
                return self._typed(loop, await loop.advance())

    def submit(self, prompt: str) -> str:
        """Store a new run and its first commit (``queued``), without advancing it; returns its id.

        For handing runs to workers: whoever advances the run next (``resume_async(run_id)``) starts it.

        Raises:
            ConfigError: no model could be resolved, or the prompt is empty.
        """
        loop = self._start(prompt)
        if self.leases is None:
            loop.begin(status="queued")
        else:
            with self.leases.held(loop.run_id):
                loop.begin(status="queued")
        return loop.run_id

    def stream(self, prompt: str, *, deps: DepsT | None = None) -> AgentStream:
        """Start a run and iterate over its events as they are committed (``async for``).

        The stream's ``result`` holds the ``AgentResult`` once iteration ended. Leaving the iteration early
        stops the run after its last commit; ``resume`` continues it.
        """
        loop = self._start(prompt)

        async def advance() -> AgentResult[Any]:
            async with self._lease(loop.run_id):
                with deps_scope(deps, loop.run_id):
                    return self._typed(loop, await loop.advance())

        return AgentStream(self.store, loop.run_id, advance)

    # -- forks --------------------------------------------------------------------------------------------

    def fork(
        self,
        run_id: str,
        *,
        at: int | None = None,
        at_event: int | None = None,
        instruction: str | None = None,
        model: Model | str | None = None,
        arguments: JsonObject | None = None,
        always_execute: bool = False,
    ) -> AgentResult[OutputT]:
        """Fork a run before round ``at`` (or the round holding event ``at_event``) and advance the fork until
        it ends or waits on a person (see ``fork_async``)."""
        return _sync(
            self.fork_async(
                run_id,
                at=at,
                at_event=at_event,
                instruction=instruction,
                model=model,
                arguments=arguments,
                always_execute=always_execute,
            )
        )

    async def fork_async(
        self,
        run_id: str,
        *,
        at: int | None = None,
        at_event: int | None = None,
        instruction: str | None = None,
        model: Model | str | None = None,
        arguments: JsonObject | None = None,
        always_execute: bool = False,
    ) -> AgentResult[OutputT]:
        """Fork a run of this agent's owner and advance the fork until it ends or waits on a person.

        The fork is a new run whose history is the origin's before that round (receipts included); it goes
        on from there, with ``instruction`` appended to the conversation, on ``model`` (default: this
        agent's, else the origin's), and with the tool call of that round made with ``arguments`` instead
        (no model call for it). A write completed before the point is never run again; one at or after it
        asks for consent in the fork (``always_execute``: it does not, and the fork records so).

        Raises:
            NotFoundError: no such run of this agent's owner.
            InteractionError: it is not an agent run, or has no such round, or no tool call to edit there.
            ConfigError: an invalid value; the model cannot be resolved.
        """
        request = ForkRequest(
            at_round=at,
            at_event=at_event,
            instruction=instruction,
            arguments=arguments,
            always_execute=always_execute,
        )
        runner = self if model is None else self._sibling(model)
        name = runner._model().name if runner._model_spec is not None else None
        fork_id = create_fork(self.store, run_id, request, owner=self.owner, model_name=name)
        return await runner.resume_async(fork_id)

    def submit_fork(self, run_id: str, request: ForkRequest) -> str:
        """Store a fork of ``run_id`` without advancing it (whoever advances it next copies its history and
        starts it); returns its id. Refusals are those of ``fork_async``."""
        name = request.model
        if name is not None:
            try:
                name = resolve_model(name).name
            except ConfigError as exc:
                raise ConfigError(f"fork model: {exc}") from None
        return create_fork(self.store, run_id, request, owner=self.owner, model_name=name)

    def _sibling(self, model: Model | str) -> Agent[DepsT, OutputT]:
        """This agent on another model (a fork's), everything else as it is."""
        sibling = copy.copy(self)
        sibling._model_spec = model
        sibling._resolved = model if isinstance(model, Model) else None
        return sibling

    # -- stored runs --------------------------------------------------------------------------------------

    def resume(
        self,
        run_id: str,
        interaction_id: str | None = None,
        resolution: Resolution | None = None,
        *,
        by: str | None = None,
        deps: DepsT | None = None,
    ) -> AgentResult[OutputT]:
        """Resolve the run's open interaction and continue the run (see ``resume_async``)."""
        return _sync(self.resume_async(run_id, interaction_id, resolution, by=by, deps=deps))

    async def resume_async(
        self,
        run_id: str,
        interaction_id: str | None = None,
        resolution: Resolution | None = None,
        *,
        by: str | None = None,
        resolved: Callable[[], object] | None = None,
        deps: DepsT | None = None,
    ) -> AgentResult[OutputT]:
        """Resolve the run's open interaction with ``resolution``, then continue until it ends or waits.

        ``resolved`` is called once the resolution is committed, before anything it allows runs (a server
        answers its client then, while the run goes on).

        With no interaction and no resolution, continue a run whose process stopped (a write cut off
        between its intent and its receipt is reconciled, or a person is asked about it); a waiting or
        ended run is returned as it stands. The run keeps the settings it was started with. ``deps`` reach
        the tools as in ``run`` (an approved write runs here, so it needs them here).

        Raises:
            NotFoundError: no such run or interaction.
            StaleInteraction: the interaction is not the run's open one, or was resolved already (perhaps
                by a concurrent caller); nothing changed.
            InteractionError: the resolution does not fit the interaction (``answer`` to a consent
                request, edited arguments that do not fit the tool, ...), or the run is not an agent run;
                nothing changed.
            ConfigError: this agent lacks a tool the run uses, or the run's model cannot be rebuilt.
        """
        if (interaction_id is None) != (resolution is None):
            raise ConfigError("resume: pass both an interaction id and a resolution, or neither")
        async with self._lease(run_id):
            with deps_scope(deps, run_id):
                if interaction_id is None or resolution is None:
                    loop = self._advancing(run_id)
                    if loop.state.phase == "done" or loop.state.waiting is not None:
                        return self._typed(loop, loop.result())
                    _ = loop.model  # a model that cannot be rebuilt must fail before anything is written
                    return self._typed(loop, await loop.advance())
                loop, edited = self._checked(run_id, interaction_id, resolution)
                _ = loop.model
                await _interactions.apply(loop, resolution, edited, by, committed=resolved)
                return self._typed(loop, await loop.advance())

    def resolve(
        self, run_id: str, interaction_id: str, resolution: Resolution, *, by: str | None = None
    ) -> None:
        """Commit a resolution of the run's open interaction and nothing more (see ``resolve_async``)."""
        _sync(self.resolve_async(run_id, interaction_id, resolution, by=by))

    async def resolve_async(
        self, run_id: str, interaction_id: str, resolution: Resolution, *, by: str | None = None
    ) -> None:
        """Commit a resolution of the run's open interaction, without advancing the run or running a tool.

        For a process that hands runs to workers: an approved write is recorded as approved and runs where
        the run is advanced next (``resume_async(run_id)``), exactly once. Refusals are those of
        ``resume_async``; nothing changes when one is raised.
        """
        async with self._lease(run_id):
            loop, edited = self._checked(run_id, interaction_id, resolution)
            await _interactions.apply(loop, resolution, edited, by, act=False)

    def _checked(
        self, run_id: str, interaction_id: str, resolution: Resolution
    ) -> tuple[RunLoop, JsonObject | None]:
        """The run's loop and the validated arguments of an ``Edit``, once the resolution is known to fit."""
        interaction = self.store.get_interaction(interaction_id)
        if interaction.run_id != run_id:
            raise StaleInteraction(
                f"interaction {interaction_id!r} belongs to run {interaction.run_id!r}, not to run "
                f"{run_id!r}; nothing changed"
            )
        loop = self._load(run_id)
        return loop, _interactions.check(loop, interaction, resolution)

    def cancel(self, run_id: str, reason: str = "cancelled") -> AgentResult[OutputT]:
        """Cancel a run that has not ended: its open interaction expires; it ends ``cancelled``.

        Raises:
            NotFoundError: no such run.
            InteractionError: the run already ended, or is not an agent run.
        """
        run = self.store.get_run(run_id)
        if run.kind != "agent":
            raise InteractionError(f"run {run_id!r} is a {run.kind} run; expected an agent run")
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run_id!r} already ended ({run.status}); nothing to cancel")
        snapshot = self.store.get_snapshot(run_id)
        state = AgentState.from_snapshot(snapshot) if snapshot is not None else AgentState(phase="route")
        stage = state.phase if state.phase in ("route", "plan", "execute") else "execute"
        # what it spent stays counted: a formula run adds up its agents' outcomes
        spent = _usage_of(run, state)
        outcome = Outcome(status="cancelled", stage=stage, code="cancelled", user_message=reason, usage=spent)
        opened = state.waiting
        state.waiting = None
        state.outcome = outcome
        state.phase = "done"
        state.answer = f"The run was cancelled: {reason}"
        with self.store.transaction(run_id) as tx:
            if opened is not None:
                tx.expire_interaction(opened.interaction_id)
            tx.append(outcome.event())
            tx.set_status("cancelled", outcome=outcome.stored())
            tx.set_snapshot(state.encoded(), version=SNAPSHOT_VERSION)
        return AgentResult(run_id, "cancelled", outcome, None, state.answer)

    def usage(self, run: str | RunRecord) -> dict[str, JsonValue] | None:
        """The model usage of a run so far, as its outcome shows it (its cost with the price it kept); None
        before any call reported usage. For a run that has not ended (an ended run's outcome has it).
        ``run``: its id, or its record when the caller holds it already (not read again)."""
        record = self.store.get_run(run) if isinstance(run, str) else run
        snapshot = self.store.get_snapshot(record.id)
        return None if snapshot is None else _usage_of(record, AgentState.from_snapshot(snapshot))

    # -- internals ----------------------------------------------------------------------------------------

    def _typed(self, loop: RunLoop, result: AgentResult) -> AgentResult[OutputT]:
        """``result`` with its ``output``: the typed answer of a run that completed (for a typed output),
        or the closing message (for text)."""
        output: object = None
        if result.status == "completed" and result.answer is not None:
            if loop.config.output_schema is None:
                output = result.answer
            else:  # a typed run completes only with its answer checked (by ``done`` or at delivery)
                spec = loop.output or OutputSpec(loop.config.output_schema)
                output = spec.value(result.answer)
        return AgentResult(
            result.run_id,
            result.status,
            result.outcome,
            result.interaction,
            result.answer,
            cast("OutputT | None", output),
        )

    def _model(self) -> Model:
        # Resolved once: a spec names one model for the agent's whole life (a scripted file is not replayed
        # from its start when the same agent resumes its run).
        if self._resolved is None:
            try:
                self._resolved = resolve_model(self._model_spec)
            except ConfigError as exc:
                raise ConfigError(f"Agent model: {exc}") from None
        return self._resolved

    def _model_for(self, config: AgentConfig) -> Model:
        if self._model_spec is not None:
            return self._model()
        if self._resolved is not None and self._resolved.name == config.model:
            # the default model this agent started the run with ($PLANGATE_MODEL, ...): the same instance,
            # as for a model given by spec (a scripted file goes on where it was, not from its start)
            return self._resolved
        try:
            return resolve_model(config.model)
        except ConfigError as exc:
            raise ConfigError(
                f"the run was started with the model {config.model!r}, which cannot be rebuilt from its name "
                f"({exc}): pass model= to Agent"
            ) from None

    def _budget(self, model: str) -> Budget | None:
        """The budget a new run of ``model`` keeps: the limits and its model's price (None: neither)."""
        require_prices(Budget(max_cost=self.max_cost), [model], self.prices, "Agent")
        price = self.prices.get(model)
        if self.max_tokens is None and self.max_cost is None and price is None:
            return None
        return Budget(
            max_tokens=self.max_tokens,
            max_cost=self.max_cost,
            prices={} if price is None else {model: price},
        )

    def _start(self, prompt: str) -> RunLoop:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"Agent.run: expected a non-empty prompt; found {prompt!r}")
        model = self._model()
        style = style_of(model)
        inferred = self._inferred(prompt, style)
        config = AgentConfig(
            model=model.name,
            tools=self.registry.names(),
            mode=self.mode,
            max_rounds=self.max_rounds,
            always_execute=self.always_execute,
            plan_consent=self.plan_consent,
            system_prompt=self.system_prompt,
            context_budget=self.context_budget,
            context_reserve=self.context_reserve,
            done_when=self.done_when if inferred is None else inferred.done_when,
            output_schema=None if self._output is None else self._output.schema,
            inferred=None if inferred is None else inferred.kind,
            inferred_tools=[] if inferred is None else list(inferred.tools),
            budget=self._budget(model.name),
        )
        name = " ".join(prompt.split())[:_NAME_LENGTH]
        recorded = run_input(prompt, config, self.tool_specs, identities(self.registry.tools()))
        if self.leases is None:
            run = self.store.create_run("agent", name, recorded, owner=self.owner)
        else:
            run = self.leases.create_run("agent", name, recorded, owner=self.owner, store=self.store)
        read_input(run.id, run.input)  # what resume will read must read back now
        return RunLoop(
            store=self.store,
            model=model,
            toolset=Toolset(self.registry),
            run_id=run.id,
            prompt=prompt,
            config=config,
            # a request the rule understood needs no route: it is acted on (a plan is still made if asked)
            state=AgentState(
                phase="execute" if inferred and self.mode == "auto" else _FIRST_PHASE[self.mode]
            ),
            transcript=Transcript.start(prompt),
            evidence=Evidence(),
            fresh=True,
            leases=self.leases,
            output=self._output,
            style=style,
        )

    def _inferred(self, prompt: str, style: PromptStyle) -> Goal | None:
        """The goal the rule infers for ``prompt`` (see ``infer_goal``), when this agent infers one."""
        wanted = style.name == "compact" if self.infer_goal is None else self.infer_goal
        if not wanted or self.done_when is not None or self._output is not None:
            return None
        tools = self.registry.tools()
        reads = [(item.name, item.description) for item in tools if item.effect == "read"]
        writes = [(item.name, item.description) for item in tools if item.effect == "write"]
        return infer_goal(prompt, reads=reads, writes=writes)

    def _load(self, run_id: str) -> RunLoop:
        return load_loop(self.store, run_id, self._model_for, self.registry, self.leases, self._output)

    def _advancing(self, run_id: str) -> RunLoop:
        """The run's loop, to advance it: a run whose tools differ from this agent's is left waiting with the
        reason (``plangate.runs.tools``), under the lease this agent holds."""
        try:
            return self._load(run_id)
        except ToolsDiffer as refused:
            transaction = self.leases.transaction if self.leases is not None else self.store.transaction
            refuse(self.store, run_id, refused, transaction)
            raise

    def _lease(self, run_id: str) -> AbstractAsyncContextManager[object]:
        return nullcontext() if self.leases is None else self.leases.kept(run_id)


def _check_done_when(done_when: object) -> None:
    if done_when is None:
        return
    if not isinstance(done_when, str):
        raise ConfigError(f"Agent done_when: expected a condition (a string) or None; found {done_when!r}")
    try:
        compile_done_when(done_when)
    except ConditionSyntaxError as exc:
        where = caret_lines(exc.expression, exc.position)
        raise ConfigError(f"Agent done_when: {exc.message}\n{where}") from None


def _context_reserve(budget: object, reserve: object) -> int:
    """The reserve to run with, once both settings are checked."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_CONTEXT:
        raise ConfigError(f"Agent context_budget: expected an integer >= {MIN_CONTEXT}; found {budget!r}")
    if reserve is None:
        return min(budget // 10, budget - MIN_CONTEXT)
    if isinstance(reserve, bool) or not isinstance(reserve, int) or not 0 <= reserve <= budget - MIN_CONTEXT:
        raise ConfigError(
            f"Agent context_reserve: expected an integer from 0 to {budget - MIN_CONTEXT} (it must leave "
            f"{MIN_CONTEXT} tokens of the context_budget {budget}); found {reserve!r}"
        )
    return reserve


def _registry(tools: ToolRegistry | Iterable[Tool] | None) -> ToolRegistry:
    if tools is None:
        return ToolRegistry()
    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, Tool):
        return ToolRegistry([tools])
    try:
        items = list(tools)
    except TypeError:
        raise ConfigError(
            f"Agent tools: expected a ToolRegistry or a list of tools; found {type(tools).__name__}"
        ) from None
    return ToolRegistry(items)


def _sync(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise ConfigError(
        "this call runs its own event loop and cannot be made from a running one: await the _async variant"
    )


def _usage_of(run: RunRecord, state: AgentState) -> dict[str, JsonValue] | None:
    if state.usage is None:
        return None
    try:
        budget = read_input(run.id, run.input)[1].budget
    except PlangateError:  # settings this version cannot read: the tokens without a cost
        budget = None
    return state.usage.summary({} if budget is None else budget.prices)


__all__ = ["Agent"]
