"""The execute phase: one round = one budgeted model call, one decision, one verdict, one commit.

For: ``run_round``. The round consumes a round of the budget, fits its prompt in the context budget
(``_compact.py``), asks the model for a decision on its wire, reads it (a malformed answer is a correction
with the parser's message), judges it (``_validate.judge``) and acts: run a read tool (its observation, and a
``tool_observation`` receipt when it succeeded), open a consent request for a write, ask the user, advance the
plan, finish, abort, or correct. Whatever the round did, its ``round`` event records the decision, the
validation and the result, with the round number, the plan step that was current when the decision was made,
and the tokens its provider counted (cached ones too). A receipt the round records may prove a ``done_when``
condition (``_proof.py``, at commit). A write that runs without consent (``always_execute``) goes through the
intent/receipt protocol of ``_writes.py``. Not for: resolving interactions (``_interactions.py``) or the
closing message (``_deliver.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plangate._models import built, restamped
from plangate.agent import _writes
from plangate.agent._batch import Batch, Question, ReceiptSpec, result_event, tool_output
from plangate.agent._calls import call, decision_schema, read_decision, token_usage
from plangate.agent._compact import fit_context
from plangate.agent._outcomes import model_failed, stalled
from plangate.agent._output import INVALID_OUTPUT, OutputSpec
from plangate.agent._proof import offered, step_condition
from plangate.agent._state import InflightWrite, Stall, short_digest
from plangate.agent._transcript import receipt_states
from plangate.agent._validate import REPEATED_FAILURE, REPEATS, Call, Facts, Verdict, judge, malformed
from plangate.agent.result import Outcome
from plangate.conditions import Condition, ConditionContext
from plangate.decisions import ACTIONS, Decision, DecisionParseError, RoundValidation
from plangate.events import (
    InteractionTool,
    JsonObject,
    RoundEvent,
    SpeakEvent,
    StepAdvancedEvent,
    StepStartedEvent,
    ThinkingEvent,
    TokenUsage,
    ToolCallEvent,
)
from plangate.tools import ADD_TOOL, REMOVE_TOOL, Tool, ToolResult

if TYPE_CHECKING:
    from plangate.agent._context import View
    from plangate.agent._runcontext import RunContext

_META_TOOLS = frozenset({ADD_TOOL, REMOVE_TOOL})


@dataclass
class _Round:
    """One round in the making: its number, the step it started on, and the batch it commits."""

    loop: RunContext
    batch: Batch
    number: int
    step_index: int | None
    head: int
    usage: TokenUsage | None = None
    raw: str | None = None

    @property
    def step_id(self) -> str | None:
        return None if self.step_index is None else str(self.step_index)

    def record(self, decision: JsonObject, validation: RoundValidation, result: JsonObject) -> None:
        """Put the ``round`` event first in the round's events (after the model's reasoning, if any).

        Built, not validated: the decision was checked as JSON where the model's output entered, and the
        rest is the runtime's own."""
        values = {
            "round": self.number,
            "step_index": self.step_index,
            "decision": decision,
            "validation": validation.model_dump(mode="json"),
            "result": result,
            "usage": self.usage,
            "raw": self.raw,
        }
        self.batch.events.insert(self.head, built(RoundEvent, values))


def _actions(loop: RunContext) -> tuple[str, ...]:
    """The actions the flow rules can accept this round, offered to the model's schema (``_proof.offered``).
    Any decision is still validated: a model that ignores its schema gets the correction."""
    return offered(loop, ACTIONS)


def _unmet(condition: Condition | None, loop: RunContext, step_index: int | None) -> tuple[str, str] | None:
    """A condition the model may not claim, and why it does not hold now (None: no such condition)."""
    if condition is None:
        return None
    receipts = receipt_states(loop.evidence.records, step_index)
    return condition.expression, condition.evaluate(ConditionContext(receipts=receipts)).reason


def _offered_tools(loop: RunContext, view: View) -> list[Tool]:
    """The tools the model's schema offers this round: the active ones, as the run's prompt style offers
    them (the compact style leaves out the read tool whose call just succeeded). Any active tool is still
    accepted by validation."""
    return view.style.offered_tools(loop.toolset.active_tools(), view)


