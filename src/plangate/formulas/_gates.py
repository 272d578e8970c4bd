"""Gates: whether a ready step may start now, or what holds it (its children, a timer, a condition, a person).

For: ``gate_open``, which the scheduler asks before it starts a step, and ``hold``, which records what a
step waits for. A condition is evaluated against the run's current state; its reason is recorded as a
``gate`` event whenever it changes; a gate that times out fails its step. Not for: the condition language
(``plangate.conditions``) or starting the step (``_scheduler.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import JsonValue

from plangate.conditions import ConditionSyntaxError, compile_condition
from plangate.events import GateEvent
from plangate.formulas._runstate import StepRun
from plangate.formulas.plan import PlanStep

if TYPE_CHECKING:
    from plangate.formulas._scheduler import Scheduler


def gate_open(scheduler: Scheduler, step: PlanStep, run: StepRun) -> bool:
    """Whether the step may start now; else it is held (waiting, failed at a timeout, or asking a person)."""
    gate = step.gate
    if step.waits_for is not None and step.waits_for.mode == "children-of":
        target = step.waits_for.step or ""
        kids = scheduler.graph.children.get(target, [])
        # a step without nested children has its fan-out sub-runs as children, and ends after them
        settled = (
            all(scheduler.state.steps[k].terminal for k in kids)
            if kids
            else scheduler.state.steps[target].terminal
        )
        if not settled:
            hold(scheduler, run, "waits_for", f"waiting for the children of {target!r}")
            return False
    if gate is None or run.wait.get("approved"):
        return True
    now = scheduler.runner.clock()
    if gate.timer:
        until = run.wait.get("until")
        if not isinstance(until, int | float):
            hold(scheduler, run, "timer", f"timer: waiting {gate.timer}s", until=now + gate.timer)
            return False
        if now < until:
            return False
    if gate.condition and not _condition_holds(scheduler, step, run, now):
        return False
    if gate.human:
        scheduler.ask(step, run, "approval", gate.human, wait_kind="gate_human")
        return False
    return True


def _condition_holds(scheduler: Scheduler, step: PlanStep, run: StepRun, now: float) -> bool:
    assert step.gate is not None and step.gate.condition
    try:
        result = compile_condition(step.gate.condition).evaluate(scheduler.context(step.id))
    except ConditionSyntaxError as exc:  # check() refuses these; a hand-built plan may not have run it
        scheduler.transition(run, "failed", f"gate condition: {exc}")
        return False
    reason = result.reason
    if scheduler.gate_reasons.get(step.id) != reason:
        scheduler.gate_reasons[step.id] = reason
        scheduler.emit(GateEvent(step_id=step.id, satisfied=result.satisfied, reason=reason))
    if result.satisfied:
        return True
    since = run.wait.get("since") if run.wait.get("kind") == "gate" else None
    since = since if isinstance(since, int | float) else now
    timeout = step.gate.timeout
    if timeout is not None and now - since >= timeout:
        scheduler.transition(run, "failed", f"gate timed out after {timeout}s: {reason}")
        return False
    wait: dict[str, JsonValue] = {"since": since}
    if timeout is not None:
        wait["deadline"] = since + timeout
    hold(scheduler, run, "gate", f"gate: {reason}", **wait)
    return False


def hold(scheduler: Scheduler, run: StepRun, kind: str, reason: str, **details: JsonValue) -> None:
    """Hold the step ``waiting`` for ``kind`` (committing nothing when it already waits for the same)."""
    wait: dict[str, JsonValue] = {"kind": kind, **details}
    if run.status == "waiting" and run.reason == reason and run.wait.get("kind") == kind:
        return
    scheduler.transition(run, "waiting", reason, wait=wait)


__all__ = ["gate_open", "hold"]
