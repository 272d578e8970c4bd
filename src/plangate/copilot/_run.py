"""Run: the checked formula, on the formula runtime, as a child run of the turn's ``ask`` run.

For: starting the run (durable, like any formula run: its steps' transitions are committed as they happen),
bounding it in time, cancelling it with the turn, and reading back what it did: each data step's rows (a data
step's result rows are its output), the answer (the output of the formula's last step), the rows the answer
rests on, and the events the review reads. Not for: judging the result (``_review``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.copilot._scope import Scope
from plangate.copilot.results import TurnResult
from plangate.errors import PlangateError
from plangate.events import StepStateEvent, ToolResultEvent
from plangate.formulas import Plan
from plangate.formulas.plan import AgentExecutor, LlmExecutor, ToolExecutor
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.models import Model, ModelChunk, ModelRequest, ModelWrapper
from plangate.runs.usage import Budget
from plangate.store import TERMINAL_STATUSES, Store
from plangate.tools.data._format import shown_cell, shown_table

RUN_TIMEOUT_S = 600.0
"""How long a turn's formula run may take before it is cancelled."""
STEP_TOKENS = 800
"""Tokens an ``llm`` or agent step may write per call (an answer needs far fewer), unless the turn's
generation strategy says otherwise."""
DATA_TOOLS = ("db_query", "db_aggregate")


class CappedModel(ModelWrapper):
    """A model whose calls write at most ``max_tokens`` tokens: the answer step of a turn needs a few
    sentences, and a small model left unbounded can ramble until its context is full."""

    def __init__(self, model: Model, max_tokens: int, temperature: float | None = None) -> None:
        self.inner = model
        self.max_tokens = max_tokens
        self.temperature = temperature

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        limit = self.max_tokens if request.max_tokens is None else min(request.max_tokens, self.max_tokens)
        temperature = request.temperature if self.temperature is None else self.temperature
        async for chunk in self.inner.stream(replace(request, max_tokens=limit, temperature=temperature)):
            yield chunk


@dataclass(frozen=True)
class Read:
    """What one data step read.

    Attributes:
        step_id: the step.
        tool: ``db_query`` or ``db_aggregate``.
        args: its arguments as rendered when it ran.
        columns: the result's columns.
        rows: the rows (as the step's output holds them).
        truncated: the query had more rows than the row limit.
        clipped: the size limit cut the rows short.
        definitions: the semantic layer's metrics a structured query used, with their definitions.
        grains: the measures a structured query computed at their own grain, with why.
    """

    step_id: str
    tool: str
    args: dict[str, JsonValue]
    columns: list[str]
    rows: list[list[JsonValue]]
    truncated: bool = False
    clipped: bool = False
    definitions: dict[str, str] = field(default_factory=dict)
    grains: dict[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    """How a turn's formula run ended and what it produced.

    Attributes:
        status: the run's status (``completed``, ``failed``, ``cancelled``), or ``timeout`` / ``waiting``
            (stopped: a turn cannot wait) / ``error`` (it could not start).
        answer_step: the formula's last step (its output is the answer).
        answer: the answer's text ("" when the last step did not complete).
        result: the rows the answer rests on.
        steps: every step's final state.
        step_events: the run's step transitions, in order (retries included).
        agent_results: the tool results inside agent steps, in order.
    """

    run_id: str | None
    status: str
    reason: str
    plan: Plan
    answer_step: str | None = None
    answer: str = ""
    result: TurnResult = field(default_factory=TurnResult)
    reads: list[Read] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)
    step_events: list[StepStateEvent] = field(default_factory=list)
    agent_results: list[ToolResultEvent] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        return self.status == "completed"


def last_step(plan: Plan) -> str | None:
    """The step whose output is the answer: the last one (in plan order) that no other step needs."""
    needed = {need for step in plan.steps for need in step.needs}
    parents = {step.parent for step in plan.steps if step.parent is not None}
    sinks = [step.id for step in plan.steps if step.id not in needed and step.id not in parents]
    return sinks[-1] if sinks else (plan.steps[-1].id if plan.steps else None)


def _ancestors(plan: Plan, step_id: str) -> list[str]:
    index = plan.index
    seen: list[str] = []
    stack = [step_id]
    while stack:
        current = stack.pop()
        if current in seen or current not in index:
            continue
        seen.append(current)
        stack.extend(index[current].needs)
    return seen


def table_text(columns: list[str], rows: list[list[JsonValue]], limit: int = 50) -> str:
    """Rows as ``a | b`` lines under a header (the answer when the last step is a data step, or the rows a
    small model's unusable sentence is replaced with), fractions rounded as read (``shown_cell``)."""
    return shown_table(columns, rows, limit)


def _answer(output: dict[str, JsonValue] | None, executor: object) -> str:
    if not output:
        return ""
    if isinstance(executor, LlmExecutor) and isinstance(output.get("text"), str):
        return str(output["text"])
    if isinstance(executor, AgentExecutor) and isinstance(output.get("answer"), str):
        return str(output["answer"])
    columns, rows = output.get("columns"), output.get("rows")
    if isinstance(columns, list) and isinstance(rows, list):
        return table_text([str(c) for c in columns], [r for r in rows if isinstance(r, list)])
    for key in ("answer", "text", "value"):
        if isinstance(output.get(key), str):
            return str(output[key])
    return json.dumps(output, ensure_ascii=False)