async def run_round(loop: RunContext) -> None:
    """One execute round, committed (twice for a write that runs without consent: intent, then receipt)."""
    if not loop.take_round("execute"):
        return
    view = loop.view()
    offered = _offered_tools(loop, view)
    names = [item.name for item in offered]
    # A compaction is committed with the round it made room for: a crash before the commit only redoes it.
    messages, compacted = await fit_context(loop, view)
    answer = await call(
        loop.model,
        "execute",
        messages,
        schema=decision_schema(tuple(names), _actions(loop)),
        tool_names=names,
        tool_parameters={item.name: item.parameters for item in offered},
        argument_sources=view.style.argument_sources(view),
        output_schema=loop.config.output_schema,
    )
    state = loop.state
    batch = Batch([*compacted, *([ThinkingEvent(text=answer.reasoning)] if answer.reasoning else [])])
    current = _Round(
        loop,
        batch,
        state.rounds_used,
        state.step_index if state.plan else None,
        len(batch.events),
        token_usage(answer.usage),
        answer.text if answer.failure is None else None,
    )
    if answer.failure is not None:
        outcome = model_failed("execute", answer.failure)
        # The provider's own words stay in the outcome's internal_reason (the store and the log): they can
        # name the model server's files, and the round event is shown to clients.
        no_decision = RoundValidation(
            flow_passed=False, flow_reason=f"no decision: the model failed ({type(answer.failure).__name__})"
        )
        current.record({}, no_decision, {"action": "abort", "code": outcome.code})
        loop.end(outcome)
        await loop.commit(batch)
        return
    try:
        decision, visible = read_decision(answer.text, loop.model.wire)
    except DecisionParseError as exc:
        message = str(exc)
        current.record({}, malformed(message), {"action": "correction", "code": "malformed_output"})
        loop.correct(batch, "malformed_output", message, "execute")
        await loop.commit(batch)
        return
    # Why a condition the model may not claim does not hold: worked out only for a round that claims one.
    unmet_step = unmet_goal = None
    if decision.action in ("next_plan", "done"):
        unmet_step = _unmet(step_condition(state.plan, state.step_index), loop, state.step_index)
        unmet_goal = _unmet(loop.goal, loop, None)
    facts = Facts(
        plan_length=len(state.plan) if state.plan else None,
        step_index=state.step_index,
        evidence=loop.evidence.count(state.step_index),
        toolset=loop.toolset,
        always_execute=loop.config.always_execute,
        stall=state.stall,
        waiting=state.waiting is not None,
        step_condition=unmet_step,
        goal=unmet_goal,
        failed=loop.evidence.failed_writes(),
        succeeded=loop.evidence.succeeded_writes(),
        repeats=frozenset(state.repeats),
    )
    verdict = judge(decision, facts)
    speak = "\n\n".join(part for part in (decision.speak, visible) if part)
    if verdict.act == "finish" and loop.output is not None:
        verdict, speak = _typed_answer(loop, loop.output, verdict, speak)
    await _act(current, decision, verdict, speak)


def _typed_answer(loop: RunContext, output: OutputSpec, verdict: Verdict, speak: str) -> tuple[Verdict, str]:
    """A ``done`` of a run with a typed output: its answer, as canonical JSON, becomes the run's answer; one
    that does not fit the output type is a correction instead."""
    answer, problem = output.check(speak)
    if answer is None:
        validation = verdict.validation.model_copy(update={"flow_passed": False, "flow_reason": problem})
        return Verdict(validation, "correct", INVALID_OUTPUT, problem), speak
    loop.state.answer = answer
    return verdict, answer


async def _act(current: _Round, decision: Decision, verdict: Verdict, speak: str) -> None:
    loop, batch = current.loop, current.batch
    record = decision.model_dump(mode="json", exclude_none=True)
    if verdict.act == "correct":
        current.record(record, verdict.validation, {"action": "correction", "code": verdict.code})
        stall = loop.state.stall
        if verdict.code == "stalled" and stall is not None:
            loop.state.stall = stall.model_copy(update={"warned": True})
        if verdict.code in REPEATS and verdict.call is not None:
            loop.state.repeats = [*loop.state.repeats, verdict.call.key]
        loop.correct(batch, verdict.code, verdict.message, "execute")
        await loop.commit(batch)
        return
    if verdict.act == "stalled":
        current.record(record, verdict.validation, {"action": "abort", "code": "stalled"})
        loop.end(stalled(verdict.message, _repeated_failure(verdict)))
        await loop.commit(batch)
        return
    loop.state.corrections = 0
    if speak:
        batch.events.append(SpeakEvent(text=speak))
    if verdict.call is not None:
        await _tool_round(current, record, verdict, verdict.call)
        return
    current.record(record, verdict.validation, _plain_act(current, decision, verdict, speak))
    await loop.commit(batch)


def _repeated_failure(verdict: Verdict) -> str | None:
    """What a person reads when the run stopped on a write that already ran (None: another stall)."""
    if verdict.code not in REPEATS or verdict.call is None:
        return None
    after = "it failed" if verdict.code == REPEATED_FAILURE else "it was done"
    return f"I stopped: I kept asking for {verdict.call.tool.name} again after {after}. {verdict.message}"


