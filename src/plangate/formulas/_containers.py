"""Steps with children and ``until`` loops: when a parent ends, and when a loop grows another iteration.

For: the scheduler's container phase. A parent step waits for its children (``waits_for``: all of them, or
any one); an ``until`` loop's step, once an iteration's children all completed, evaluates its condition and
either ends or has the scheduler add the next iteration (``expand_iteration``), up to ``max``. Not for: the
scheduling loop (``_scheduler.py``) or cooking loops (``cook.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate.conditions import compile_condition
from plangate.events import GateEvent

if TYPE_CHECKING:
    from plangate.formulas._runcontext import RunContext


def check(scheduler: RunContext, step_id: str) -> None:
    """End the parent step ``step_id`` if its children say so (or grow its loop's next iteration)."""
    state, graph = scheduler.state, scheduler.graph
    run = state.steps[step_id]
    if run.terminal or run.wait.get("kind") != "children":
        return
    kids = [state.steps[k] for k in graph.children.get(step_id, [])]
    step = graph.steps[step_id]
    any_mode = step.waits_for is not None and step.waits_for.mode == "any-children"
    done = [k for k in kids if k.status == "complete"]
    if any_mode and done:
        scheduler.transition(run, "complete", f"{done[0].id} completed", output=run.output)
        return
    if not all(k.terminal for k in kids):
        return
    bad = [k.id for k in kids if k.status != "complete"]
    is_loop = any(loop.id == step_id for loop in state.plan.loops)
    if is_loop and not bad and _next_iteration(scheduler, step_id):
        return
    if bad and (not any_mode or not done):
        scheduler.transition(run, "failed", f"children did not complete: {', '.join(bad)}", output=run.output)
    else:
        scheduler.transition(run, "complete", f"{len(kids)} children completed", output=run.output)


def _next_iteration(scheduler: RunContext, loop_id: str) -> bool:
    """After an iteration of an until-loop: add the next one (True) or let the loop end (False)."""
    from plangate.formulas.cook import expand_iteration

    state = scheduler.state
    loop = state.plan.loop(loop_id)
    n = state.iterations.get(loop_id, 1)
    aliases = {}
    steps = state.condition_steps()
    for body in loop.body:
        sid = loop.step_id(n, body.id)
        if sid in steps:
            aliases[body.id] = steps[sid]
    result = compile_condition(loop.until).evaluate(scheduler.context(loop_id, aliases))
    scheduler.emit(GateEvent(step_id=loop_id, satisfied=result.satisfied, reason=f"until: {result.reason}"))
    if result.satisfied:
        return False
    run = state.steps[loop_id]
    if n >= loop.max:
        scheduler.transition(
            run,
            "failed",
            f"until {loop.until!r} still false after {n} iterations (max {loop.max}): {result.reason}",
        )
        return True
    scheduler.grow(expand_iteration(state.plan, loop_id, n + 1))
    state.iterations[loop_id] = n + 1
    return True


__all__ = ["check"]
