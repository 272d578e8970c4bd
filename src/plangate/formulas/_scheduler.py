"""The scheduling loop of one formula run: readiness, gates, people, concurrency, retries, loops.

For: advancing one run until it ends or nothing can move without a person. Each pass gathers the
transitions it decided (step states, gate reasons, interactions opened) and commits them in ONE
transaction before starting any work they allow; a step's work runs only after its ``running`` state is
committed. Readiness is incremental (a step becomes a candidate when its last need completes), so a pass
costs what changed, not the size of the plan. Not for: what an executor does (``_executors.py``) or the
public API (``runtime.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from pydantic import JsonValue

from plangate.conditions import ConditionContext, ConditionSyntaxError, compile_condition
from plangate.events import (
    GateEvent,
    InteractionKind,
    InteractionOpenedEvent,
    StatusEvent,
    StepStateEvent,
    StepStatus,
)
from plangate.formulas._executors import StepOutcome, fan_out, run_llm, run_subformula, run_tool
from plangate.formulas._rungraph import PlanGraph
from plangate.formulas._runstate import SNAPSHOT_VERSION, RunState, StepRun
from plangate.formulas.plan import (
    AgentExecutor,
    FormulaExecutor,
    HumanExecutor,
    LlmExecutor,
    ManualExecutor,
    Plan,
    PlanStep,
    ToolExecutor,
)
from plangate.formulas.templates import to_text
from plangate.store import RunStatus, Transaction

if TYPE_CHECKING:
    from plangate.formulas.runtime import FormulaRunner

_Op = Callable[[Transaction], None]
_QUEUED_QUESTION = "waiting for the open question to be answered first"
_NO_SLOT = "waiting for a free slot"


class Scheduler:
    """Advances one run; create one per ``start`` / ``resume`` call."""

    def __init__(self, runner: FormulaRunner, run_id: str, state: RunState, owner: str) -> None:
        self.runner = runner
        self.run_id = run_id
        self.state = state
        self.owner = owner
        self.graph = PlanGraph(state.plan)
        self.unmet: dict[str, int] = {}
        self.candidates: dict[str, None] = {}
        self.unfinished: set[str] = set()
        self.waiting: set[str] = set()
        self.queued: dict[str, None] = {}  # ready steps waiting for a free slot, in arrival order
        self.tasks: dict[asyncio.Task[StepOutcome], str] = {}
        self.to_launch: list[tuple[str, str]] = []  # (step id, what: work | fanout | subrun)
        self.ops: list[_Op] = []
        self.plan_changed = False
        self.since_checkpoint = 0
        self.gate_reasons: dict[str, str] = {}
        self.gated = [s.id for s in state.plan.steps if s.gate is not None and s.gate.condition]
        self.open_interaction = bool(runner.store.list_interactions(status="open", run_id=run_id))

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, *, resumed: bool) -> tuple[RunStatus, str]:
        self._index()
        if resumed:
            self._recover()
        try:
            while True:
                self._schedule()
                ended = self._ending()
                if ended is not None:
                    return self._finish(*ended)
                self._flush()
                self._launch()
                if self.tasks:
                    await self._wait_tasks()
                    continue
                delay = self._next_wake()
                if delay is None:
                    return self._suspend()
                await asyncio.sleep(delay)
        except BaseException:
            for task in self.tasks:
                task.cancel()
            raise

    def _index(self) -> None:
        steps = self.state.steps
        self.unfinished = {sid for sid, run in steps.items() if not run.terminal}
        self.waiting = {sid for sid, run in steps.items() if run.status == "waiting"}
        for step in self.state.plan.steps:
            self.unmet[step.id] = sum(1 for n in step.needs if steps[n].status != "complete")
        for step in self.state.plan.steps:
            run = steps[step.id]
            if run.terminal:
                continue
            if any(steps[n].status in {"failed", "skipped", "cancelled"} for n in step.needs):
                self._skip(step.id, self._blocked_reason(step))
            elif self.unmet[step.id] == 0:
                self.candidates[step.id] = None

    def _recover(self) -> None:
        """After a restart: re-run interrupted work, re-attach sub-runs, re-check containers."""
        self._emit_status("resumed", "resumed from the last committed transition")
        for run in list(self.state.steps.values()):
            kind = run.wait.get("kind")
            if run.status == "running" and not self._is_container(run.id):
                self._transition(run, "ready", "interrupted before it finished; running it again")
            elif run.status == "waiting" and kind in {"subrun", "fanout"}:
                self.to_launch.append((run.id, str(kind)))
            elif run.status in {"running", "waiting"} and kind == "children":
                self._check_container(run.id)

    def _ending(self) -> tuple[RunStatus, str] | None:
        if self.tasks or self.to_launch or self.unfinished:
            return None
        failed = [s.id for s in self.state.steps.values() if s.status == "failed"]
        if failed:
            return "failed", f"failed steps: {', '.join(failed)}"
        return "completed", f"all {len(self.state.steps)} steps finished"

    # -- committing ---------------------------------------------------------------------------------------

    def _emit(self, event: StepStateEvent | GateEvent | StatusEvent) -> None:
        self.ops.append(lambda tx: self._append(tx, event))
        if isinstance(event, StepStateEvent):
            self.state.apply(event)
            self._track(event.step_id)

    def _track(self, step_id: str) -> None:
        """Keep the unfinished and waiting sets current, so each pass costs what changed."""
        run = self.state.steps[step_id]
        if run.terminal:
            self.unfinished.discard(step_id)
        else:
            self.unfinished.add(step_id)
        if run.status == "waiting":
            self.waiting.add(step_id)
        else:
            self.waiting.discard(step_id)

    def _append(self, tx: Transaction, event: Any) -> None:
        tx.append(event)

    def _emit_status(self, code: str, text: str) -> None:
        self._emit(StatusEvent(stage="run", code=code, text=text))

    def _flush(
        self,
        *,
        status: RunStatus | None = "running",
        outcome: dict[str, JsonValue] | None = None,
        checkpoint: bool = False,
    ) -> None:
        if not self.ops and not checkpoint and not self.plan_changed:
            return
        self.since_checkpoint += len(self.ops)
        snapshot = checkpoint or self.plan_changed or self.since_checkpoint >= self.runner.checkpoint_every
        with self.runner.store.transaction(self.run_id) as tx:
            for op in self.ops:
                op(tx)
            if status is not None and (tx.run.status != status or outcome is not None):
                tx.set_status(status, outcome=outcome)
            if snapshot:
                self.state.seq = tx.events[-1].seq if tx.events else tx.run.last_seq
                tx.set_snapshot(self.state.to_snapshot(), version=SNAPSHOT_VERSION)
        self.ops.clear()
        if snapshot:
            self.since_checkpoint = 0
            self.plan_changed = False

    def _finish(self, status: RunStatus, reason: str) -> tuple[RunStatus, str]:
        self._emit_status(status, reason)
        self._flush(status=status, outcome={"status": status, "reason": reason}, checkpoint=True)
        return status, reason

    def _suspend(self) -> tuple[RunStatus, str]:
        waiting = [
            f"{s.id} ({s.reason})" for s in self.state.steps.values() if s.status in {"waiting", "ready"}
        ]
        reason = "; ".join(waiting) if waiting else "nothing can move"
        self._emit_status("waiting", reason)
        self._flush(status="waiting", checkpoint=True)
        return "waiting", reason

    # -- transitions --------------------------------------------------------------------------------------

    def _transition(
        self,
        run: StepRun,
        status: StepStatus,
        reason: str = "",
        *,
        output: dict[str, JsonValue] | None = None,
        wait: dict[str, JsonValue] | None = None,
        attempt: int | None = None,
    ) -> None:
        self._emit(
            StepStateEvent(
                step_id=run.id,
                status=status,
                reason=reason,
                attempt=run.attempt if attempt is None else attempt,
                output=output,
                wait=wait,
            )
        )
        if status == "complete":
            self._completed(run.id)
        elif status in {"failed", "skipped", "cancelled"}:
            self._ended_badly(run.id)

    def _completed(self, step_id: str) -> None:
        for dependent in self.graph.dependents.get(step_id, ()):
            self.unmet[dependent] -= 1
            if self.unmet[dependent] == 0 and not self.state.steps[dependent].terminal:
                self.candidates[dependent] = None
        self._after_terminal(step_id)

    def _ended_badly(self, step_id: str) -> None:
        for other in self.graph.downstream(step_id):
            run = self.state.steps[other]
            if not run.terminal and run.status != "running":
                self._skip(other, f"needs {step_id!r}, which {self.state.steps[step_id].status}")
        self._after_terminal(step_id)

    def _skip(self, step_id: str, reason: str) -> None:
        run = self.state.steps[step_id]
        if run.terminal:
            return
        self._emit(StepStateEvent(step_id=step_id, status="skipped", reason=reason, attempt=run.attempt))
        self.candidates.pop(step_id, None)
        self._after_terminal(step_id)

    def _after_terminal(self, step_id: str) -> None:
        parent = self.graph.steps[step_id].parent
        if parent is not None:
            self._check_container(parent)
            for watcher in self.graph.watchers.get(parent, ()):
                self.candidates[watcher] = None
        self.gate_reasons.pop(step_id, None)
        # a gate may name any step: every gate that is holding a step gets a new look
        for sid in self.gated:
            if self.state.steps[sid].status == "waiting" and self.state.steps[sid].wait.get("kind") == "gate":
                self.candidates[sid] = None

    # -- readiness ----------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        while self.candidates:
            batch = list(self.candidates)
            self.candidates.clear()
            for step_id in batch:
                self._consider(step_id)

    def _consider(self, step_id: str) -> None:
        run = self.state.steps[step_id]
        step = self.graph.steps[step_id]
        if run.terminal or run.status == "running" or self.unmet.get(step_id, 0) > 0:
            return
        if run.status == "waiting" and run.wait.get("kind") in {
            "human",
            "manual",
            "subrun",
            "fanout",
            "children",
        }:
            return
        if not self._gate_open(step, run):
            return
        if self._running_count() >= self.runner.concurrency:
            if run.status != "ready" or run.reason != _NO_SLOT:
                self._transition(run, "ready", _NO_SLOT)
            if step_id not in self.queued:
                self.queued[step_id] = None
            return
        self.queued.pop(step_id, None)
        self._start(step, run)

    def _running_count(self) -> int:
        return len(self.tasks) + sum(1 for _, what in self.to_launch if what == "work")

    def _gate_open(self, step: PlanStep, run: StepRun) -> bool:
        gate = step.gate
        if step.waits_for is not None and step.waits_for.mode == "children-of":
            target = step.waits_for.step or ""
            kids = self.graph.children.get(target, [])
            # a step without nested children has its fan-out sub-runs as children, and ends after them
            settled = (
                all(self.state.steps[k].terminal for k in kids) if kids else self.state.steps[target].terminal
            )
            if not settled:
                self._hold(run, "waits_for", f"waiting for the children of {target!r}")
                return False
        if gate is None or run.wait.get("approved"):
            return True
        now = self.runner.clock()
        if gate.timer:
            until = run.wait.get("until")
            if not isinstance(until, int | float):
                self._hold(run, "timer", f"timer: waiting {gate.timer}s", until=now + gate.timer)
                return False
            if now < until:
                return False
        if gate.condition and not self._condition_holds(step, run, now):
            return False
        if gate.human:
            self._ask(step, run, "approval", gate.human, wait_kind="gate_human")
            return False
        return True

    def _condition_holds(self, step: PlanStep, run: StepRun, now: float) -> bool:
        assert step.gate is not None and step.gate.condition
        try:
            result = compile_condition(step.gate.condition).evaluate(self._context(step.id))
        except ConditionSyntaxError as exc:  # check() refuses these; a hand-built plan may not have run it
            self._transition(run, "failed", f"gate condition: {exc}")
            return False
        reason = result.reason
        if self.gate_reasons.get(step.id) != reason:
            self.gate_reasons[step.id] = reason
            self._emit(GateEvent(step_id=step.id, satisfied=result.satisfied, reason=reason))
        if result.satisfied:
            return True
        since = run.wait.get("since") if run.wait.get("kind") == "gate" else None
        since = since if isinstance(since, int | float) else now
        timeout = step.gate.timeout
        if timeout is not None and now - since >= timeout:
            self._transition(run, "failed", f"gate timed out after {timeout}s: {reason}")
            return False
        wait: dict[str, JsonValue] = {"since": since}
        if timeout is not None:
            wait["deadline"] = since + timeout
        self._hold(run, "gate", f"gate: {reason}", **wait)
        return False

    def _context(self, current: str | None, extra: dict[str, Any] | None = None) -> ConditionContext:
        steps = self.state.condition_steps()
        if extra:
            steps.update(extra)
        # typed, so that ``vars.n > 2`` compares numbers (cook evaluates its conditions the same way)
        variables = cast(Mapping[str, str], self.state.plan.vars)
        return ConditionContext(
            steps=steps, current_step=current, vars=variables, env=self.runner.env, root=self.runner.root
        )

    def _hold(self, run: StepRun, kind: str, reason: str, **details: JsonValue) -> None:
        wait: dict[str, JsonValue] = {"kind": kind, **details}
        if run.status == "waiting" and run.reason == reason and run.wait.get("kind") == kind:
            return
        self._transition(run, "waiting", reason, wait=wait)

    # -- starting work ------------------------------------------------------------------------------------

    def _start(self, step: PlanStep, run: StepRun) -> None:
        executor = step.executor
        if isinstance(executor, HumanExecutor):
            kind: InteractionKind = "approval" if executor.kind == "approve" else "ask_user"
            self._ask(step, run, kind, executor.prompt, wait_kind="human", attempt=run.attempt + 1)
            return
        if isinstance(executor, ManualExecutor):
            if self._is_container(step.id):
                self._transition(
                    run, "running", "running its children", attempt=run.attempt + 1, wait={"kind": "children"}
                )
                self._check_container(step.id)
            else:
                self._transition(
                    run,
                    "waiting",
                    f"waiting for someone to complete it (plangate complete RUN {step.id} --output JSON)",
                    wait={"kind": "manual"},
                )
            return
        if not isinstance(executor, ToolExecutor | FormulaExecutor | AgentExecutor | LlmExecutor):
            self._transition(run, "failed", f"{executor.type} steps cannot run here", attempt=run.attempt + 1)
            return
        self._transition(run, "running", "", attempt=run.attempt + 1)
        self.to_launch.append((step.id, "work"))

    def _ask(
        self,
        step: PlanStep,
        run: StepRun,
        interaction_kind: InteractionKind,
        prompt: str,
        *,
        wait_kind: str,
        attempt: int | None = None,
    ) -> None:
        """Open the run's interaction for ``step`` (one at a time: others stay ready until it is answered)."""
        if self.open_interaction:
            if run.reason != _QUEUED_QUESTION:
                self._transition(run, "ready", _QUEUED_QUESTION)
            return
        self.open_interaction = True
        text = self._render_prompt(step, prompt)
        placeholder = StepStateEvent(
            step_id=step.id,
            status="waiting",
            reason=f"waiting for a person: {text}",
            attempt=run.attempt if attempt is None else attempt,
            wait={"kind": wait_kind},
        )
        self.state.apply(placeholder)
        self._track(step.id)

        def open_it(tx: Transaction) -> None:
            interaction = tx.open_interaction(interaction_kind, text, step_id=step.id)
            event = placeholder.model_copy(
                update={"wait": {"kind": wait_kind, "interaction_id": interaction.id}}
            )
            tx.append(event)
            tx.append(
                InteractionOpenedEvent(
                    interaction_id=interaction.id, kind=interaction.kind, prompt=text, step_id=step.id
                )
            )
            self.state.apply(event)

        self.ops.append(open_it)

    def _render_prompt(self, step: PlanStep, prompt: str) -> str:
        from plangate.formulas.templates import render_runtime

        try:
            rendered = render_runtime(
                prompt, self.state.plan.vars, self.state.outputs(), path=f"{step.id}.prompt"
            )
        except Exception:  # a prompt that cannot be filled is still worth showing as written
            return prompt
        return rendered if isinstance(rendered, str) else to_text(rendered)

    def _launch(self) -> None:
        for step_id, what in self.to_launch:
            task = asyncio.ensure_future(self._work(step_id, what))
            self.tasks[task] = step_id
        self.to_launch.clear()

    async def _work(self, step_id: str, what: str) -> StepOutcome:
        step = self.graph.steps[step_id]
        run = self.state.steps[step_id]
        plan = self.state.plan
        existing = [r for r in run.wait.get("run_ids", []) or [] if isinstance(r, str)]  # type: ignore[union-attr]
        sub = self._sub_runner(step_id)
        if what == "fanout":
            return await fan_out(step, dict(run.output or {}), sub, existing)
        executor = step.executor
        outputs = self.state.outputs()
        if isinstance(executor, FormulaExecutor):
            work = run_subformula(step, executor, sub, plan.vars, outputs, existing)
        elif isinstance(executor, AgentExecutor):
            agents = self.runner.agent_steps
            work = agents.run(step, executor, self.run_id, self.owner, plan.vars, outputs, existing)
        elif isinstance(executor, LlmExecutor):
            work = run_llm(step, executor, self.runner.model, plan.vars, outputs)
        else:
            assert isinstance(executor, ToolExecutor)
            work = run_tool(step, executor, self.runner.tools, plan.vars, outputs)
        if step.timeout is None:
            return await work
        try:
            return await asyncio.wait_for(work, step.timeout)
        except TimeoutError:
            return StepOutcome("failed", reason=f"timed out after {step.timeout}s")

    def _sub_runner(self, step_id: str) -> Any:
        async def sub(
            formula: str, vars: dict[str, JsonValue], run_id: str | None
        ) -> tuple[str, str, dict[str, JsonValue]]:
            return await self.runner.sub_run(self.run_id, self.owner, formula, vars, run_id)

        return sub

    # -- finishing work -----------------------------------------------------------------------------------

    async def _wait_tasks(self) -> None:
        delay = self._next_wake()
        done, _ = await asyncio.wait(self.tasks, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            step_id = self.tasks.pop(task)
            exc = task.exception()
            outcome = StepOutcome("failed", reason=f"internal error: {exc}") if exc else task.result()
            self._finished(step_id, outcome)
        free = self.runner.concurrency - self._running_count()
        for step_id in list(self.queued)[: max(free, 0)]:
            self.candidates[step_id] = None

    def _finished(self, step_id: str, outcome: StepOutcome) -> None:
        run = self.state.steps[step_id]
        step = self.graph.steps[step_id]
        if run.terminal:  # cancelled meanwhile
            return
        if outcome.status == "waiting":
            self._transition(
                run,
                "waiting",
                outcome.reason,
                output=outcome.output or None,
                wait={
                    "kind": "fanout" if run.wait.get("kind") == "fanout" else "subrun",
                    "run_ids": list(outcome.run_ids),
                },
            )
            return
        if outcome.status == "failed":
            if run.attempt <= step.retries:
                self._transition(run, "ready", f"attempt {run.attempt} failed ({outcome.reason}); retrying")
                self.candidates[step_id] = None
            else:
                self._transition(run, "failed", outcome.reason, output=outcome.output or None)
            return
        if step.on_complete is not None and run.wait.get("kind") != "fanout":
            self._transition(
                run, "waiting", "fanning out", output=outcome.output, wait={"kind": "fanout", "run_ids": []}
            )
            self.to_launch.append((step_id, "fanout"))
            return
        if self._is_container(step_id):
            self._transition(
                run, "running", "waiting for its children", output=outcome.output, wait={"kind": "children"}
            )
            self._check_container(step_id)
            return
        self._transition(run, "complete", outcome.reason, output=outcome.output)

    # -- containers and loops -----------------------------------------------------------------------------

    def _is_container(self, step_id: str) -> bool:
        return bool(self.graph.children.get(step_id))

    def _check_container(self, step_id: str) -> None:
        run = self.state.steps[step_id]
        if run.terminal or run.wait.get("kind") != "children":
            return
        kids = [self.state.steps[k] for k in self.graph.children.get(step_id, [])]
        step = self.graph.steps[step_id]
        any_mode = step.waits_for is not None and step.waits_for.mode == "any-children"
        done = [k for k in kids if k.status == "complete"]
        if any_mode and done:
            self._transition(run, "complete", f"{done[0].id} completed", output=run.output)
            return
        if not all(k.terminal for k in kids):
            return
        bad = [k.id for k in kids if k.status != "complete"]
        is_loop = any(loop.id == step_id for loop in self.state.plan.loops)
        if is_loop and not bad and self._next_iteration(step_id):
            return
        if bad and (not any_mode or not done):
            self._transition(run, "failed", f"children did not complete: {', '.join(bad)}", output=run.output)
        else:
            self._transition(run, "complete", f"{len(kids)} children completed", output=run.output)

    def _next_iteration(self, loop_id: str) -> bool:
        """After an iteration of an until-loop: add the next one (True) or let the loop end (False)."""
        from plangate.formulas.cook import expand_iteration

        loop = self.state.plan.loop(loop_id)
        n = self.state.iterations.get(loop_id, 1)
        aliases = {}
        steps = self.state.condition_steps()
        for body in loop.body:
            sid = loop.step_id(n, body.id)
            if sid in steps:
                aliases[body.id] = steps[sid]
        result = compile_condition(loop.until).evaluate(self._context(loop_id, aliases))
        self._emit(GateEvent(step_id=loop_id, satisfied=result.satisfied, reason=f"until: {result.reason}"))
        if result.satisfied:
            return False
        run = self.state.steps[loop_id]
        if n >= loop.max:
            self._transition(
                run,
                "failed",
                f"until {loop.until!r} still false after {n} iterations (max {loop.max}): {result.reason}",
            )
            return True
        new_steps = expand_iteration(self.state.plan, loop_id, n + 1)
        self._grow(new_steps)
        self.state.iterations[loop_id] = n + 1
        return True

    def _grow(self, new_steps: list[PlanStep]) -> None:
        plan = self.state.plan
        known = {s.id for s in new_steps}
        data = plan.to_dict()
        data["steps"] = [s for s in data["steps"] if s["id"] not in known] + [
            s.model_dump(mode="json", by_alias=True) for s in new_steps
        ]
        self.state.plan = Plan.from_dict(data)
        self.graph.add(new_steps)
        self.gated.extend(s.id for s in new_steps if s.gate is not None and s.gate.condition)
        for step in new_steps:
            self.state.steps.setdefault(step.id, StepRun(step.id))
            self._track(step.id)
            self.unmet[step.id] = sum(1 for n in step.needs if self.state.steps[n].status != "complete")
            if any(self.state.steps[n].status in {"failed", "skipped", "cancelled"} for n in step.needs):
                self._skip(step.id, self._blocked_reason(step))
            elif self.unmet[step.id] == 0:
                self.candidates[step.id] = None
        self.plan_changed = True

    # -- waking up ----------------------------------------------------------------------------------------

    def _next_wake(self) -> float | None:
        now = self.runner.clock()
        deadlines = []
        polling = False
        for step_id in self.waiting:
            run = self.state.steps[step_id]
            kind = run.wait.get("kind")
            for key in ("until", "deadline"):
                value = run.wait.get(key)
                if isinstance(value, int | float):
                    deadlines.append(value)
            if kind == "gate":
                polling = True  # a condition may read files or the environment: look again now and then
        if not deadlines and not polling:
            return None
        for step_id in self.waiting:
            if self.state.steps[step_id].wait.get("kind") in {"gate", "timer"}:
                self.candidates[step_id] = None
        if not deadlines:
            return self.runner.poll_interval if self.tasks else None
        return max(0.0, min(min(deadlines) - now, self.runner.poll_interval))

    @staticmethod
    def _blocked_reason(step: PlanStep) -> str:
        return f"a step it needs did not complete ({', '.join(step.needs)})"


__all__ = ["Scheduler"]