def _read(step_id: str, executor: ToolExecutor, output: dict[str, JsonValue], args: JsonValue) -> Read | None:
    columns, rows = output.get("columns"), output.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list):
        return None
    return Read(
        step_id,
        executor.name,
        dict(args) if isinstance(args, dict) else {},
        [str(column) for column in columns],
        [list(row) for row in rows if isinstance(row, list)],
        bool(output.get("truncated")),
        bool(output.get("clipped")),
        _texts(output.get("definitions")),
        _texts(output.get("grains")),
    )


def _texts(value: JsonValue) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class PlanRunner:
    """Runs turns' formulas against one store, with one scope's tools.

    Args:
        store: where the runs live.
        scope: the data the steps read.
        model: the model of ``llm`` and agent steps (capped to a few hundred tokens a call).
        step_tokens: what one call of those steps may write (the strategy's ``step_tokens``).
        timeout: seconds a run may take.
        prices: what each model's tokens cost (the runs' costs).
    """

    def __init__(
        self,
        store: Store,
        scope: Scope,
        model: Model,
        *,
        step_tokens: int = STEP_TOKENS,
        timeout: float = RUN_TIMEOUT_S,
        prices: Mapping[str, ModelPrice] | None = None,
    ):
        self.store = store
        self.scope = scope
        self.base = model
        self.tokens = step_tokens
        self.timeout = timeout
        self.prices = dict(prices or {})

    def _runner(self, temperature: float | None) -> FormulaRunner:
        model = CappedModel(self.base, self.tokens, temperature)
        return FormulaRunner(
            self.store,
            self.scope.registry,
            model=model,
            concurrency=4,
            poll_interval=0.2,
            prices=self.prices,
        )

    def _child(self, parent_run_id: str) -> str | None:
        page = self.store.list_runs(parent_run_id=parent_run_id, kind="formula", limit=1)
        return page.items[0].id if page.items else None

    async def run(
        self,
        plan: Plan,
        parent_run_id: str,
        owner: str,
        *,
        temperature: float | None = None,
        budget: Budget | None = None,
    ) -> RunOutcome:
        """Run ``plan`` as a child of ``parent_run_id`` until it ends, fails, or runs out of time.

        ``temperature`` is the sampling temperature of its ``llm`` and agent steps (None: the model's own);
        ``budget``, the run's (what is left of the turn's), or None.
        """
        runner = self._runner(temperature)
        known_before = self._child(parent_run_id)
        limits = budget if budget is not None else Budget()
        try:
            async with asyncio.timeout(self.timeout):
                result = await runner.start(
                    plan,
                    owner=owner,
                    parent_run_id=parent_run_id,
                    max_tokens=limits.max_tokens,
                    max_cost=limits.max_cost,
                )
        except TimeoutError:
            run_id = self._new_child(parent_run_id, known_before)
            self._cancel(runner, run_id, f"the workflow ran past {self.timeout:g} s")
            return RunOutcome(
                run_id, "timeout", f"the workflow ran past {self.timeout:g} s and was stopped", plan
            )
        except asyncio.CancelledError:
            self._cancel(runner, self._new_child(parent_run_id, known_before), "the turn was cancelled")
            raise
        except PlangateError as exc:
            return RunOutcome(None, "error", f"the workflow could not start: {exc}", plan)
        if result.status == "waiting":
            self._cancel(runner, result.run_id, "a turn cannot wait")
            return self._outcome(result, plan, "waiting", f"the workflow stopped waiting: {result.reason}")
        return self._outcome(result, plan, result.status, result.reason)

    def _new_child(self, parent_run_id: str, before: str | None) -> str | None:
        found = self._child(parent_run_id)
        return found if found != before else None

    def _cancel(self, runner: FormulaRunner, run_id: str | None, reason: str) -> None:
        if run_id is None:
            return
        with contextlib.suppress(PlangateError):
            if self.store.get_run(run_id).status not in TERMINAL_STATUSES:
                runner.cancel(run_id, reason)

    def _outcome(self, result: FormulaResult, plan: Plan, status: str, reason: str) -> RunOutcome:
        outcome = RunOutcome(result.run_id, status, reason, plan)
        events = self.store.events(result.run_id)
        outcome.step_events = [event for event in events if isinstance(event, StepStateEvent)]
        outcome.steps = {sid: view.status for sid, view in result.steps.items()}
        for step in plan.steps:
            view = result.steps.get(step.id)
            executor = step.executor
            if view is None or view.status != "complete" or not isinstance(executor, ToolExecutor):
                continue
            if executor.name in DATA_TOOLS and view.output is not None:
                read = _read(step.id, executor, view.output, executor.args)
                if read is not None:
                    outcome.reads.append(read)
        outcome.agent_results = self._agent_results(result.run_id)
        final = last_step(plan)
        outcome.answer_step = final
        if final is not None:
            view = result.steps.get(final)
            if view is not None and view.status == "complete":
                outcome.answer = _answer(view.output, plan.index[final].executor)
            wanted = set(_ancestors(plan, final))
            basis = [read for read in outcome.reads if read.step_id in wanted] or outcome.reads
            if basis:
                outcome.result = TurnResult(columns=basis[-1].columns, rows=basis[-1].rows)
        return outcome

    def _agent_results(self, run_id: str) -> list[ToolResultEvent]:
        found: list[ToolResultEvent] = []
        for child in self.store.list_runs(parent_run_id=run_id, kind="agent", limit=100).items:
            found += [e for e in self.store.events(child.id) if isinstance(e, ToolResultEvent)]
        return found


__all__ = [
    "RUN_TIMEOUT_S",
    "STEP_TOKENS",
    "CappedModel",
    "PlanRunner",
    "Read",
    "RunOutcome",
    "last_step",
    "shown_cell",
    "table_text",
]
