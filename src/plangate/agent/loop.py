"""The orchestrator of one agent run: which phase runs next, and the one commit each step of it makes.

For: ``RunLoop``, which holds a run's state in memory, dispatches to the phase modules (``_route``, ``_plan``,
``_execute``, ``_deliver``; ``_writes`` for a write between its intent and its receipt) until the run ends or
waits on a person, and commits each step's events, receipts, interaction and snapshot in ONE transaction
(``commit``). Before a batch with receipts is committed, ``_proof`` checks the ``done_when`` conditions they
may prove (what a proof changes is committed with them). After each commit the same events are folded into the
in-memory transcript, so the live run and a resumed one see the same past. Also ``load_loop``, which rebuilds
a loop from the store with only the run id. Not for: the public API (``agent.py``) or any phase's logic.

Suspending is not an exception: a phase that opens an interaction sets ``state.waiting`` and commits the
``waiting`` status, and ``advance`` returns. Nothing in the loop catches a failure of the store (a run whose
store fails stops, with its last committed step intact, and is resumed later) or a ``UserError`` (a stale
interaction, a model that cannot be built here: the caller fixes it, nothing changed). Any other exception
escaping a phase is the runtime's own failure: the run goes back to its last committed state and ends
``aborted`` with code ``internal_error`` (the exception in ``internal_reason`` and the log), so it never
stays ``running`` to fail again on every recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal

from pydantic import JsonValue

from plangate._offloop import off_loop
from plangate.agent import _deliver, _execute, _fork, _plan, _proof, _route, _writes
from plangate.agent._batch import Batch, Question
from plangate.agent._context import View
from plangate.agent._intent import Part, request_parts
from plangate.agent._outcomes import MAX_CORRECTIONS, corrections_exhausted, exhausted, internal_error
from plangate.agent._output import OutputSpec
from plangate.agent._state import SNAPSHOT_VERSION, AgentConfig, AgentState, Waiting, read_input
from plangate.agent._style import PromptStyle, prompt_style
from plangate.agent._tokens import Meter, MeteredModel
from plangate.agent._transcript import Evidence, Transcript
from plangate.agent.result import AgentResult, Outcome
from plangate.conditions import Condition
from plangate.errors import InteractionError, StoreError, UserError
from plangate.events import CorrectionEvent, Event, InteractionOpenedEvent, StatusEvent
from plangate.models import Model, Usage
from plangate.runs import telemetry
from plangate.runs.telemetry.logs import advancing
from plangate.runs.tools import check as check_tools
from plangate.runs.usage import RunUsage, budget_exhausted
from plangate.store import Interaction, LeaseBook, Store, Transaction
from plangate.tools import ToolRegistry, Toolset

Node = Callable[["RunLoop"], Coroutine[Any, Any, None]]

logger = logging.getLogger(__name__)


class RunLoop:
    """One agent run in memory, advanced phase by phase.

    Args:
        store: where the run lives.
        model: the model the phases call, or a function that builds it when first needed (a run that is
            only looked at never rebuilds its model).
        toolset: the run's active tools.
        run_id: the run.
        prompt: the user's request.
        config: the settings the run was started with.
        state: the state as last committed.
        transcript: the conversation and record, folded from the committed events.
        evidence: the run's receipts (successful ones per plan step, and each as conditions read it).
        interaction: the open interaction, when the run waits on one.
        fresh: the run was just created and nothing of it is committed yet.
        queued: the run is stored ``queued`` (created for whoever advances it next): its first advance says
            it is ``running`` before anything runs.
        leases: the lease book of whoever advances the run; when given, every commit is fenced by the run's
            lease (its generation), and a write is preceded by a renewal, so a process that lost the lease
            commits and writes nothing more (``RunLeased``).
        output: what the answer of ``done`` must fit (the agent's ``output_type``), or None.
        style: the prompt style of the model, when the caller asked for it already (asked once a run).

    Attributes:
        meter: counts prompt tokens for the context budget, calibrated by the model's reported usage.
        goal: the run's ``done_when`` condition, if it has one.
    """

    def __init__(
        self,
        *,
        store: Store,
        model: Model | Callable[[], Model],
        toolset: Toolset,
        run_id: str,
        prompt: str,
        config: AgentConfig,
        state: AgentState,
        transcript: Transcript,
        evidence: Evidence,
        interaction: Interaction | None = None,
        fresh: bool = False,
        leases: LeaseBook | None = None,
        queued: bool = False,
        output: OutputSpec | None = None,
        style: PromptStyle | None = None,
    ) -> None:
        self.store = store
        self.output = output
        self._style = style
        self.leases = leases
        # Every call goes through the meter, so the provider's token counts calibrate the prompt budget.
        self.meter = Meter()
        # None when tracing is off: then nothing below costs more than this check.
        self.trace = telemetry.run_trace(store, run_id, "agent", "plangate")
        self._model: MeteredModel | Callable[[], Model] = (
            MeteredModel(model, self.meter, self._count, self.trace, self._called)
            if isinstance(model, Model)
            else model
        )
        self.toolset = toolset
        self.run_id = run_id
        self.prompt = prompt
        self.config = config
        self.state = state
        self.transcript = transcript
        self.evidence = evidence
        self.interaction = interaction
        self._fresh = fresh
        self._queued = queued
        self._catalogue: tuple[tuple[str, ...], str] | None = None
        self._parts: tuple[Part, ...] | None = None
        self.goal: Condition | None = _proof.goal_condition(config.done_when)

    @property
    def model(self) -> Model:
        """The run's model (built on first use when the loop was given a function)."""
        if not isinstance(self._model, MeteredModel):
            built = self._model()
            follow_run(built, self.state.model_calls, self.config.model)
            self._model = MeteredModel(built, self.meter, self._count, self.trace, self._called)
        return self._model

    def _called(self) -> None:
        self.state.model_calls += 1

    def _count(self, model: str, usage: Usage) -> None:
        """Add one model call's usage to the run's tally (stored with the next commit)."""
        tally = self.state.usage or RunUsage()
        self.state.usage = tally.plus(model, usage)

    # -- advancing ----------------------------------------------------------------------------------------

    async def advance(self) -> AgentResult:
        """Run phases until the run ends or waits on a person; returns where it stands."""
        with advancing(self.run_id, None if self.trace is None else self.trace.trace_id):
            return await self._advance()

    async def _advance(self) -> AgentResult:
        if self._fresh:
            self._fresh = False
            await self.commit(self._started(status="running"))
        elif self._queued:
            self._queued = False
            await self.commit(Batch(status="running"))
        failed = False
        while self.state.phase != "done" and self.state.waiting is None:
            stage = self.state.phase
            try:
                await self._step()
            except (UserError, StoreError):
                raise
            except Exception as exc:
                if failed:
                    # Ending the run failed as well: nothing more can be recorded safely.
                    raise
                failed = True
                self._fail(stage, exc)
        return self.result()

    def begin(self, *, status: Literal["queued", "running"]) -> None:
        """The run's first commit (its ``started`` event and first snapshot), once, without advancing it
        (for a caller that hands the run to a worker)."""
        if self._fresh:
            self._fresh = False
            self._commit(self._started(status=status))

    def _started(self, *, status: Literal["queued", "running"]) -> Batch:
        return Batch([StatusEvent(stage=self.state.phase, code="started")], status=status)

    async def _step(self) -> None:
        if self.state.inflight is not None:
            await _writes.recover(self)
            return
        node = _NODES.get(self.state.phase)
        if node is None:
            raise StoreError(
                f"run {self.run_id!r} is in phase {self.state.phase!r} with no open interaction; "
                "expected one to wait on (the snapshot is inconsistent)"
            )
        await node(self)

    def _fail(self, stage: str, failure: Exception) -> None:
        """End the run after ``failure`` escaped a phase: back to the last commit, then ``internal_error``.

        What the phase changed in memory before it failed was never committed, and may be half done; the
        closing commit must not store it.
        """
        logger.error("run %s failed in its %s phase", self.run_id, stage, exc_info=failure)
        snapshot = self.store.get_snapshot(self.run_id)
        if snapshot is not None:
            self.state = AgentState.from_snapshot(snapshot)
        if self.state.phase == "done" or self.state.waiting is not None:
            return  # the failure came after the commit that ended or suspended the run
        inflight = self.state.inflight
        # The write's intent stays in the store without a receipt: the outcome says it may have happened.
        self.state.inflight = None
        self.end(internal_error(stage, failure, None if inflight is None else inflight.tool))

    def result(self) -> AgentResult:
        """Where the run stands now, as ``AgentResult``."""
        state = self.state
        if state.phase == "done" and state.outcome is not None:
            return AgentResult(self.run_id, state.outcome.status, state.outcome, None, state.answer)
        if state.waiting is not None:
            return AgentResult(self.run_id, "waiting", None, self.interaction, None)
        return AgentResult(self.run_id, "running")

    # -- helpers the phases share -------------------------------------------------------------------------

    def view(self) -> View:
        """What the prompts of this moment are built from."""
        state = self.state
        return View(
            config=self.config,
            wire=self.model.wire,
            catalogue=self.catalogue(),
            transcript=self.transcript,
            plan=state.plan,
            step_index=state.step_index,
            rounds_used=state.rounds_used,
            evidence=self.evidence.count(state.step_index),
            memory=state.memory,
            goal=self.goal,
            step_condition=_proof.step_condition(state.plan, state.step_index),
            style=self.prompt_style,
            parts=self.parts,
            parts_done=len(self.evidence.succeeded_writes()),
        )

    @property
    def parts(self) -> tuple[Part, ...]:
        """The changes the request asks for, in order, by rule (read once)."""
        if self._parts is None:
            tools = self.toolset.registry.tools()
            writes = [(item.name, item.description) for item in tools if item.effect == "write"]
            self._parts = request_parts(self.prompt, writes=writes)
        return self._parts

    @property
    def prompt_style(self) -> PromptStyle:
        """The prompt style the run's model asks for (asked once)."""
        if self._style is None:
            self._style = style_of(self.model)
        return self._style

    def catalogue(self) -> str:
        """The active tools as the system message lists them (rebuilt only when the active set changes):
        their JSON entries, or for a small model their signatures and a worked example."""
        names = tuple(self.toolset.active_names())
        if self._catalogue is None or self._catalogue[0] != names:
            text = self.prompt_style.catalogue(
                self.toolset.catalogue(), self.goal, self.config.inferred_tools
            )
            self._catalogue = (names, text)
        return self._catalogue[1]

    def take_round(self, stage: str) -> bool:
        """Consume one round of the budget before a model call; False (and the run ends ``exhausted``) when
        none is left, or when the run's token or cost budget is reached."""
        if not self.within_budget(stage):
            return False
        if self.state.rounds_used >= self.config.max_rounds:
            self.end(exhausted(stage, self.config.max_rounds))
            return False
        self.state.rounds_used += 1
        return True

    def within_budget(self, stage: str) -> bool:
        """Whether another model call may be made: False (and the run ends ``exhausted``, code
        ``budget_exhausted``, the budget named) once the calls so far reached ``max_tokens`` or
        ``max_cost``."""
        budget = self.config.budget
        usage = self.state.usage
        if budget is None or usage is None:
            return True
        reached = budget.exceeded(usage)
        if reached is None:
            return True
        self.end(budget_exhausted(stage, budget, reached, usage))
        return False

    def usage_summary(self) -> dict[str, JsonValue] | None:
        """The run's usage as its outcome shows it, or None before any call reported usage."""
        usage = self.state.usage
        if usage is None:
            return None
        budget = self.config.budget
        return usage.summary({} if budget is None else budget.prices)

    def end(self, outcome: Outcome) -> None:
        """Decide the run's outcome; the ``deliver`` phase announces it and commits the status."""
        self.state.outcome = outcome
        self.state.phase = "deliver"

    def correct(self, batch: Batch, code: str, message: str, stage: str) -> None:
        """Add a correction to ``batch``; the third in a row ends the run (``corrections_exhausted``)."""
        self.state.corrections += 1
        batch.events.append(CorrectionEvent(code=code, message=message))
        if self.state.corrections >= MAX_CORRECTIONS:
            self.end(corrections_exhausted(stage, message))

    # -- committing ---------------------------------------------------------------------------------------

    async def commit(self, batch: Batch) -> list[Event]:
        """Write ``batch`` and the current state in one transaction, then fold its events in memory.

        The commit never waits on the event loop, which serves other runs and their streams: it is made
        here when the store can begin it at once (a SQLite store nobody else is writing to), else in a
        worker thread (a store that waits on another process's write lock, up to its busy timeout, or on
        the network). Cancelled while that thread commits, it still waits for the commit to finish (then
        raises ``CancelledError``): whoever stopped the run's task must never see a commit of that task land
        afterwards.

        Raises:
            StaleInteraction: the batch resolves an interaction someone else resolved first; nothing changed.
        """
        # What a receipt proves goes into the same batch, decided here, on the loop's thread, like the rest
        # of the state.
        _proof.prove(self, batch)
        with self._at_once() as tx:
            stored = None if tx is None else self._write(tx, batch)
        if stored is None:
            return await off_loop(self._commit, batch)
        self._after_commit(batch, stored)
        return stored

    def _commit(self, batch: Batch) -> list[Event]:
        if self.leases is None:
            with self.store.transaction(self.run_id) as tx:
                stored = self._write(tx, batch)
        else:  # ``_write`` acts only through its transaction: the store may run it twice (``Store.commit``)
            stored = self.leases.commit(self.run_id, lambda tx: self._write(tx, batch))
        self._after_commit(batch, stored)
        return stored

    def _write(self, tx: Transaction, batch: Batch) -> list[Event]:
        """Write ``batch`` and the current state with ``tx``; the events as stored."""
        state = self.state
        if batch.resolve is not None:
            tx.resolve_interaction(*batch.resolve)
        if batch.intent is not None:
            tx.record_write_intent(batch.intent.key, batch.intent.tool, batch.intent.digest)
        if batch.write_done is not None:
            done = batch.write_done
            tx.complete_write_intent(
                done.key,
                step_index=done.step_index,
                success=done.success,
                summary=done.summary,
                result=done.result,
                output=done.output,
            )
        for receipt in batch.receipts:
            tx.add_receipt(
                step_index=receipt.step_index,
                source=receipt.source,
                name=receipt.name,
                arguments_digest=receipt.arguments_digest,
                success=receipt.success,
                summary=receipt.summary,
                output=receipt.output,
            )
        for event in batch.events:
            tx.append(event)
        if batch.question is not None:
            self._open(tx, batch.question)
        if batch.status is not None:
            ended = state.outcome if batch.status in _ENDED else None
            tx.set_status(batch.status, outcome=None if ended is None else ended.stored())
        tx.set_snapshot(state.encoded(), version=SNAPSHOT_VERSION)
        return list(tx.events)

    def _at_once(self) -> AbstractContextManager[Transaction | None]:
        """A transaction on the run when the store begins it at once (``Store.try_transaction``), fenced by
        the run's lease where this process holds one; else the block gets None."""
        if self.leases is None:
            return self.store.try_transaction(self.run_id)
        return self.leases.try_transaction(self.run_id)

    async def confirm_lease(self) -> None:
        """Before a write: renew the run's lease (off the event loop), refused (``RunLeased``) when this
        process lost it."""
        if self.leases is not None:
            await self.leases.confirm_async(self.run_id)

    def _open(self, tx: Transaction, question: Question) -> None:
        step_id = str(question.step_index) if self.state.plan else None
        interaction = tx.open_interaction(question.kind, question.prompt, tool=question.tool, step_id=step_id)
        tool = question.tool
        self.state.waiting = Waiting(
            interaction_id=interaction.id,
            kind=question.kind,
            purpose=question.purpose,
            step_index=question.step_index,
            tool=None if tool is None else tool.name,
            arguments=None if tool is None else dict(tool.arguments),
            digest=None if tool is None else tool.arguments_digest,
            write_key=question.write_key,
        )
        self.interaction = interaction
        tx.append(
            InteractionOpenedEvent(
                interaction_id=interaction.id,
                kind=question.kind,
                prompt=question.prompt,
                tool=tool,
                step_id=step_id,
            )
        )

    def _after_commit(self, batch: Batch, stored: list[Event]) -> None:
        for record in _proof.receipts_of(batch, planned=bool(self.state.plan)):
            self.evidence.add(record)
        resolutions: Mapping[str, Mapping[str, object]] = {}
        if batch.resolve is not None:
            resolutions = {batch.resolve[0]: batch.resolve[1]}
            if self.state.waiting is None:
                self.interaction = None
        for event in stored:
            self.transcript.apply(event, resolutions)
        if self.trace is not None or telemetry.metrics.current() is not None:
            telemetry.committed(self.trace, "agent", stored, self.store)


def style_of(model: Model) -> PromptStyle:
    """The prompt style ``model`` asks for (``_style.prompt_style``), as every run asks it."""
    return prompt_style(model)


def follow_run(model: Model, calls: int, started_with: str) -> None:
    """Put a model that replays a script per run (``follows_runs``, as ``scripted:<file>`` does) where a
    run that already made ``calls`` model calls goes on, when it is the script the run started with (named
    ``started_with``): a run resumed in another process gets its next unused response, not the script's
    first. Another script (``plangate approve --model scripted:NEXT.json``) holds the rest of the run and
    plays from its start."""
    resume_at = getattr(model, "resume_at", None)
    if getattr(model, "follows_runs", False) is True and callable(resume_at) and model.name == started_with:
        resume_at(calls)


_ENDED: frozenset[str] = frozenset({"completed", "aborted", "exhausted", "cancelled"})

_NODES: dict[str, Node] = {
    "route": _route.run_route,
    "plan": _plan.run_plan,
    "execute": _execute.run_round,
    "deliver": _deliver.run_deliver,
}


def load_loop(
    store: Store,
    run_id: str,
    model: Callable[[AgentConfig], Model],
    registry: ToolRegistry,
    leases: LeaseBook | None = None,
    output: OutputSpec | None = None,
) -> RunLoop:
    """Rebuild a run's loop from the store, with nothing but its id.

    Args:
        store: the store holding the run.
        run_id: the run.
        model: gives the model for the run's settings (the agent's own, or one rebuilt from the spec).
        registry: the tools; every tool the run was started with must be in it.
        leases: the lease book the loop's commits are fenced by (see ``RunLoop``).
        output: the typed output the caller validates the answer with; None: the run's stored schema, if
            it has one (JSON is then enough).

    Raises:
        NotFoundError: no such run.
        InteractionError: the run is not an agent run.
        ToolsDiffer: the registry lacks a tool the run uses, or one differs from the tool it started with.
        ConfigError: the model cannot be rebuilt.
        SchemaVersionError: the run was written by a newer plangate.
    """
    run = store.get_run(run_id)
    if run.kind != "agent":
        raise InteractionError(f"run {run_id!r} is a {run.kind} run; expected an agent run")
    if run.last_seq == 0 and _fork.origin_of(run.input) is not None:
        transaction = None if leases is None else leases.transaction
        if _fork.materialize(store, run, registry, transaction):
            run = store.get_run(run_id)
    prompt, config = read_input(run_id, run.input)
    snapshot = store.get_snapshot(run_id)
    if snapshot is None:
        raise StoreError(f"agent run {run_id!r} has no snapshot; expected one from its first commit")
    state = AgentState.from_snapshot(snapshot)
    check_tools(run_id, run.input, config.tools, registry)
    interactions = store.list_interactions(run_id=run_id)
    resolutions = {item.id: item.resolution for item in interactions if item.resolution is not None}
    resolutions.update(_fork.resolutions_of_origins(store, run.input))
    transcript = Transcript.fold(prompt, store.events(run_id), resolutions)
    waiting = state.waiting
    interaction = next((i for i in interactions if waiting and i.id == waiting.interaction_id), None)
    return RunLoop(
        store=store,
        model=_fork.first_round_model(run.input, state, lambda: model(config)),
        toolset=Toolset(registry, state.toolset),
        run_id=run_id,
        prompt=prompt,
        config=config,
        state=state,
        transcript=transcript,
        evidence=Evidence(store.receipts(run_id), planned=bool(state.plan)),
        interaction=interaction,
        leases=leases,
        queued=run.status == "queued",
        output=output
        if output is not None or config.output_schema is None
        else OutputSpec(config.output_schema),
    )


__all__ = ["RunLoop", "follow_run", "load_loop", "style_of"]
