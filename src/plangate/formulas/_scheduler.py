"""The scheduling loop of one formula run: readiness, gates, people, concurrency, retries, loops.

For: advancing one run until it ends or nothing can move without a person. Each pass gathers the
transitions it decided (step states, gate reasons, interactions opened), for every step whose work ended
since the last pass, and commits them in ONE transaction (``_commits.py``) before starting any work they
allow; a step's work runs only after its ``running`` state is committed. A pass costs what changed, not the
size of the plan: a step becomes a candidate when its last need completes; a held gate is looked at again
when a step its condition reads moves on (``PlanGraph.gates_reading``) or time falls due (``Wakeups``);
conditions read step states that each transition keeps current (``RunState.condition_steps``). A lone tool
step, when nothing else can happen while it works, is worked in the loop's own task. Not for: what a step's
work does (``_work.py``, ``_executors.py``, ``_writes.py``) or the public API (``runtime.py``). It
reads the runner through ``RunHost`` and its phases read the run through ``RunContext`` (``_runcontext.py``),
so imports go one way: ``runtime`` → this module → the phases.

A person's answer reaches a live scheduler through ``answer`` (it commits between two passes, so the
scheduler's state never goes stale and no running step is interrupted), and a sub-run answered while it
was suspended is continued through ``poke`` on its parent: only the branch that waited moves on. Every
commit is fenced by the run's lease (its generation) and checks that nobody ended the run meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping
from typing import Any, cast

from pydantic import JsonValue

from plangate._models import built
from plangate.conditions import ConditionContext, StepState
from plangate.errors import InteractionError, RunLeased, StoreError
from plangate.events import (
    InteractionKind,
    InteractionOpenedEvent,
    InteractionTool,
    StatusEvent,
    StepStateEvent,
    StepStatus,
)
from plangate.formulas import _containers, _gates, _writes
from plangate.formulas._agent_steps import step_of_child
from plangate.formulas._answers import answer_step, commit_answer, stored_answers
from plangate.formulas._budget import RunBudget
from plangate.formulas._commits import Commits, RunEnded, began
from plangate.formulas._executors import STOPS_THE_RUN, StepOutcome, fanout_ids, subformula_run_id
from plangate.formulas._outcome import failed_steps_message, formula_outcome, with_steps_usage
from plangate.formulas._runcontext import CommitOp, RunEvent, RunHost
from plangate.formulas._rungraph import PlanGraph
from plangate.formulas._runstate import RunState, StepRun
from plangate.formulas._work import step_work
from plangate.formulas.plan import (
    AgentExecutor,
    CookedStep,
    FormulaExecutor,
    HumanExecutor,
    LlmExecutor,
    ManualExecutor,
    Plan,
    ToolExecutor,
)
from plangate.formulas.templates import to_text
from plangate.interactions import Resolution
from plangate.runs import telemetry
from plangate.store import Interaction, RunRecord, RunStatus, Store, Transaction

_QUEUED_QUESTION = "waiting for the open question to be answered first"
INTERRUPTED = "interrupted before it finished; running it again"
"""Why a step whose work a stopped process cut off is ready again (its attempt recorded no result)."""
_NO_SLOT = "waiting for a free slot"
#: What a step waits for while a person or a sub-run holds it: nothing the scheduler can change by looking.
_HELD = frozenset({"human", "manual", "subrun", "fanout", "children", "consent", "outcome_unknown"})
#: Seconds between two looks for an answer another process left in the store while work runs.
_STORED_ANSWER_POLL = 0.5

logger = logging.getLogger("plangate.formulas")


_Inbox = tuple[Interaction, Resolution, str | None, "asyncio.Future[None]"]


class Scheduler:
    """Advances one run; create one per ``start`` / ``resume`` call. It is the phases' ``RunContext``."""

    def __init__(self, host: RunHost, run: RunRecord, state: RunState, *, asking: bool = True) -> None:
        """``asking``: the run may have an open question (False for a run whose first commit was just
        made: nothing was asked yet)."""
        self.host = host
        self.run_id = run_id = run.id
        self.state = state
        self.owner = run.owner
        # recorded when the run started (``--yes``), and inherited by its sub-runs
        self.always_execute = run.input.get("always_execute") is True
        self.graph = PlanGraph(state.plan)
        self.wakeups = _gates.Wakeups(self.graph, host.clock, host.poll_interval)
        self.unmet: dict[str, int] = {}
        self.candidates: dict[str, None] = {}
        self.unfinished: set[str] = set()
        self.waiting: set[str] = set()
        self.queued: dict[str, None] = {}  # ready steps waiting for a free slot, in arrival order
        self.tasks: dict[asyncio.Task[None], str] = {}  # the work in flight, by step, in launch order
        self.to_launch: list[tuple[str, str]] = []  # (step id, what: work | write | fanout | subrun | settle)
        self.starting = 0  # how many of them take a slot
        self.gate_reasons: dict[str, str] = {}
        self.open_interaction = asking and bool(host.store.list_interactions(status="open", run_id=run_id))
        self.asking_later: dict[str, None] = {}  # steps whose question waits for the open one
        self.inbox: list[_Inbox] = []  # answers handed over by ``answer``
        self.poked: set[str] = set()  # steps whose sub-run was answered while their task was in flight
        self.ended: dict[str, StepOutcome] = {}  # the outcomes of work that ended, not yet taken in
        self.stopped: StoreError | RunLeased | None = None  # what stopped a step's work: the store, the lease
        self._woken = False  # ``wake`` was called since the loop last waited
        self._waiter: asyncio.Future[None] | None = None  # what the loop awaits while it waits
        self.trace = telemetry.run_trace(host.store, run_id, "formula", run.name)  # None: tracing is off
        # an llm step's usage, by step, until its next transition carries it (empty: nothing to look up)
        self.step_usage: dict[str, dict[str, JsonValue]] = {}
        # the run's max_tokens / max_cost, checked before its steps' model calls (None: it has none)
        self.budget = RunBudget.of(run, state, host.prices, host.agent_steps.agents, host.store)
        # what the next commit writes (events, and commit callables: an interaction opened), and the commits
        self.commits = Commits(host, run_id, state, self.trace)

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, *, resumed: bool) -> tuple[RunStatus, str]:
        self._index()
        if resumed:
            self._recover()
        try:
            while True:
                self._take_answers()
                self._take_stored_answers()
                self._schedule()
                ended = self._ending()
                if ended is not None:
                    return await self._finish(*ended)
                await self.commits.flush()
                lone = self._lone_work()
                if lone is not None:
                    await self._work_here(lone)
                    continue
                self._launch()
                if self.tasks:
                    await self._wait_tasks()
                    continue
                delay = self.wakeups.next_wake(bool(self.tasks))
                if delay is None:
                    if self._take_stored_answers():
                        continue  # answered by another process a moment before this run would wait
                    return await self._suspend()
                await self._sleep(delay)
                self.candidates.update(dict.fromkeys(self.wakeups.due()))
        except RunEnded as ended:
            self._stop(InteractionError(f"run {self.run_id!r} ended ({ended.status}); nothing changed"))
            return ended.status, f"{ended.status} while it ran"
        except BaseException:
            self._stop(InteractionError(f"run {self.run_id!r} stopped before the answer was applied"))
            raise
        finally:
            # an answer handed over as the run ended is refused, never left waiting
            self._stop(InteractionError(f"run {self.run_id!r} stopped before the answer was applied"))

    def _stop(self, error: Exception) -> None:
        for task in self.tasks:
            task.cancel()
        for *_, future in self.inbox:
            if not future.done():
                future.set_exception(error)
        self.inbox.clear()

    def wake(self) -> None:
        """Have the loop take another pass now (an answer was handed over, a sub-run was answered)."""
        self._woken = True
        self._resolve()

    def _resolve(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _tracked(self, step: CookedStep, what: str) -> None:
        """A step's work, in a task of its own that hands its outcome to the loop when it ends (a done
        callback would reach the loop one turn of the event loop later). The work's coroutine is made here,
        once the task runs: a task cancelled before it started (the run ended first) leaves no coroutine
        unawaited."""
        try:
            outcome = await self._work(step, what)
        except STOPS_THE_RUN as exc:  # the run's record cannot be kept here: the loop stops on it
            self.stopped = exc
            self.wake()
            return
        except BaseException:  # cancelled: the run ends, nothing is taken in
            self._resolve()
            raise
        self.ended[step.id] = outcome
        self._resolve()

    async def _work(self, step: CookedStep, what: str) -> StepOutcome:
        """The step's work; a failure of the runtime's own is the step's failure (``internal error``).

        What stops the run (``STOPS_THE_RUN``: the store failing, the lease lost) is not the step's failure:
        the run stops where its last commit left it, as a crash would, for whoever resumes it (a write whose
        intent committed is then settled, never run blind).
        """
        try:
            return await step_work(
                self.host,
                self.run_id,
                self.owner,
                self.always_execute,
                self.state,
                step,
                what,
                self.trace,
                self.budget,
            )
        except STOPS_THE_RUN:
            raise
        except Exception as exc:
            return StepOutcome("failed", reason=f"internal error: {exc}")

    def _lone_work(self) -> CookedStep | None:
        """The one tool step to start when nothing else can happen while it works (no other work in
        flight, no question open that an answer could close, nothing held that time or a file could
        release): its work may then run in the loop's own task, a turn of the event loop sooner than in a
        task of its own (a chain of steps is this case at every step)."""
        if len(self.to_launch) != 1 or self.tasks or self.open_interaction or self.inbox:
            return None
        step_id, what = self.to_launch[0]
        step = self.graph.steps[step_id]
        if what != "work" or not isinstance(step.executor, ToolExecutor):
            return None
        return step if self.wakeups.next_wake(True) is None else None

    async def _work_here(self, step: CookedStep) -> None:
        """``_lone_work``'s step, worked in this task; its outcome is taken in as a task's would be."""
        self.to_launch.clear()
        self.starting = 0
        self._finished(step.id, await self._work(step, "work"))
        self._freed()

    async def _sleep(self, delay: float | None) -> None:
        """Wait until a task's work ends, ``wake`` is called or ``delay`` seconds pass (None: no limit).

        One future per wait, resolved by the tasks themselves (``_tracked``): not ``asyncio.wait``, which
        hooks a callback onto every running task on every pass.
        """
        if not (self.ended or self._woken):
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(delay, self._resolve) if delay is not None else None
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        self._woken = False

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
            if run.status == "running" and kind == "write":
                self.launch(run.id, "settle")  # its intent is committed: reconcile, never re-run
            elif run.status == "running" and kind == "subrun":
                self.launch(run.id, "subrun")  # its sub-run's id is committed: adopt it
            elif run.status == "running" and not self._is_container(run.id):
                self.transition(run, "ready", INTERRUPTED)
            elif run.status == "waiting" and kind in {"subrun", "fanout"}:
                self.launch(run.id, str(kind))
            elif run.status in {"running", "waiting"} and kind == "children":
                _containers.check(self, run.id)

    def _ending(self) -> tuple[RunStatus, str] | None:
        if self.tasks or self.to_launch or self.unfinished:
            return None
        failed = [(s.id, s.reason) for s in self.state.steps.values() if s.status == "failed"]
        if failed:
            return "failed", failed_steps_message(failed)
        return "completed", f"all {len(self.state.steps)} steps finished"

    # -- the run's context, as the phases see it ----------------------------------------------------------

    @property
    def store(self) -> Store:
        return self.host.store

    def now(self) -> float:
        return self.host.clock()

    def on_commit(self, op: CommitOp) -> None:
        self.commits.ops.append(op)

    def launch(self, step_id: str, what: str) -> None:
        self.to_launch.append((step_id, what))
        if what in {"work", "write"}:  # takes a slot (a fan-out or sub-run waits on runs of its own)
            self.starting += 1

    def emit(self, event: RunEvent) -> None:
        self.commits.ops.append(event)
        if isinstance(event, StepStateEvent):
            self._applied(event)

    def _applied(self, event: StepStateEvent) -> None:
        """Apply a step's transition in memory (it commits with the pass); look again at what it concerns."""
        before = self.state.steps.get(event.step_id)
        moved = before is None or before.status != event.status or event.output is not None
        self.state.apply(event)
        self._track(event.step_id)
        if moved:
            self._look_again(event.step_id)

    def _look_again(self, step_id: str) -> None:
        """The held gates whose condition reads ``step_id`` get a new look (only those: not every gate)."""
        for gated in self.graph.gates_reading(step_id):
            run = self.state.steps[gated]
            if run.status == "waiting" and run.wait.get("kind") == "gate":
                self.candidates[gated] = None

    def _track(self, step_id: str) -> None:
        """Keep the unfinished and waiting sets and the wake-ups current, so each pass costs what changed."""
        run = self.state.steps[step_id]
        if run.terminal:
            self.unfinished.discard(step_id)
        else:
            self.unfinished.add(step_id)
        if run.status == "waiting":
            self.waiting.add(step_id)
        else:
            self.waiting.discard(step_id)
        self.wakeups.track(run)

    # -- committing ---------------------------------------------------------------------------------------

    def _emit_status(self, code: str, text: str) -> None:
        self.emit(StatusEvent(stage="run", code=code, text=text))

    async def _finish(self, status: RunStatus, reason: str) -> tuple[RunStatus, str]:
        ended = formula_outcome("completed" if status == "completed" else "failed", reason)
        ended = with_steps_usage(ended, self.host.store, self.run_id, self.state)
        if status == "failed" and self.budget is not None:
            ended = self.budget.ending(ended)  # exhausted, when what it spent reached its budget
            status = ended.status
        self._emit_status(status, reason)
        self.commits.ops.append(ended.event())  # the run's last event, as every run's
        await self.commits.flush(status=status, outcome=ended.stored(), checkpoint=True)
        return status, reason

    async def _suspend(self) -> tuple[RunStatus, str]:
        waiting = [
            f"{s.id} ({s.reason})" for s in self.state.steps.values() if s.status in {"waiting", "ready"}
        ]
        reason = "; ".join(waiting) if waiting else "nothing can move"
        self._emit_status("waiting", reason)
        await self.commits.flush(status="waiting", checkpoint=True)
        return "waiting", reason

    # -- transitions --------------------------------------------------------------------------------------

    def transition(
        self,
        run: StepRun,
        status: StepStatus,
        reason: str = "",
        *,
        output: dict[str, JsonValue] | None = None,
        wait: dict[str, JsonValue] | None = None,
        attempt: int | None = None,
        raw: str | None = None,
    ) -> None:
        # built, not validated: every value is one this module made (an output, as its executor made it
        # JSON data)
        values = {
            "step_id": run.id,
            "status": status,
            "reason": reason,
            "attempt": run.attempt if attempt is None else attempt,
            "output": output,
            "wait": wait,
            "raw": raw,
            "usage": self._usage_of(run.id),
        }
        self.emit(built(StepStateEvent, values))
        self._after(run.id, status)

    def _usage_of(self, step_id: str) -> dict[str, JsonValue] | None:
        """The usage of ``step_id``'s call that its next transition carries, counted apart till then."""
        usage = self.step_usage.pop(step_id, None) if self.step_usage else None
        if usage is not None and self.budget is not None:
            self.budget.settle(step_id)
        return usage

    def _after(self, step_id: str, status: StepStatus) -> None:
        if status == "complete":
            self._completed(step_id)
        elif status in {"failed", "skipped", "cancelled"}:
            self._ended_badly(step_id)

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
        values = {"step_id": step_id, "status": "skipped", "reason": reason, "attempt": run.attempt}
        self.emit(built(StepStateEvent, values))
        self.candidates.pop(step_id, None)
        self._after_terminal(step_id)

    def _after_terminal(self, step_id: str) -> None:
        parent = self.graph.steps[step_id].parent
        if parent is not None:
            _containers.check(self, parent)
            for watcher in self.graph.watchers.get(parent, ()):
                self.candidates[watcher] = None
        self.gate_reasons.pop(step_id, None)

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
        if run.status == "waiting" and run.wait.get("kind") in _HELD:
            return
        if run.wait.get("kind") == "outcome_unknown":  # its question waited for another one: ask it now
            _writes.ask_unknown(self, step, run, run.wait)
            return
        if not _gates.gate_open(self, step, run):
            return
        if self._running_count() >= self.host.concurrency:
            if run.status != "ready" or run.reason != _NO_SLOT:
                # an approval already given stays with the step while it waits for a slot
                kept = run.wait if run.wait.get("approved") else None
                self.transition(run, "ready", _NO_SLOT, wait=kept)
            if step_id not in self.queued:
                self.queued[step_id] = None
            return
        self.queued.pop(step_id, None)
        self._start(step, run)

    def _running_count(self) -> int:
        return len(self.tasks) + self.starting

    def context(self, current: str | None, extra: Mapping[str, StepState] | None = None) -> ConditionContext:
        steps = self.state.condition_steps()
        if extra:  # a loop's ``until``: its body ids name the iteration just finished
            steps = {**steps, **extra}
        # typed, so that ``vars.n > 2`` compares numbers (cook evaluates its conditions the same way)
        variables = cast(Mapping[str, str], self.state.plan.vars)
        return ConditionContext(
            steps=steps, current_step=current, vars=variables, env=self.host.env, root=self.host.root
        )

    # -- starting work ------------------------------------------------------------------------------------

    def _start(self, step: CookedStep, run: StepRun) -> None:
        executor = step.executor
        if isinstance(executor, HumanExecutor):
            kind: InteractionKind = "approval" if executor.kind == "approve" else "ask_user"
            self.ask(step, run, kind, executor.prompt, wait_kind="human", attempt=run.attempt + 1)
            return
        if isinstance(executor, ManualExecutor):
            if self._is_container(step.id):
                self.transition(
                    run, "running", "running its children", attempt=run.attempt + 1, wait={"kind": "children"}
                )
                _containers.check(self, step.id)
            else:
                self.transition(
                    run,
                    "waiting",
                    f"waiting for someone to complete it (plangate complete RUN {step.id} --output JSON)",
                    wait={"kind": "manual"},
                )
            return
        if not isinstance(executor, ToolExecutor | FormulaExecutor | AgentExecutor | LlmExecutor):
            self.transition(run, "failed", f"{executor.type} steps cannot run here", attempt=run.attempt + 1)
            return
        if isinstance(executor, ToolExecutor):
            tool = _writes.write_tool(executor, self.host.tools)
            if tool is not None:
                _writes.start(self, step, run, executor, tool)
                return
        wait: dict[str, JsonValue] | None = None
        if isinstance(executor, FormulaExecutor):
            # the sub-run's id commits with this state, before the sub-run exists: a restart adopts it
            wait = {"kind": "subrun", "run_ids": [subformula_run_id(self.run_id, step.id, run.attempt + 1)]}
        self.transition(run, "running", "", attempt=run.attempt + 1, wait=wait)
        self.launch(step.id, "work")

    def ask(
        self,
        step: CookedStep,
        run: StepRun,
        interaction_kind: InteractionKind,
        prompt: str,
        *,
        wait_kind: str,
        attempt: int | None = None,
        tool: InteractionTool | None = None,
        details: dict[str, JsonValue] | None = None,
    ) -> None:
        """Open the run's interaction for ``step`` (one at a time: others stay ready until it is answered).

        ``details`` join the step's wait (and are kept while its question waits for the open one, when
        ``wait_kind`` is ``outcome_unknown``: they are all that says which write is in doubt).
        """
        if self.open_interaction:
            if run.reason != _QUEUED_QUESTION:
                kept = {**(details or {}), "kind": wait_kind} if wait_kind == "outcome_unknown" else None
                self.transition(run, "ready", _QUEUED_QUESTION, wait=kept)
            self.asking_later[step.id] = None
            return
        self.open_interaction = True
        self.asking_later.pop(step.id, None)
        text = (
            self._render_prompt(step, prompt) if tool is None and wait_kind != "outcome_unknown" else prompt
        )
        wait: dict[str, JsonValue] = {**(details or {}), "kind": wait_kind}
        placeholder = StepStateEvent(
            step_id=step.id,
            status="waiting",
            reason=f"waiting for a person: {text}",
            attempt=run.attempt if attempt is None else attempt,
            wait=wait,
        )
        self._applied(placeholder)

        def open_it(tx: Transaction) -> None:
            interaction = tx.open_interaction(interaction_kind, text, tool=tool, step_id=step.id)
            event = placeholder.model_copy(update={"wait": {**wait, "interaction_id": interaction.id}})
            tx.append(event)
            tx.append(
                InteractionOpenedEvent(
                    interaction_id=interaction.id,
                    kind=interaction.kind,
                    prompt=text,
                    tool=tool,
                    step_id=step.id,
                )
            )
            self.state.apply(event)

        self.commits.ops.append(open_it)

    def _render_prompt(self, step: CookedStep, prompt: str) -> str:
        from plangate.formulas.templates import render_runtime

        try:
            rendered = render_runtime(
                prompt, self.state.plan.vars, self.state.outputs(), path=f"{step.id}.prompt"
            )
        except Exception:  # a prompt that cannot be filled is still worth showing as written
            return prompt
        return rendered if isinstance(rendered, str) else to_text(rendered)

    def _launch(self) -> None:
        loop = asyncio.get_running_loop()
        for step_id, what in self.to_launch:
            task = loop.create_task(self._tracked(self.graph.steps[step_id], what))
            self.tasks[task] = step_id
        self.to_launch.clear()
        self.starting = 0

    # -- finishing work -----------------------------------------------------------------------------------

    async def _wait_tasks(self) -> None:
        delay = self.wakeups.next_wake(bool(self.tasks))
        if self.open_interaction:
            # an answer another process stores is looked for this often while work runs
            delay = _STORED_ANSWER_POLL if delay is None else min(delay, _STORED_ANSWER_POLL)
        await self._sleep(delay)
        if self.stopped is not None:
            raise self.stopped
        ended, self.ended = self.ended, {}
        # every step whose work ended meanwhile, in launch order: their transitions commit together, in
        # the next pass
        for task, step_id in [item for item in self.tasks.items() if item[1] in ended]:
            del self.tasks[task]
            self._finished(step_id, ended[step_id])
        self._freed()

    def _freed(self) -> None:
        """After work ended: the steps waiting for a slot that may take one, and what time released."""
        free = self.host.concurrency - self._running_count()
        self.candidates.update(dict.fromkeys(itertools.islice(self.queued, max(free, 0))))
        self.candidates.update(dict.fromkeys(self.wakeups.due()))

    def _finished(self, step_id: str, outcome: StepOutcome) -> None:
        run = self.state.steps[step_id]
        step = self.graph.steps[step_id]
        poked = step_id in self.poked
        self.poked.discard(step_id)
        if run.terminal:  # cancelled meanwhile
            return
        if outcome.usage is not None:
            self.step_usage[step_id] = outcome.usage
        if outcome.write is not None:
            _writes.settled(self, step, outcome.write)
        if outcome.status == "unknown":
            self.emit(StatusEvent(stage="step", code="outcome_unknown", text=f"{step_id}: {outcome.reason}"))
            _writes.ask_unknown(self, step, run, {**run.wait, "why": outcome.reason})
            return
        if outcome.status == "waiting":
            kind = "fanout" if run.wait.get("kind") == "fanout" else "subrun"
            planned = run.wait.get("run_ids") if kind == "fanout" else None
            ids: list[JsonValue] = (
                list(planned) if isinstance(planned, list) and planned else list(outcome.run_ids)
            )
            self.transition(
                run,
                "waiting",
                outcome.reason,
                output=outcome.output or None,
                wait={"kind": kind, "run_ids": ids},
            )
            if poked:  # a sub-run was answered while this task ran: look at it again now
                self.launch(step_id, kind)
            return
        if outcome.status == "failed":
            self._end_sub_runs(step, run, outcome, "failed")
            if run.attempt <= step.retries and not outcome.exhausted:
                retry = f"attempt {run.attempt} failed ({outcome.reason}); retrying"
                self.transition(run, "ready", retry, wait=_writes.retry_wait(run), raw=outcome.raw)
                self.candidates[step_id] = None
            else:
                self.transition(run, "failed", outcome.reason, output=outcome.output or None, raw=outcome.raw)
            return
        if step.on_complete is not None and run.wait.get("kind") != "fanout":
            # the sub-runs' ids commit with this state, before any of them exists: a restart adopts them
            fanned: list[JsonValue] = list(fanout_ids(self.run_id, step, run.attempt, outcome.output))
            self.transition(
                run,
                "waiting",
                "fanning out",
                output=outcome.output,
                wait={"kind": "fanout", "run_ids": fanned},
                raw=outcome.raw,
            )
            self.launch(step_id, "fanout")
            return
        self._end_sub_runs(step, run, outcome, "completed without it")
        if self._is_container(step_id):
            self.transition(
                run,
                "running",
                "waiting for its children",
                output=outcome.output,
                wait={"kind": "children"},
                raw=outcome.raw,
            )
            _containers.check(self, step_id)
            return
        self.transition(run, "complete", outcome.reason, output=outcome.output, raw=outcome.raw)

    def _end_sub_runs(self, step: CookedStep, run: StepRun, outcome: StepOutcome, how: str) -> None:
        """Cancel the sub-runs a finished step leaves unfinished (timed out, failed beside a sibling, not
        needed by an any-children fan-out): no sub-run outlives the step that started it. ``how``: what the
        step did (``failed``, ``completed without it``)."""
        if run.wait.get("kind") not in {"subrun", "fanout"} or isinstance(step.executor, AgentExecutor):
            return
        recorded = run.wait.get("run_ids")
        ids = [r for r in (recorded if isinstance(recorded, list) else outcome.run_ids) if isinstance(r, str)]
        self.host.end_sub_runs(ids, f"step {step.id!r} of run {self.run_id!r} {how}")

    # -- people, from outside -----------------------------------------------------------------------------

    async def answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> None:
        """Apply a person's answer between two passes of this live scheduler; returns once it committed.

        Raises:
            InteractionError: it does not fit, or is stale (``StaleInteraction``); nothing changed.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.inbox.append((interaction, resolution, by, future))
        self.wake()
        await future

    def poke(self, child_run_id: str) -> bool:
        """A sub-run of one of this run's steps was answered while suspended: continue that step only.

        Returns whether a step of this run owns the sub-run (False: nothing here to continue).
        """
        step_id = self._step_of_sub_run(child_run_id)
        if step_id is None:
            return False
        if step_id in self.tasks.values():
            self.poked.add(step_id)  # continued when its task returns
        else:
            run = self.state.steps[step_id]
            kind = run.wait.get("kind")
            if run.status != "waiting" or kind not in {"subrun", "fanout"}:
                return False
            if (step_id, kind) not in self.to_launch:
                self.launch(step_id, str(kind))
        self.wake()
        return True

    def _step_of_sub_run(self, child_run_id: str) -> str | None:
        for step_id in [*self.waiting, *self.tasks.values()]:
            ids = self.state.steps[step_id].wait.get("run_ids")
            if isinstance(ids, list) and child_run_id in ids:
                return step_id
        found = step_of_child(self.run_id, child_run_id)  # an agent step's agent, while it works
        return found if found in self.state.steps else None

    def _take_answers(self) -> None:
        while self.inbox:
            interaction, resolution, by, future = self.inbox[0]
            if not future.done():
                self.commits.flush_now()  # what this scheduler decided commits first: the answer on top
                try:
                    self._apply_answer(interaction, resolution, by)
                except InteractionError as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(None)
            self.inbox.pop(0)

    def _take_stored_answers(self) -> bool:
        """Apply the answers another process left in the store for this run's open questions (``answer``,
        when this scheduler's runner is not the one answering), as answers handed in are applied; returns
        whether one was."""
        if not self.open_interaction:
            return False
        took = False
        for interaction, resolution, by in stored_answers(self.host.store, self.run_id):
            self.commits.flush_now()
            try:
                self._apply_answer(interaction, resolution, by)
            except InteractionError as exc:
                # checked when it was stored; a question answered meanwhile by someone else is stale
                logger.warning(
                    "run %s: stored answer to %s not applied: %s", self.run_id, interaction.id, exc
                )
                continue
            took = True
        return took

    def _apply_answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> None:
        step = next(
            (
                self.state.steps[s]
                for s in self.waiting
                if self.state.steps[s].wait.get("interaction_id") == interaction.id
            ),
            None,
        )
        answered = None
        if step is not None:
            answered = answer_step(
                step, resolution, self.host.tools, self.graph.position[step.id], asked=interaction.kind
            )
        with self.host.leases.transaction(self.run_id) as tx:
            began(tx)
            commit_answer(tx, interaction, resolution, by, answered)
        if self.trace is not None or telemetry.metrics.current() is not None:
            telemetry.committed(self.trace, "formula", tx.events, self.host.store)
        self.open_interaction = False
        self.candidates.update(dict.fromkeys(self.asking_later))
        self.asking_later.clear()
        if answered is not None:
            event = answered.event
            self._applied(event)
            self._after(event.step_id, event.status)
            if event.status == "ready":
                self.candidates[event.step_id] = None

    # -- containers and loops -----------------------------------------------------------------------------

    def _is_container(self, step_id: str) -> bool:
        return bool(self.graph.children.get(step_id))

    def grow(self, new_steps: list[CookedStep]) -> None:
        """Add an until-loop's next iteration to the plan and to what the scheduler tracks."""
        plan = self.state.plan
        known = {s.id for s in new_steps}
        data: dict[str, Any] = plan.to_dict()
        data["steps"] = [s for s in data["steps"] if s["id"] not in known] + [
            s.model_dump(mode="json", by_alias=True) for s in new_steps
        ]
        self.state.plan = Plan.from_dict(data)
        self.graph.add(new_steps)
        for step in new_steps:
            self.state.steps.setdefault(step.id, StepRun(step.id))
            self._track(step.id)
            self.unmet[step.id] = sum(1 for n in step.needs if self.state.steps[n].status != "complete")
            if any(self.state.steps[n].status in {"failed", "skipped", "cancelled"} for n in step.needs):
                self._skip(step.id, self._blocked_reason(step))
            elif self.unmet[step.id] == 0:
                self.candidates[step.id] = None
            self._look_again(step.id)  # what an aggregate over the loop (or over every step) ranges over grew
        self.commits.plan_changed = True

    @staticmethod
    def _blocked_reason(step: CookedStep) -> str:
        return f"a step it needs did not complete ({', '.join(step.needs)})"


__all__ = ["INTERRUPTED", "Scheduler"]
