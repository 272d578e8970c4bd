"""Round validation: the runtime's verdict on one decision (flow, evidence, safety), with no I/O.

For: ``judge``, a pure function of the decision and the run's facts, returning the ``RoundValidation`` to
record (for every round, passed or not), what the round will do, and, when a check failed, the correction
code and the message the model reads next round. Not for: acting on the verdict (``_execute.py``) or the
protocol-level pairing rules (``plangate.decisions``, enforced when a decision is parsed).

The rules (SPEC §3):

- flow: ``next_plan`` needs a current plan step that is not the last; ``done`` under a plan needs the last
  step; a tool must exist and be active (the correction carries the toolset's hint); ``ask_user`` needs its
  question in ``speak``; arguments must fit the tool's schema. ``confirm`` on a read tool is downgraded to
  ``continue``; a write tool that needs consent becomes a consent request whatever the action said.
- evidence: ``next_plan`` / ``done`` under a plan need a non-empty ``goal_check`` and at least one
  successful receipt bound to the current step. A step whose ``done_when`` is a condition, and a run whose
  goal is one, are complete only when the runtime finds the condition holds (``_proof.py``): the model's
  ``next_plan`` (or ``done``) for them is a correction with the condition's reason.
- safety: no interaction open; a write identical (tool and argument digest) to one that ran and failed in
  this run is not put to a person again: a correction quoting the failure, the end of the run
  (``stalled``) when the model asks for it again; the same call (tool and argument digest) a third round
  in a row with nothing new learned is a stall: a correction the first time, the end of the run
  (``stalled``) the next.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from plangate._models import built
from plangate.agent._state import Stall
from plangate.decisions import Decision, RoundValidation, digest_arguments
from plangate.events import JsonObject
from plangate.tools import Tool, ToolArgumentsError, Toolset, needs_consent

RoundAct = Literal["speak", "tool", "consent", "ask", "advance", "finish", "abort", "correct", "stalled"]
"""What a judged round does: speak only, run a tool, ask consent for one, ask the user, advance the plan,
finish, abort on the model's request, correct the model, or end a stalled run."""

STALL_ROUNDS = 3
"""The same call this many rounds in a row, learning nothing new, is a stall."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What the verdict depends on besides the decision.

    Attributes:
        plan_length: the number of plan steps, or None without a plan.
        step_index: the current step (0-based).
        evidence: successful receipts bound to the current step.
        waiting: whether an interaction is open.
        step_condition: the current step's ``done_when`` when it is a condition, and why it does not hold
            (needed only to judge a ``next_plan`` or ``done``).
        goal: the run's ``done_when`` condition, and why it does not hold (likewise).
        failed: the writes that ran and failed in this run, by call key, with what the failure said.
        succeeded: the writes that ran and succeeded in this run, by call key, with their receipt's summary.
        repeats: the writes (failed or done) the model was already told not to repeat.
    """

    plan_length: int | None
    step_index: int
    evidence: int
    toolset: Toolset
    always_execute: bool
    stall: Stall | None
    waiting: bool
    step_condition: tuple[str, str] | None = None
    goal: tuple[str, str] | None = None
    failed: Mapping[str, str] = field(default_factory=dict)
    succeeded: Mapping[str, str] = field(default_factory=dict)
    repeats: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call that passed flow: the tool, its validated arguments and their digest."""

    tool: Tool
    arguments: JsonObject
    digest: str

    @property
    def key(self) -> str:
        """What stall detection compares: the tool's name and the arguments' digest."""
        return f"{self.tool.name}:{self.digest}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement of one round.

    Attributes:
        validation: the record of the three checks.
        act: what the round does.
        code: the correction code (``act`` is ``correct`` or ``stalled``), else ``""``.
        message: the correction the model reads next round.
        call: the tool call, when the decision carried a valid one.
    """

    validation: RoundValidation
    act: RoundAct
    code: str = ""
    message: str = ""
    call: Call | None = None


@dataclass(frozen=True, slots=True)
class _Check:
    passed: bool = True
    reason: str = ""
    code: str = ""


def _fail(code: str, reason: str) -> _Check:
    return _Check(False, reason, code)


def _flow(decision: Decision, facts: Facts) -> tuple[_Check, RoundAct, Call | None]:
    step = facts.step_index + 1
    action = decision.action
    if action == "next_plan":
        if facts.plan_length is None:
            reason = "next_plan needs a current plan step, and there is no plan: declare done when finished"
            return _fail("no_plan", reason), "correct", None
        if facts.step_index >= facts.plan_length - 1:
            reason = f"step {step} is the last step of the plan: declare done when it is complete"
            return _fail("last_step", reason), "correct", None
        return _Check(), "advance", None
    if action == "done":
        if facts.plan_length is not None and facts.step_index != facts.plan_length - 1:
            reason = (
                f"done needs the last plan step, and step {step} of {facts.plan_length} is current: "
                "declare next_plan when it is complete"
            )
            return _fail("not_last_step", reason), "correct", None
        return _Check(), "finish", None
    if action == "abort":
        return _Check(), "abort", None
    if action == "ask_user":
        if not decision.speak:
            return _fail("no_question", "ask_user needs the question for the user in speak"), "correct", None
        return _Check(), "ask", None
    return _tool_flow(decision, facts)


