"""The copilot's turn, orchestrated: a question becomes a checked, run, reviewed formula, retried once if the
review says so, and is stored whole with its attempts.

For: ``Copilot`` (``ask``, ``ask_async``, ``stream``, ``recover``) and the module-level ``ask`` /
``ask_async`` / ``ask_stream``. The turn is a run of kind ``ask`` in the store: its events are the ops, the
check's issues, the run's progress, the review and the outcome; each attempt's formula runs as a child
formula run. Every way a turn can end (a source that cannot be opened, a model that writes nothing usable, a
failing run, a cancellation, an unexpected error) ends it with a status and a reason, stored in one
transaction with the run's outcome. Not for: the phases themselves (``_attempt`` and the modules it calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TypedDict, Unpack

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.copilot import _store
from plangate.copilot._attempt import AttemptRun, AttemptSetup
from plangate.copilot._conversations import AttemptRecord, Conversations
from plangate.copilot._phases import Phases
from plangate.copilot._run import RUN_TIMEOUT_S, PlanRunner
from plangate.copilot._scope import ScopeError, open_scope, source_label
from plangate.copilot._strategy import strategy_for
from plangate.copilot.policy import chosen_attempt, retry_left, turn_answer
from plangate.copilot.results import Attempt, Turn
from plangate.errors import ConfigError, NotFoundError, PlangateError, RunError
from plangate.events import Event, StatusEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.models import Model, resolve_model
from plangate.runs import Outcome, telemetry
from plangate.runs.usage import BudgetReached, UsageTally, children_usage, require_prices, run_budget
from plangate.store import TERMINAL_STATUSES, Commit, LeaseBook, RunRecord, Store, open_store
from plangate.tools.data import DataSources, QueryLimits
from plangate.vocab import TurnStatus

logger = logging.getLogger("plangate.copilot")

Data = str | os.PathLike[str] | None


@dataclass(frozen=True)
class _Prepared:
    """A turn about to start: everything checked that can be checked before anything is stored."""

    question: str
    data: Data
    name: str | None
    model: Model | None
    model_name: str
    owner: str
    conversation_id: str
    turn_id: str
    run_id: str
    created_at: float


class Copilot:
    """Answers questions about data, turn by turn, in one store.

    Args:
        model: the copilot model: a ``Model``, a spec (``openai:gpt-4o-mini``, ``local``), or None for the
            default model. It writes the ops and, unless a step names its own, runs the ``llm`` steps.
        store: a store, a store URL, or None for ``$PLANGATE_STORE`` / ``.plangate/plangate.db``.
        sources: data sources registered already (``data`` may name one of them).
        limits: row, size and time limits of every query.
        owner: who the turns and runs belong to.
        model_review: also ask a model to review answers the rules flagged: True for the copilot model, or
            a model / spec of its own. It may veto a retry, never force one.
        run_timeout: seconds an attempt's formula run may take.
        leases: the lease book a turn's ``ask`` run is held under while its turn runs (every commit fenced
            by it, as every run's); None: one of its own.
        prices: what each model's tokens cost per million (``[prices]``), by model name: a turn's usage
            shows its cost when every model it called has one.
        max_tokens: the input and output tokens a turn's model calls may use together (its generation, its
            review and its formula runs' ``llm`` steps); checked before each call and before each attempt's
            formula run (which gets what is left as its own budget), and a turn that reached it ends
            ``exhausted`` (code ``budget_exhausted``). None: no limit.
        max_cost: the most a turn may cost by ``prices`` (checked the same way); its models need a price.

    Raises:
        ConfigError: ``max_tokens`` or ``max_cost`` is not valid.
    """

    def __init__(
        self,
        *,
        model: Model | str | None = None,
        store: Store | str | None = None,
        sources: DataSources | None = None,
        limits: QueryLimits | None = None,
        owner: str = "local",
        model_review: bool | Model | str = False,
        run_timeout: float = RUN_TIMEOUT_S,
        leases: LeaseBook | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> None:
        self.budget = run_budget(max_tokens, max_cost, "ask")
        self.prices: dict[str, ModelPrice] = dict(prices or {})
        self.model = model
        self.store = store if store is not None and not isinstance(store, str) else open_store(store)
        self.leases = leases if leases is not None else LeaseBook(self.store)
        self.sources = sources if sources is not None else DataSources()
        self.limits = limits or QueryLimits()
        self.owner = owner
        self.model_review = model_review
        self.run_timeout = run_timeout

    # -- starting -------------------------------------------------------------------------------------------

    def prepare(
        self, question: str, data: Data = None, *, conversation: str | None = None, name: str | None = None
    ) -> _Prepared:
        """Check what can be checked before a turn is stored: the question, the model, the conversation.

        Raises:
            ConfigError: an empty question, a model spec that names no usable model, or ``max_cost`` with a
                model that has no price.
            NotFoundError: ``conversation`` names no conversation of this owner.
        """
        if not isinstance(question, str) or not question.strip():
            raise ConfigError("ask: expected a question; got an empty one")
        model = resolve_model(self.model)
        review = self._review_model(model)
        models = [model.name] if review is None else [model.name, review.name]
        require_prices(self.budget, models, self.prices, "ask")
        found = _store.conversation_for(self.store, conversation, question, self.owner)
        return _Prepared(
            question.strip(),
            data,
            name,
            model,
            model.name,
            self.owner,
            found.id,
            _store.new_turn_id(),
            _store.new_run_id(),
            time.time(),
        )

    async def ask_async(
        self, question: str, data: Data = None, *, conversation: str | None = None, name: str | None = None
    ) -> Turn:
        """Answer ``question`` about ``data`` (a file, a URL, a source name; None: the bundled shop data).

        Raises:
            ConfigError, NotFoundError: see :meth:`prepare` (nothing is stored then). Everything that goes
                wrong later ends the turn with a status and a reason instead.
        """
        return await self.run_turn(self.prepare(question, data, conversation=conversation, name=name))

    def ask(
        self, question: str, data: Data = None, *, conversation: str | None = None, name: str | None = None
    ) -> Turn:
        """``ask_async`` from synchronous code."""
        return asyncio.run(self.ask_async(question, data, conversation=conversation, name=name))

    def stream(
        self, question: str, data: Data = None, *, conversation: str | None = None, name: str | None = None
    ) -> AskStream:
        """The turn's events as they are committed (its ops, issues, run progress, review, outcome), then
        ``stream.turn``. Leaving the iteration early cancels the turn (which is stored as cancelled)."""
        return AskStream(self, self.prepare(question, data, conversation=conversation, name=name))

    # -- the turn -------------------------------------------------------------------------------------------

    def _review_model(self, model: Model) -> Model | None:
        if self.model_review is False:
            return None
        if self.model_review is True:
            return model
        return resolve_model(self.model_review)

    async def run_turn(self, prepared: _Prepared) -> Turn:
        """Run a prepared turn to its end and store it, holding its ``ask`` run's lease throughout."""
        if prepared.model is None:
            raise ConfigError("run_turn: the prepared turn has no model")
        _store.start_run(
            self.store,
            prepared.run_id,
            prepared.turn_id,
            prepared.question,
            prepared.conversation_id,
            source_label(prepared.data),
            prepared.model_name,
            prepared.owner,
        )
        label = source_label(prepared.data)
        async with self.leases.kept(prepared.run_id):
            trace = telemetry.run_trace(self.store, prepared.run_id, "ask", "copilot")  # None: tracing off
            try:  # one turn writes a conversation at a time: this one may wait for the one before
                its_turn = await _store.take_turn(
                    self.store, self.leases.transaction, prepared.run_id, prepared.conversation_id
                )
            except asyncio.CancelledError:
                why = "the turn was cancelled while it waited for the turn before it"
                ended = [_ended(1, "cancelled", why, prepared.created_at)]
                self._finish(prepared, ended, "turn", label, trace=trace)
                raise
            if not its_turn:  # another process ended it while it waited
                stored = Conversations(self.store).find_turn(prepared.run_id)
                if stored is None:
                    raise RunError(f"turn {prepared.turn_id!r} ended while it waited, and was not stored")
                return Turn.from_record(stored)
            self._committed(trace, _store.begin(self.leases.transaction, prepared.run_id, prepared.question))
            return await self._run_leased(prepared, prepared.model, Phases(trace))

    async def _run_leased(self, prepared: _Prepared, model: Model, phases: Phases) -> Turn:
        store = self.store
        label = source_label(prepared.data)
        attempts: list[Attempt] = []
        stage = "turn"
        source = label
        # the turn's own model calls (generation, review), in its outcome with its formula runs' usage, and
        # checked against its budget before each call
        tally = UsageTally(self.prices, self.budget, lambda: children_usage(store, prepared.run_id))
        trace = phases.trace
        exhausted: Outcome | None = None
        try:
            strategy = strategy_for(model)  # once per turn: every attempt asks it, none asks the model
            try:
                with phases.phase("scope", 0) as shown:
                    scope = await asyncio.to_thread(
                        open_scope,
                        prepared.data,
                        sources=self.sources,
                        name=prepared.name,
                        limits=self.limits,
                        categories=strategy.categories,
                    )
                    shown[telemetry.semconv.COPILOT_DETAIL] = scope.name
            except ScopeError as exc:
                self._emit(prepared.run_id, StatusEvent(stage="scope", code=exc.code, text=str(exc)))
                attempts.append(_ended(1, "failed", str(exc), prepared.created_at))
                return self._finish(prepared, attempts, "scope", label, trace=trace)
            source = scope.name
            review = self._review_model(model)
            runs_model = model  # an llm step's call is counted by its formula run, not twice
            # the budget is checked before the call's span starts: a call that is not made has none
            model = tally.wrap(telemetry.observed(model, trace), "generate")
            setup = AttemptSetup(
                question=prepared.question,
                history=_store.history(store, prepared.conversation_id, prepared.owner),
                scope=scope,
                model=model,
                strategy=strategy,
                runner=PlanRunner(
                    store,
                    scope,
                    runs_model,
                    step_tokens=strategy.step_tokens,
                    timeout=self.run_timeout,
                    prices=self.prices,
                ),
                run_id=prepared.run_id,
                owner=prepared.owner,
                emit=lambda event: self._emit(prepared.run_id, event),
                review_model=None
                if review is None
                else tally.wrap(telemetry.observed(review, trace), "review"),
                phases=phases,
                meter=tally,
            )
            instruction: str | None = None
            for n in itertools.count(1):
                started = time.time()
                try:
                    result = await AttemptRun(setup, n, instruction).run()
                except BudgetReached as reached:  # a call or a formula run the budget did not allow
                    exhausted = reached.outcome
                    attempts.append(_ended(n, "failed", exhausted.user_message, started))
                    break
                attempts.append(result.attempt)
                stage = result.stage
                _store.checkpoint(self.leases.transaction, prepared.run_id, prepared.question, attempts)
                if result.exhausted:  # its formula run reached what was left of the turn's budget
                    exhausted = tally.exhausted(stage)
                    break
                if result.retry is None or not retry_left(n):
                    break
                with phases.phase("retry", n) as shown:
                    shown[telemetry.semconv.COPILOT_DETAIL] = result.attempt.reason
                    self._emit(
                        prepared.run_id, StatusEvent(stage="review", code="retry", text=result.attempt.reason)
                    )
                instruction = result.retry
            return self._finish(prepared, attempts, stage, source, tally.total(), trace, exhausted)
        except asyncio.CancelledError:
            attempts.append(
                _ended(
                    len(attempts) + 1,
                    "cancelled",
                    "the turn was cancelled before it finished",
                    prepared.created_at,
                )
            )
            self._finish(prepared, attempts, stage, source, tally.total(), trace)
            raise
        except Exception as exc:
            # A defect must still end the turn with a reason, never a traceback for the user.
            logger.exception("turn %s stopped on an unexpected error", prepared.turn_id)
            reason = f"the turn stopped on an unexpected error ({type(exc).__name__}: {exc})"
            attempts.append(_ended(len(attempts) + 1, "failed", reason, prepared.created_at))
            return self._finish(prepared, attempts, stage, source, tally.total(), trace)

    def _emit(self, run_id: str, event: Event) -> None:
        self._committed(None, _store.append(self.leases.transaction, run_id, event))

    def _committed(self, trace: telemetry.RunTrace | None, events: list[Event]) -> None:
        if trace is not None or telemetry.metrics.current() is not None:
            telemetry.committed(trace, "ask", events, self.store)

    def _finish(
        self,
        prepared: _Prepared,
        attempts: list[Attempt],
        stage: str,
        source: str,
        usage: dict[str, JsonValue] | None = None,
        trace: telemetry.RunTrace | None = None,
        exhausted: Outcome | None = None,
    ) -> Turn:
        chosen = chosen_attempt(attempts)
        turn = Turn(
            id=prepared.turn_id,
            conversation_id=prepared.conversation_id,
            run_id=prepared.run_id,
            question=prepared.question,
            status=chosen.status,
            reason=chosen.reason,
            answer=turn_answer(chosen),
            attempts=attempts,
            result=chosen.result,
            formula=chosen.formula,
            source=source,
            model=prepared.model_name,
            owner=prepared.owner,
            created_at=prepared.created_at,
            finished_at=time.time(),
            usage=usage,
        )
        committed = _store.finish(self.store, self.leases.transaction, turn, stage, usage, exhausted)
        self._committed(trace, committed)
        return turn

    # -- after a crash ---------------------------------------------------------------------------------------

    def recover(self, run_id: str, *, cancelled: str | None = None) -> Turn:
        """End a turn whose process stopped before it finished (its ``ask`` run is still ``running``).

        The attempts it had finished are kept; its formula run, if one was running, is cancelled; the turn is
        stored, as its run's owner's, with a failed last attempt saying so. A turn that ended already is
        returned as stored. (The server's start-up recovery calls this for ``ask`` runs.)

        Raises:
            NotFoundError: no such run, or not an ``ask`` run.
            RunLeased: a live process runs the turn; nothing changed.

        With ``cancelled`` (a reason), the turn ends ``cancelled`` rather than failed: someone stopped it.
        """
        run = self.store.get_run(run_id)
        if run.kind != "ask":
            raise NotFoundError(f"run {run_id!r} is a {run.kind} run, not a copilot turn")
        stored = Conversations(self.store).find_turn(run_id)
        if stored is not None:
            return Turn.from_record(stored)
        with self.leases.held(run_id):  # its process is gone: this one ends it, fenced as every commit is
            return self._end_interrupted(run, cancelled)

    def _end_interrupted(self, run: RunRecord, cancelled: str | None) -> Turn:
        run_id = run.id
        snapshot = self.store.get_snapshot(run_id)
        records = snapshot.checked_state(_store.SNAPSHOT_VERSION).get("attempts") if snapshot else None
        items = records if isinstance(records, list) else []
        attempts = [Attempt.from_record(AttemptRecord.model_validate(item)) for item in items]
        runner = FormulaRunner(self.store)
        for child in self.store.list_runs(parent_run_id=run_id, kind="formula", limit=100).items:
            if child.status not in TERMINAL_STATUSES:
                with contextlib.suppress(PlangateError):
                    runner.cancel(child.id, "its turn was interrupted")
        why = "the turn was interrupted: its process stopped before it finished"
        status: TurnStatus = "failed" if cancelled is None else "cancelled"
        attempts.append(_ended(len(attempts) + 1, status, cancelled or why, run.created_at))
        given = run.input
        prepared = _Prepared(
            question=str(given.get("question", run.name)),
            data=None,
            name=None,
            model=None,
            model_name=str(given.get("model", "")),
            owner=run.owner,
            conversation_id=str(given.get("conversation_id", "")),
            turn_id=str(given.get("turn_id") or _store.new_turn_id()),
            run_id=run_id,
            created_at=run.created_at,
        )
        # the turn's own span, ended here (its phases' spans went out as each ended, in the process that died)
        trace = telemetry.run_trace(self.store, run_id, "ask", "copilot")
        return self._finish(prepared, attempts, "turn", str(given.get("data", "")), trace=trace)


