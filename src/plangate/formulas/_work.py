"""The work of a launched step: its executor's call, bounded by the step's timeout.

For: ``step_work``, which the scheduler awaits in a task of its own once the step's ``running`` (or
``waiting``) state is committed: a tool, an llm, an agent or a sub-formula; a fan-out's sub-runs; a write
under its intent's key; or, after a restart, the settling of a write whose receipt was never committed.
While it works, ``working_step`` says which step of which run the task works for (what a replay's recorded
tools and model play back by: steps work at once, so the order of calls says nothing). Not for: the
transitions the outcome leads to (``_scheduler.py``) or what each executor does (``_executors.py``,
``_agent_steps.py``, ``_writes.py``).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar

from pydantic import JsonValue

from plangate.errors import FormulaError, StoreError
from plangate.formulas import _writes
from plangate.formulas._budget import RunBudget, RunPrices
from plangate.formulas._executors import (
    StepOutcome,
    fan_out,
    fanout_ids,
    run_llm,
    run_subformula,
    run_tool,
    subformula_run_id,
)
from plangate.formulas._runcontext import RunHost
from plangate.formulas._runstate import RunState
from plangate.formulas.plan import AgentExecutor, CookedStep, FormulaExecutor, LlmExecutor, ToolExecutor
from plangate.runs.telemetry import RunTrace

_WORKING: ContextVar[tuple[str, str, int] | None] = ContextVar("plangate_working_step", default=None)


def working_step() -> tuple[str, str, int] | None:
    """``(run id, step id, attempt)`` of the formula step whose work runs in this task (and in what it
    awaits: an agent step's agent, a tool's thread), or None outside a step's work."""
    return _WORKING.get()


async def step_work(
    host: RunHost,
    run_id: str,
    owner: str,
    always_execute: bool,
    state: RunState,
    step: CookedStep,
    what: str,
    trace: RunTrace | None = None,
    budget: RunBudget | None = None,
) -> StepOutcome:
    """Run ``what`` (``work``, ``fanout``, ``subrun``, ``write`` or ``settle``) for ``step`` of ``run_id``.

    Sub-runs inherit the run's ``always_execute``; the ids they get are those the step's state committed.
    ``trace``: the run's spans (None when tracing is off), where an ``llm`` step's call goes. ``budget``:
    the run's (None: it has none), checked before an ``llm`` step's call and handed down, as what is left of
    it, to the agent or sub-runs a step starts.
    """
    run = state.steps[step.id]
    # Each step's work is a task of its own (the scheduler's): this stays with it and what it awaits.
    _WORKING.set((run_id, step.id, run.attempt))
    recorded = run.wait.get("run_ids")
    existing = [r for r in recorded if isinstance(r, str)] if isinstance(recorded, list) else []

    async def sub(
        formula: str, vars: dict[str, JsonValue], child: str
    ) -> tuple[str, str, dict[str, JsonValue]]:
        return await host.sub_run(
            run_id, owner, formula, vars, child, always_execute=always_execute, budget=budget
        )

    if what == "fanout":
        ids = fanout_ids(run_id, step, run.attempt, run.output or {}, existing)
        return await fan_out(step, dict(run.output or {}), sub, ids)
    if what in {"write", "settle"}:
        await host.leases.confirm_async(run_id)  # a process that lost the run never writes for it
    if what == "write":
        tool = host.tools.get(str(run.wait.get("tool")))
        arguments = run.wait.get("arguments")
        if not isinstance(arguments, dict):  # what _writes.start committed is always an object
            raise StoreError(
                f"run {run_id!r}, step {step.id!r}: the write's stored arguments are not an object"
            )
        return await _writes.run_write(tool, arguments, str(run.wait.get("key")), step.timeout)
    if what == "settle":

        async def start(key: str, tool: str, digest: str) -> None:
            # Approved, never started: its intent commits now, before the call, as it would have.
            with host.leases.transaction(run_id) as tx:
                tx.record_write_intent(key, tool, digest)

        return await _writes.settle(host.store, host.tools, run.wait, step.timeout, start)
    executor, variables, outputs = step.executor, state.plan.vars, state.outputs()
    if isinstance(executor, FormulaExecutor):
        child = existing[0] if existing else subformula_run_id(run_id, step.id, max(run.attempt, 1))
        work = run_subformula(step, executor, sub, variables, outputs, child)
    elif isinstance(executor, AgentExecutor):
        prices = RunPrices(state, host.prices)
        work = host.agent_steps.run(
            step, executor, run_id, owner, variables, outputs, existing, budget=budget, prices=prices.table()
        )
    elif isinstance(executor, LlmExecutor):
        work = run_llm(
            step,
            executor,
            host.model,
            variables,
            outputs,
            price=RunPrices(state, host.prices).of,
            budget=budget,
            trace=trace,
            attempt=run.attempt,
        )
    elif isinstance(executor, ToolExecutor):
        work = run_tool(step, executor, host.tools, variables, outputs)
    else:  # a manual step is completed by a person and never launched
        raise FormulaError(f"step {step.id!r} has no executor: nothing to run", path=step.source)
    if step.timeout is None:
        return await work
    try:
        return await asyncio.wait_for(work, step.timeout)
    except TimeoutError:
        return StepOutcome("failed", reason=f"timed out after {step.timeout}s", run_ids=existing)


__all__ = ["step_work", "working_step"]
