"""Gates: whether a ready step may start now, or what holds it (its children, a timer, a condition, a person).

For: ``gate_open``, which the scheduler asks before it starts a step, ``hold``, which records what a
step waits for, and ``Wakeups``, what only time changes. A condition is evaluated against the run's current
state; its reason is recorded as a ``gate`` event whenever it changes; a gate that times out fails its step.
A held gate is looked at again when a step its condition reads moves on (``PlanGraph.gates_reading``), when
its timer or deadline falls due, and, for what no step changes (files, the environment), now and then. Not
for: the condition language (``plangate.conditions``) or starting the step (``_scheduler.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import JsonValue

from plangate.conditions import ConditionSyntaxError, compile_condition
from plangate.events import GateEvent
from plangate.formulas._runcontext import RunContext
from plangate.formulas._rungraph import PlanGraph
from plangate.formulas._runstate import StepRun
from plangate.formulas.plan import CookedStep


def gate_open(run_ctx: RunContext, step: CookedStep, run: StepRun) -> bool:
    """Whether the step may start now; else it is held (waiting, failed at a timeout, or asking a person)."""
    gate = step.gate
    if step.waits_for is not None and step.waits_for.mode == "children-of":
        target = step.waits_for.step or ""
        kids = run_ctx.graph.children.get(target, [])
        # a step without nested children has its fan-out sub-runs as children, and ends after them
        settled = (
            all(run_ctx.state.steps[k].terminal for k in kids)
            if kids
            else run_ctx.state.steps[target].terminal
        )
        if not settled:
            hold(run_ctx, run, "waits_for", f"waiting for the children of {target!r}")
            return False
    if gate is None or run.wait.get("approved"):
        return True
    now = run_ctx.now()
    if gate.timer:
        until = run.wait.get("until")
        if not isinstance(until, int | float):
            hold(run_ctx, run, "timer", f"timer: waiting {gate.timer}s", until=now + gate.timer)
            return False
        if now < until:
            return False
    if gate.condition and not _condition_holds(run_ctx, step, run, gate.condition, gate.timeout, now):
        return False
    if gate.human:
        run_ctx.ask(step, run, "approval", gate.human, wait_kind="gate_human")
        return False
    return True


def _condition_holds(
    run_ctx: RunContext, step: CookedStep, run: StepRun, condition: str, timeout: int | None, now: float
) -> bool:
    try:
        result = compile_condition(condition).evaluate(run_ctx.context(step.id))
    except ConditionSyntaxError as exc:  # check() refuses these; a hand-built plan may not have run it
        run_ctx.transition(run, "failed", f"gate condition: {exc}")
        return False
    reason = result.reason
    if run_ctx.gate_reasons.get(step.id) != reason:
        run_ctx.gate_reasons[step.id] = reason
        run_ctx.emit(GateEvent(step_id=step.id, satisfied=result.satisfied, reason=reason))
    if result.satisfied:
        return True
    since = run.wait.get("since") if run.wait.get("kind") == "gate" else None
    since = since if isinstance(since, int | float) else now
    if timeout is not None and now - since >= timeout:
        run_ctx.transition(run, "failed", f"gate timed out after {timeout}s: {reason}")
        return False
    wait: dict[str, JsonValue] = {"since": since}
    if timeout is not None:
        wait["deadline"] = since + timeout
    hold(run_ctx, run, "gate", f"gate: {reason}", **wait)
    return False


def hold(run_ctx: RunContext, run: StepRun, kind: str, reason: str, **details: JsonValue) -> None:
    """Hold the step ``waiting`` for ``kind`` (committing nothing when it already waits for the same)."""
    wait: dict[str, JsonValue] = {"kind": kind, **details}
    if run.status == "waiting" and run.reason == reason and run.wait.get("kind") == kind:
        return
    run_ctx.transition(run, "waiting", reason, wait=wait)


class Wakeups:
    """What only time changes for held steps: timers and gate deadlines fall due, and gates that read files
    or the environment are looked at again every ``poll_interval`` (while work runs, or a deadline is
    awaited: with neither, the run waits for a person instead of polling)."""

    def __init__(self, graph: PlanGraph, clock: Callable[[], float], poll_interval: float) -> None:
        self._graph = graph
        self._clock = clock
        self._poll_interval = poll_interval
        self._timed: dict[str, float] = {}  # waiting steps with a timer or a gate deadline: when it is due
        self._polled: set[str] = set()  # steps held by a gate that reads files or the environment
        self._next_poll = clock() + poll_interval

    def track(self, run: StepRun) -> None:
        """Take the step's new state in (after each transition)."""
        step_id = run.id
        if run.status != "waiting":
            if self._timed:
                self._timed.pop(step_id, None)
            if self._polled:
                self._polled.discard(step_id)
            return
        due = [v for k in ("until", "deadline") if isinstance(v := run.wait.get(k), int | float)]
        if due:
            self._timed[step_id] = min(due)
        else:
            self._timed.pop(step_id, None)
        if run.wait.get("kind") == "gate" and step_id in self._graph.reads_outside:
            self._polled.add(step_id)
        else:
            self._polled.discard(step_id)

    def next_wake(self, working: bool) -> float | None:
        """Seconds until something falls due, at most ``poll_interval``; None: nothing does."""
        due = list(self._timed.values())
        if self._polled and (working or due):
            due.append(self._next_poll)
        if not due:
            return None
        return max(0.0, min(min(due) - self._clock(), self._poll_interval))

    def due(self) -> list[str]:
        """The held steps to look at again now (after a wait)."""
        now = self._clock()
        found = [step_id for step_id, at in self._timed.items() if at <= now]
        if now >= self._next_poll:
            self._next_poll = now + self._poll_interval
            found.extend(self._polled)
        return found


__all__ = ["Wakeups", "gate_open", "hold"]