def _plain_act(current: _Round, decision: Decision, verdict: Verdict, speak: str) -> JsonObject:
    """The rounds that run no tool: speak, ask, advance, finish, abort. Returns the round's result."""
    loop, batch = current.loop, current.batch
    state = loop.state
    if verdict.act == "ask":
        batch.question = Question("ask_user", "question", decision.speak or "", state.step_index)
        batch.status = "waiting"
        return {"action": "ask_user"}
    if verdict.act == "advance" and state.plan:
        before = state.step_index
        state.step_index += 1
        state.stall = None
        goal_check = decision.goal_check or ""
        batch.events.append(
            StepAdvancedEvent(from_index=before, to_index=state.step_index, goal_check=goal_check)
        )
        batch.events.append(
            StepStartedEvent(step_index=state.step_index, content=state.plan[state.step_index].content)
        )
        return {"action": "next_plan", "from_index": before, "to_index": state.step_index}
    if verdict.act == "finish":
        loop.end(Outcome(status="completed", stage="execute", code="done", user_message=speak))
        return {"action": "done"}
    if verdict.act == "abort" and decision.abort is not None:
        intent = decision.abort
        code = intent.code or "model_abort"
        loop.end(
            Outcome(
                status="aborted",
                stage="execute",
                code=code,
                user_message=intent.user_message,
                internal_reason=intent.internal_reason or "",
            )
        )
        return {"action": "abort", "code": code}
    return {"action": "continue"}


async def _tool_round(current: _Round, record: JsonObject, verdict: Verdict, tool_call: Call) -> None:
    loop, batch = current.loop, current.batch
    state = loop.state
    tool, arguments = tool_call.tool, tool_call.arguments
    if verdict.act == "consent":
        current.record(
            record, verdict.validation, {"action": "consent", "tool": tool.name, "arguments": arguments}
        )
        asked = InteractionTool(name=tool.name, arguments=arguments, arguments_digest=tool_call.digest)
        batch.question = Question("confirm", "consent", consent_prompt(tool_call), state.step_index, asked)
        batch.status = "waiting"
        await loop.commit(batch)
        return
    if tool.effect == "write":
        # Only reachable with always_execute: exactly-once still holds, through an intent of its own.
        key = f"{loop.run_id}:{current.number}"
        inflight = InflightWrite(
            key=key, tool=tool.name, arguments=arguments, digest=tool_call.digest, step_index=state.step_index
        )
        result: JsonObject = {"action": "write", "tool": tool.name, "arguments": arguments, "write_key": key}
        current.record(record, verdict.validation, result)
        batch.events.append(
            ToolCallEvent(call_id=key, tool=tool.name, arguments=arguments, step_id=current.step_id)
        )
        batch.intent = inflight
        state.inflight = inflight
        await loop.commit(batch)
        await _writes.execute(loop)
        return
    outcome = await tool.invoke(arguments)
    if tool.name in _META_TOOLS:
        # Activating tools says nothing about the world, so it is no evidence for a step.
        state.toolset = loop.toolset.state()
    elif outcome.success:
        batch.receipts.append(
            ReceiptSpec(
                state.step_index,
                "tool_observation",
                tool.name,
                tool_call.digest,
                outcome.summary,
                output=tool_output(outcome),
            )
        )
    state.stall = next_stall(state.stall, tool_call.key, outcome)
    result = {
        "action": "tool",
        "tool": tool.name,
        "arguments": arguments,
        "status": outcome.status,
        "success": outcome.success,
        "summary": outcome.summary,
    }
    call_id = f"r{current.number}"
    current.record(record, verdict.validation, result)
    values = {"call_id": call_id, "tool": tool.name, "arguments": arguments, "step_id": current.step_id}
    batch.events.append(built(ToolCallEvent, values))  # arguments validated by the tool already
    batch.events.append(result_event(call_id, tool.name, outcome, current.step_id))
    await loop.commit(batch)


def next_stall(stall: Stall | None, key: str, outcome: ToolResult) -> Stall:
    """The stall tracker after a call with ``key`` returned ``outcome``: the count grows only while the same
    call keeps returning the same observation."""
    seen = short_digest(f"{outcome.status}\n{outcome.observation}")
    if stall is not None and stall.call == key and stall.observation == seen:
        return restamped(stall, {"count": stall.count + 1})
    return built(Stall, {"call": key, "observation": seen, "count": 1})


def consent_prompt(tool_call: Call) -> str:
    """What a person reads when asked to approve a write."""
    arguments = json.dumps(tool_call.arguments, ensure_ascii=False, sort_keys=True)
    lines = tool_call.tool.description.strip().splitlines()
    about = f" ({lines[0]})" if lines else ""
    return f"Allow {tool_call.tool.name}{about} with {arguments}?"


__all__ = ["consent_prompt", "next_stall", "run_round"]