def _ended(n: int, status: TurnStatus, reason: str, started: float) -> Attempt:
    return Attempt.model_validate(
        {"n": n, "status": status, "reason": reason, "started_at": started, "finished_at": time.time()}
    )


class AskStream:
    """A turn's events as they are committed, for ``async for``; ``turn`` is set once it ended.

    The events are those of the turn's ``ask`` run (``status``, ``op``, ``review``, ``outcome``) and of the
    runs it starts (a formula run's ``step_state`` and ``status`` events, with that run's ``run_id``).
    """

    def __init__(self, copilot: Copilot, prepared: _Prepared) -> None:
        self.copilot = copilot
        self.prepared = prepared
        self.turn: Turn | None = None
        self._runs: dict[str, bool] = {prepared.run_id: True}

    @property
    def run_id(self) -> str:
        """The turn's ``ask`` run."""
        return self.prepared.run_id

    @property
    def turn_id(self) -> str:
        """The turn's id (known before it starts)."""
        return self.prepared.turn_id

    def _belongs(self, run_id: str) -> bool:
        known = self._runs.get(run_id)
        if known is not None:
            return known
        try:
            parent = self.copilot.store.get_run(run_id).parent_run_id
        except PlangateError:
            parent = None
        mine = parent is not None and self._belongs(parent)
        self._runs[run_id] = mine
        return mine

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Commit | None] = asyncio.Queue()

        def heard(commit: Commit) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, commit)

        unsubscribe = self.copilot.store.subscribe(heard)
        task = asyncio.create_task(self.copilot.run_turn(self.prepared))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (commit := await queue.get()) is not None:
                if self._belongs(commit.run_id):
                    for event in commit.events:
                        yield event
            self.turn = task.result()
        finally:
            unsubscribe()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class _Options(TypedDict, total=False):
    """The keyword options of the module-level ``ask`` functions, as :class:`Copilot` takes them."""

    prices: Mapping[str, ModelPrice] | None
    max_tokens: int | None
    max_cost: float | None


