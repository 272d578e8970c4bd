"""The plan phase: the model writes a plan of steps (each with its ``done_when``), or asks the user first.

For: ``run_plan`` (one planning call per pass; each consumes a round of the budget, so a planner that
never finishes ends ``exhausted``) and the plan-consent question. An accepted plan may activate a tool
domain through its ``context_hook``; a hook naming an unknown domain is reported and ignored. Not for:
resolving the plan-consent interaction (``_interactions.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate.agent._batch import Batch, Question
from plangate.agent._calls import call, plan_schema, read_plan
from plangate.agent._context import plan_context
from plangate.agent._outcomes import model_failed
from plangate.decisions import DecisionParseError, PlanOutput
from plangate.errors import ConfigError
from plangate.events import PlanEvent, PlanEventStep, SpeakEvent, StatusEvent, StepStartedEvent

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext


async def run_plan(loop: RunContext) -> None:
    """One planning pass, committed."""
    if not loop.take_round("plan"):
        return
    messages = plan_context(loop.view()).messages()
    answer = await call(
        loop.model, "plan", messages, schema=plan_schema(), tool_names=loop.toolset.active_names()
    )
    if answer.failure is not None:
        loop.end(model_failed("plan", answer.failure))
        await loop.commit(Batch())
        return
    batch = Batch()
    try:
        output = read_plan(answer.text, loop.model.wire)
    except DecisionParseError as exc:
        loop.correct(batch, "malformed_plan", str(exc), "plan")
        await loop.commit(batch)
        return
    loop.state.corrections = 0
    if output.action == "plan_done":
        _accept(loop, output, batch)
    elif output.action == "ask_user":
        question = output.question or ""
        batch.events.append(SpeakEvent(text=question))
        batch.question = Question("ask_user", "question", question, loop.state.step_index)
        batch.status = "waiting"
    else:
        batch.events.append(StatusEvent(stage="plan", code="continue", text=output.reason or ""))
    await loop.commit(batch)


def _accept(loop: RunContext, output: PlanOutput, batch: Batch) -> None:
    state = loop.state
    state.plan = list(output.plan_steps)
    state.step_index = 0
    hook = output.context_hook
    if hook is not None:
        try:
            loop.toolset.activate(hook.domain, hook.packs or None)
        except ConfigError as exc:
            batch.events.append(StatusEvent(stage="plan", code="context_hook_ignored", text=str(exc)))
        state.toolset = loop.toolset.state()
    steps = [PlanEventStep(content=step.content, done_when=step.done_when or "") for step in state.plan]
    batch.events.append(PlanEvent(steps=steps))
    if loop.config.plan_consent:
        state.phase = "plan_consent"
        batch.question = Question("plan_consent", "plan", plan_prompt(output), 0)
        batch.status = "waiting"
        return
    state.phase = "execute"
    batch.events.append(StepStartedEvent(step_index=0, content=state.plan[0].content))


def plan_prompt(output: PlanOutput) -> str:
    """What a person reads when asked to consent to a plan."""
    lines = ["Proceed with this plan?"]
    for index, step in enumerate(output.plan_steps, start=1):
        done_when = f" (done when: {step.done_when})" if step.done_when else ""
        lines.append(f"{index}. {step.content}{done_when}")
    return "\n".join(lines)


__all__ = ["plan_prompt", "run_plan"]