def _tool_flow(decision: Decision, facts: Facts) -> tuple[_Check, RoundAct, Call | None]:
    intent = decision.tool_call
    if intent is None:
        return _Check(), "speak", None
    hint = facts.toolset.correction_for(intent.name)
    if hint:
        code = "inactive_tool" if intent.name in facts.toolset.registry else "unknown_tool"
        return _fail(code, hint), "correct", None
    tool = facts.toolset.get(intent.name)
    try:
        arguments = tool.validate(intent.arguments)
    except ToolArgumentsError as exc:
        reason = f"the arguments of {tool.name!r} do not fit its parameters: {exc}"
        return _fail("invalid_arguments", reason), "correct", None
    call = Call(tool, arguments, digest_arguments(arguments))
    if needs_consent(tool, facts.always_execute):
        note = f"write tool {tool.name!r} needs the user's consent: asking for it"
        return _Check(True, note), "consent", call
    note = ""
    if decision.action == "confirm":
        note = (
            f"confirm on read tool {tool.name!r} downgraded to continue"
            if tool.effect == "read"
            else f"write tool {tool.name!r} runs without asking: the run has always_execute"
        )
    return _Check(True, note), "tool", call


def _evidence(decision: Decision, facts: Facts) -> _Check:
    if decision.action not in ("next_plan", "done"):
        return _Check()
    step = facts.step_index + 1
    if facts.step_condition is not None:
        condition, why = facts.step_condition
        return _fail(
            "not_proven",
            f"step {step} is complete when its done_when holds, and the runtime checks that itself after "
            f"every receipt: {condition} does not hold yet ({why}); keep working on it",
        )
    if decision.action == "done" and facts.goal is not None:
        condition, why = facts.goal
        return _fail(
            "not_proven",
            f"the request is complete when its goal holds, and the runtime checks that itself after every "
            f"receipt: {condition} does not hold yet ({why}); keep working, or abort if it cannot be met",
        )
    if facts.plan_length is None:
        return _Check()
    if not decision.goal_check:
        return _fail("no_goal_check", f"step {step} needs a goal_check: say why its done_when is met")
    if facts.evidence == 0:
        return _fail("no_evidence", f"step {step} has no evidence yet: call a tool or ask the user")
    return _Check()


REPEATED_FAILURE = "repeated_failure"
"""The correction code of a write identical to one that failed in this run."""

REPEATED_WRITE = "repeated_write"
"""The correction code of a write identical to one that already succeeded in this run: a person is not
asked to approve a change that is made, and a repeat is not a change of its own (a goal of N changes is
proven by N different writes)."""

REPEATS = (REPEATED_FAILURE, REPEATED_WRITE)
"""The codes of a write that is not put to a person again; a second one in a row stops the run."""


def _safety(facts: Facts, call: Call | None) -> tuple[_Check, bool]:
    if facts.waiting:
        return _fail("interaction_open", "an interaction is open: wait for the person's answer"), False
    if call is not None and call.tool.effect == "write":
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        failure, done = facts.failed.get(call.key), facts.succeeded.get(call.key)
        if failure is not None:
            reason = (
                f"{call.tool.name} with {arguments} already ran in this run and failed ({failure}); it is "
                "not asked again: change the arguments, use another tool, or abort"
            )
            return _fail(REPEATED_FAILURE, reason), call.key in facts.repeats
        if done is not None:
            reason = (
                f"{call.tool.name} with {arguments} already ran in this run and succeeded ({done}); it is "
                "not asked again: do what is left of the request, or finish"
            )
            return _fail(REPEATED_WRITE, reason), call.key in facts.repeats
    stall = facts.stall
    if call is not None and stall is not None and stall.call == call.key and stall.count >= STALL_ROUNDS - 1:
        reason = (
            f"stalled: {call.tool.name!r} was called with the same arguments {stall.count} rounds in a row "
            "and returned nothing new; change the arguments, use another tool, or ask the user"
        )
        return _fail("stalled", reason), stall.warned
    return _Check(), False


def judge(decision: Decision, facts: Facts) -> Verdict:
    """Judge one round's decision against the run's facts (see the module docstring for the rules)."""
    flow, act, call = _flow(decision, facts)
    evidence = _evidence(decision, facts)
    safety, stop = _safety(facts, call)
    # what the checks found, made here: nothing to validate again
    validation = built(
        RoundValidation,
        {
            "flow_passed": flow.passed,
            "flow_reason": flow.reason,
            "evidence_passed": evidence.passed,
            "evidence_reason": evidence.reason,
            "safety_passed": safety.passed,
            "safety_reason": safety.reason,
        },
    )
    if stop:
        return Verdict(validation, "stalled", safety.code, safety.reason, call)
    for check in (flow, evidence, safety):
        if not check.passed:
            return Verdict(validation, "correct", check.code, check.reason, call)
    return Verdict(validation, act, call=call)


def malformed(message: str) -> RoundValidation:
    """The validation recorded for a round whose output could not be read as a decision."""
    return RoundValidation(flow_passed=False, flow_reason=f"malformed output: {message}")


__all__ = [
    "REPEATED_FAILURE",
    "REPEATED_WRITE",
    "REPEATS",
    "STALL_ROUNDS",
    "Call",
    "Facts",
    "RoundAct",
    "Verdict",
    "judge",
    "malformed",
]
