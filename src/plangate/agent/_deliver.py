"""The deliver phase: the closing message, the ``outcome`` event and the run's terminal status.

For: ``run_deliver``, through which every ending goes. A completed run gets a summary written by the model
(purpose ``deliver``), or a mechanical checklist of the plan when the model fails or says nothing, unless the
run's prompt style writes it with no model call (the compact style of small models: what ended it and the
last observation it rests on); a route's direct reply is used as it is. An aborted, exhausted or cancelled
run gets fixed text built from its outcome, with no model call: a run that ended because the model
misbehaved must not depend on it to say so.
Not for: deciding the outcome (the phase that ended the run did).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from plangate.agent._batch import Batch
from plangate.agent._calls import call
from plangate.agent._context import deliver_context, plan_checklist
from plangate.agent._outcomes import MAX_CORRECTIONS
from plangate.agent._output import INVALID_OUTPUT, OutputSpec
from plangate.agent.result import Outcome
from plangate.decisions import PlanStep
from plangate.errors import StoreError
from plangate.events import Event, SpeakEvent

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext

logger = logging.getLogger(__name__)


async def run_deliver(loop: RunContext) -> None:
    """Write the closing message and end the run, in one commit."""
    state = loop.state
    outcome = state.outcome
    if outcome is None:
        raise StoreError(
            f"run {loop.run_id!r} reached deliver with no outcome (the snapshot is inconsistent)"
        )
    if outcome.status == "completed" and not state.answer and loop.output is not None:
        outcome = await _typed_answer(loop, loop.output, outcome)
        state.outcome = outcome
    if outcome.status != "completed":
        answer = fixed_text(outcome, state.plan, state.step_index)
    elif state.answer:
        answer = state.answer
    else:
        view = loop.view()
        written = view.style.closing_text(outcome, view.transcript.acts)
        answer = written if written is not None else await _summary(loop, outcome)
    state.answer = answer
    state.phase = "done"
    usage = loop.usage_summary()
    if usage is not None:
        outcome = outcome.model_copy(update={"usage": usage})
        state.outcome = outcome
    if outcome.internal_reason:
        # The store keeps it too; neither the answer nor an API response ever shows it.
        logger.info(
            "run %s ended %s (%s): %s", loop.run_id, outcome.status, outcome.code, outcome.internal_reason
        )
    event = outcome.event()
    # A done round's words were spoken with it (they are its outcome's message): when the summary comes
    # back to the same text, saying it again would show the person the answer twice.
    spoken = outcome.code == "done" and outcome.user_message == answer
    events: list[Event] = [event] if spoken else [SpeakEvent(text=answer), event]
    await loop.commit(Batch(events, status=outcome.status))


async def _typed_answer(loop: RunContext, spec: OutputSpec, outcome: Outcome) -> Outcome:
    """The answer of a typed run that completed without a ``done`` of the model (its goal was proven by the
    runtime), asked of the model and checked as a ``done`` would be, with up to ``MAX_CORRECTIONS`` tries;
    the run's answer is then the typed JSON. None fits (or the budget is spent): the run ends ``aborted``,
    code ``invalid_output``, saying that its goal holds — a typed run never completes without its output."""
    state = loop.state
    note = f"The run completed ({outcome.stage}: {outcome.code}): {outcome.user_message}"
    problem = ""
    for _ in range(MAX_CORRECTIONS):
        budget = loop.config.budget
        if budget is not None and state.usage is not None and budget.exceeded(state.usage) is not None:
            problem = "the run's budget is spent"
            break
        messages = deliver_context(loop.view(), note, problem).messages()
        answer = await call(loop.model, "deliver", messages, output_schema=spec.schema)
        if answer.failure is not None:
            problem = f"the model call failed: {type(answer.failure).__name__}"
            continue
        checked, problem = spec.check(answer.text)
        if checked is not None:
            state.answer = checked
            return outcome
    message = (
        f"The goal holds ({outcome.user_message}), but no answer that fits the output type was written: "
        f"{problem}"
    )
    return Outcome(status="aborted", stage=outcome.stage, code=INVALID_OUTPUT, user_message=message)


async def _summary(loop: RunContext, outcome: Outcome) -> str:
    state = loop.state
    budget = loop.config.budget
    if budget is None or state.usage is None or budget.exceeded(state.usage) is None:
        # A run that spent its budget is not summarised by one more call: the checklist says it.
        note = f"The run completed ({outcome.stage}: {outcome.code})."
        answer = await call(loop.model, "deliver", deliver_context(loop.view(), note).messages())
        text = answer.text.strip() if answer.failure is None else ""
        if text:
            return text
    if state.plan:
        return plan_checklist(state.plan, state.step_index + 1)
    return outcome.user_message or "Done."


def fixed_text(outcome: Outcome, plan: list[PlanStep] | None, step_index: int) -> str:
    """The closing message of a run that did not complete: its outcome's message, and the plan's progress."""
    lead = {
        "exhausted": outcome.user_message,
        "cancelled": f"The run was cancelled: {outcome.user_message}",
    }.get(outcome.status, outcome.user_message)
    if not plan:
        return lead
    return f"{lead}\n\nProgress:\n{plan_checklist(plan, step_index)}"


__all__ = ["fixed_text", "run_deliver"]