def _copilot(
    model: Model | str | None,
    store: Store | str | None,
    sources: DataSources | None,
    owner: str,
    model_review: bool | Model | str,
    options: _Options,
) -> Copilot:
    return Copilot(
        model=model, store=store, sources=sources, owner=owner, model_review=model_review, **options
    )


async def ask_async(
    question: str,
    data: Data = None,
    *,
    model: Model | str | None = None,
    store: Store | str | None = None,
    conversation: str | None = None,
    name: str | None = None,
    sources: DataSources | None = None,
    owner: str = "local",
    model_review: bool | Model | str = False,
    **options: Unpack[_Options],
) -> Turn:
    """``ask`` for async code."""
    copilot = _copilot(model, store, sources, owner, model_review, options)
    return await copilot.ask_async(question, data, conversation=conversation, name=name)


def ask(
    question: str,
    data: Data = None,
    *,
    model: Model | str | None = None,
    store: Store | str | None = None,
    conversation: str | None = None,
    name: str | None = None,
    sources: DataSources | None = None,
    owner: str = "local",
    model_review: bool | Model | str = False,
    **options: Unpack[_Options],
) -> Turn:
    """Answer a question about data with a checked, run and reviewed formula.

    Args:
        question: the question.
        data: a SQLite file (registered under its stem, or ``name``), a ``sqlite:///`` or ``postgresql://``
            URL, the name of a source in ``sources``, or None for the bundled shop data.
        model: the copilot model (a ``Model``, a spec, or None for the default).
        store: a store, a store URL, or None for the default store.
        conversation: the conversation to continue (its last turns are the question's history); None
            starts one.
        name: the name to register ``data`` under.
        sources: data sources registered already.
        owner: who the turn belongs to.
        model_review: ask a model to review answers the rules flagged (True: the copilot model).
        **options: ``prices``, ``max_tokens``, ``max_cost``, as :class:`Copilot` takes them.

    Returns:
        The stored turn: ``status``, ``answer``, ``reason``, ``attempts``, ``result``, ``formula``.

    Raises:
        ConfigError: an empty question, an unusable model spec, a budget that is not valid or a
            ``max_cost`` for a model without a price. NotFoundError: an unknown conversation.
    """
    return asyncio.run(
        ask_async(
            question,
            data,
            model=model,
            store=store,
            conversation=conversation,
            name=name,
            sources=sources,
            owner=owner,
            model_review=model_review,
            **options,
        )
    )


def ask_stream(
    question: str,
    data: Data = None,
    *,
    model: Model | str | None = None,
    store: Store | str | None = None,
    conversation: str | None = None,
    name: str | None = None,
    sources: DataSources | None = None,
    owner: str = "local",
    model_review: bool | Model | str = False,
    **options: Unpack[_Options],
) -> AskStream:
    """The events of a turn as it runs (``async for event in stream``), then ``stream.turn``.

    Raises:
        ConfigError: an empty question or an unusable model spec. NotFoundError: an unknown conversation.
    """
    copilot = _copilot(model, store, sources, owner, model_review, options)
    return copilot.stream(question, data, conversation=conversation, name=name)


__all__ = ["AskStream", "Copilot", "ask", "ask_async", "ask_stream"]
