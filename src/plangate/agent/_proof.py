"""Completion proven by the runtime: ``done_when`` conditions over the run's receipts, checked after each one.

For: ``prove``, which the loop calls on every batch about to be committed. When the batch records receipts
(a tool's observation, an executed write, a person's answer) and the run is executing, the current plan
step's ``done_when`` (when it is a condition, ``receipts.any(...)`` and the like, over the receipts bound to
that step) and the run's goal (``Agent(done_when=...)``, over all of them) are evaluated after each new
receipt. The first receipt that makes one hold is its proof: the step advances (``step_advanced`` with the
proof), or the run completes (a ``status`` event ``proven``, outcome code ``proven``) and goes to deliver,
with no model call to say so. All of it goes into the same batch, so the receipt and what it proved are
committed together. Also what the other phases ask about conditions: which actions the model may still
declare, and how the prompt states them. Not for: the condition language (``plangate.conditions``) or
judging the model's own claims (``_validate.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from plangate.agent._batch import Batch
from plangate.agent._transcript import Held, held, receipt_states
from plangate.agent.result import Outcome
from plangate.conditions import Condition, ConditionContext, compile_done_when, done_when_condition
from plangate.decisions import PlanStep
from plangate.events import Proof, ProofReceipt, StatusEvent, StepAdvancedEvent, StepStartedEvent

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext

PROVEN = "proven"
"""The outcome code of a run whose completion a condition proved."""

ANSWERED = "answered"
"""The outcome code of a question (as the runtime told it from the request) answered by a successful read."""


def goal_condition(done_when: str | None) -> Condition | None:
    """The compiled goal of a run (checked when the agent was built, so it compiles)."""
    return None if done_when is None else compile_done_when(done_when)


def step_condition(plan: Sequence[PlanStep] | None, step_index: int) -> Condition | None:
    """The current plan step's ``done_when``, when it is a condition rather than words."""
    if not plan or step_index >= len(plan):
        return None
    done_when = plan[step_index].done_when
    return None if not done_when else done_when_condition(done_when)


def receipts_of(batch: Batch, *, planned: bool) -> list[Held]:
    """The receipts ``batch`` records, in order, as the run's evidence keeps them."""
    found = [
        held(
            spec.step_index,
            tool=spec.name,
            source=spec.source,
            success=spec.success,
            summary=spec.summary,
            output=spec.output,
            planned=planned,
            digest=spec.arguments_digest,
        )
        for spec in batch.receipts
    ]
    done = batch.write_done
    if done is not None:
        found.append(
            held(
                done.step_index,
                tool=done.tool,
                source="write_receipt",
                success=done.success,
                summary=done.summary,
                output=done.output,
                planned=planned,
                digest=done.digest,
            )
        )
    return found


def prove(loop: RunContext, batch: Batch) -> None:
    """Check the step's and the goal's conditions after each receipt of ``batch``; act on the first proof."""
    state = loop.state
    if state.phase != "execute" or state.outcome is not None or state.waiting is not None:
        return
    if loop.goal is None and step_condition(state.plan, state.step_index) is None:
        return  # nothing to prove: most runs, which pay nothing for this
    fresh = receipts_of(batch, planned=bool(state.plan))
    if not fresh:
        return
    records = list(loop.evidence.records)
    goal = loop.goal
    for record in fresh:
        records.append(record)
        _step_proven(loop, batch, records, record)
        if state.phase != "execute":
            return  # the plan's last step was proven: the run is complete
        if goal is None:
            continue
        result = goal.evaluate(ConditionContext(receipts=receipt_states(records)))
        if result.satisfied:
            proof = _proof(goal, result.reason, records, record)
            text = f"the goal {goal.expression} holds: {result.reason}"
            _complete(loop, batch, proof, text)
            return


def _step_proven(loop: RunContext, batch: Batch, records: list[Held], record: Held) -> None:
    """Advance the plan (or complete the run, on its last step) when ``record`` proves the current step."""
    state = loop.state
    plan = state.plan
    condition = step_condition(plan, state.step_index)
    if plan is None or condition is None or record.step_index != state.step_index:
        return
    result = condition.evaluate(ConditionContext(receipts=receipt_states(records, state.step_index)))
    if not result.satisfied:
        return
    proof = _proof(condition, result.reason, records, record)
    before = state.step_index
    if before == len(plan) - 1:
        _complete(loop, batch, proof, f"step {before + 1}, the last, is proven: {result.reason}")
        return
    state.step_index += 1
    state.stall = None
    state.corrections = 0
    batch.events.append(
        StepAdvancedEvent(
            from_index=before, to_index=state.step_index, goal_check=f"proven: {result.reason}", proof=proof
        )
    )
    batch.events.append(StepStartedEvent(step_index=state.step_index, content=plan[state.step_index].content))


def _proof(condition: Condition, reason: str, records: list[Held], record: Held) -> Proof:
    receipt = ProofReceipt(
        number=len(records),
        tool=record.state.tool,
        source=record.state.source,
        step_index=record.step_index,
        success=record.state.success,
        summary=record.summary,
    )
    return Proof(condition=condition.expression, reason=reason, receipt=receipt)


def _complete(loop: RunContext, batch: Batch, proof: Proof, text: str) -> None:
    receipt = proof.receipt
    if loop.config.inferred == "question":
        # A question the rule recognised is answered by the read: the closing message quotes what it saw.
        batch.events.append(StatusEvent(stage="execute", code=ANSWERED, text=text))
        message = f"Answered from {receipt.tool} (receipt #{receipt.number})."
        loop.end(Outcome(status="completed", stage="execute", code=ANSWERED, user_message=message))
        return
    batch.events.append(StatusEvent(stage="execute", code=PROVEN, text=text))
    message = f"Proven by receipt #{receipt.number} ({receipt.tool}): {proof.condition} holds."
    loop.end(Outcome(status="completed", stage="execute", code=PROVEN, user_message=message))


def offered(loop: RunContext, actions: Sequence[str]) -> tuple[str, ...]:
    """``actions`` less those the flow cannot accept this round: under a plan ``next_plan`` only before the
    last step, ``done`` only on it (or without a plan), and neither for a step or a goal that a condition
    proves (the runtime declares those itself)."""
    state = loop.state
    plan = state.plan
    on_last_step = not plan or state.step_index >= len(plan) - 1
    proven_step = step_condition(plan, state.step_index) is not None
    excluded = {"next_plan"} if on_last_step or proven_step else set()
    if not on_last_step or loop.goal is not None or (plan and proven_step):
        excluded.add("done")
    return tuple(action for action in actions if action not in excluded)


__all__ = ["ANSWERED", "PROVEN", "goal_condition", "offered", "prove", "receipts_of", "step_condition"]
