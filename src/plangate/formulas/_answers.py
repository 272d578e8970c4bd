"""A person's answer to a formula step's interaction: what it does to the step, committed in one transaction.

For: ``answer_step``, which checks a resolution against what the step waits for and returns the step's new
state (a refusal raises before anything is written), and ``commit_answer``, which writes the resolution,
its event, the step's new state and, for a write whose outcome was unknown, the receipt that settles its
intent, together. Both the scheduler advancing a run and a process that only answers use them, so an answer
means the same wherever it lands. Not for: finding the step or the run (``runtime.py``, ``_scheduler.py``).

What each answer does, by what the step waits for:

- a ``human`` step: approve completes it (``{approved: true}``), an answer completes it with ``{answer}``,
  reject fails it;
- a gate's ``human`` approval: approve (or an answer) opens the gate, reject fails the step;
- a write's consent (``confirm``): approve runs exactly the stored call, edit runs the edited one (validated
  against the tool's schema first), reject fails the step with the reason;
- a write whose outcome is unknown: approve says it happened (the step completes, nothing runs again),
  reject says it did not (the step fails); either settles the write's intent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import JsonValue

from plangate.errors import InteractionError
from plangate.events import InteractionResolvedEvent, StepStateEvent, ToolResultEvent
from plangate.formulas._runstate import StepRun
from plangate.interactions import Answer, Approve, Edit, Reject, Resolution, parse_resolution, resolution_dict
from plangate.runs.consent import arguments_digest
from plangate.store import Documents, Interaction, Store, Transaction
from plangate.tools import ToolArgumentsError, ToolRegistry


@dataclass(frozen=True)
class Settled:
    """The receipt that settles a write's intent once a person said whether it happened."""

    key: str
    tool: str
    success: bool
    summary: str


@dataclass(frozen=True)
class Answered:
    """What an answer does to its step: the step's new state, and the write intent it settles, if any."""

    event: StepStateEvent
    step_index: int = 0
    settles: Settled | None = None


logger = logging.getLogger("plangate.formulas")

STORED_ANSWERS = "formula-answers"
"""The documents' namespace of answers stored for the process that advances a run (keyed by interaction)."""


def answer_step(
    step: StepRun,
    resolution: Resolution,
    tools: ToolRegistry,
    step_index: int = 0,
    *,
    asked: str | None = None,
) -> Answered:
    """The step's transition for ``resolution``, or a refusal. ``asked``: the kind of the interaction it
    answers (``ask_user`` for a step that asks for text).

    Raises:
        InteractionError: the resolution does not fit what the step waits for; nothing changed.
    """
    kind = step.wait.get("kind")
    if asked == "ask_user" and kind == "human" and isinstance(resolution, Approve):
        # the steps after it read its answer (``steps.<id>.output.answer``), which an approval has not
        raise InteractionError(
            f"step {step.id!r} asks for an answer: answer it with text (kind 'answer'), or reject it"
        )
    if kind == "consent":
        return Answered(_consent(step, resolution, tools), step_index)
    if kind == "outcome_unknown":
        return _outcome_unknown(step, resolution, step_index)
    if isinstance(resolution, Edit):
        raise InteractionError(
            "edit applies to a tool call's consent; a formula step takes approve, reject or answer"
        )
    gate = kind == "gate_human"
    if isinstance(resolution, Reject):
        return Answered(_failed(step, ("gate " if gate else "") + _rejected(resolution)), step_index)
    if gate:
        event = StepStateEvent(
            step_id=step.id,
            status="ready",
            reason="gate approved",
            attempt=step.attempt,
            wait={"approved": True},
        )
        return Answered(event, step_index)
    output: dict[str, JsonValue] = (
        {"answer": resolution.text} if isinstance(resolution, Answer) else {"approved": True}
    )
    event = StepStateEvent(
        step_id=step.id,
        status="complete",
        reason=f"{resolution.kind} by a person",
        attempt=step.attempt,
        output=output,
    )
    return Answered(event, step_index)


def commit_answer(
    tx: Transaction,
    interaction: Interaction,
    resolution: Resolution,
    by: str | None,
    answered: Answered | None,
) -> None:
    """Write the resolution (compare-and-set: a stale one raises and rolls everything back) with what it does.

    Raises:
        StaleInteraction: the interaction is not open any more.
    """
    tx.resolve_interaction(interaction.id, resolution_dict(resolution), by)
    tx.append(
        InteractionResolvedEvent(
            interaction_id=interaction.id, kind=interaction.kind, resolution=resolution.kind, by=by
        )
    )
    if answered is None:
        return
    settles = answered.settles
    if settles is not None:
        tx.complete_write_intent(
            settles.key, step_index=answered.step_index, success=settles.success, summary=settles.summary
        )
        tx.append(
            ToolResultEvent(
                call_id=settles.key,
                tool=settles.tool,
                status="done" if settles.success else "failed",
                success=settles.success,
                summary=settles.summary,
                observation=settles.summary,
                error_code=None if settles.success else "outcome_unknown",
                step_id=answered.event.step_id,
            )
        )
    tx.append(answered.event)


def _consent(step: StepRun, resolution: Resolution, tools: ToolRegistry) -> StepStateEvent:
    wait = step.wait
    if isinstance(resolution, Reject):
        return _failed(step, _rejected(resolution))
    if isinstance(resolution, Answer):
        raise InteractionError(
            f"step {step.id!r} asks for consent to a write: it takes approve, edit or reject; found answer, "
            "nothing changed"
        )
    arguments = wait.get("arguments")
    reason = "approved by a person"
    if isinstance(resolution, Edit):
        arguments = _edited(str(wait.get("tool", "")), resolution, tools)
        reason = "approved by a person, with edited arguments"
    approved: dict[str, JsonValue] = {
        "kind": "consent",
        "approved": True,
        "interaction_id": wait.get("interaction_id"),
        "tool": wait.get("tool"),
        "arguments": arguments,
        "digest": arguments_digest(arguments if isinstance(arguments, dict) else {}),
    }
    return StepStateEvent(step_id=step.id, status="ready", reason=reason, attempt=step.attempt, wait=approved)


def _edited(name: str, resolution: Edit, tools: ToolRegistry) -> JsonValue:
    if name not in tools:
        raise InteractionError(
            f"the edited arguments of {name!r} cannot be checked here: the tool is not available in this "
            "process; nothing changed"
        )
    try:
        return tools.get(name).validate(resolution.arguments)
    except ToolArgumentsError as exc:
        raise InteractionError(
            f"the edited arguments of {name!r} do not fit its parameters: {exc}; nothing changed"
        ) from None


def _outcome_unknown(step: StepRun, resolution: Resolution, step_index: int) -> Answered:
    if not isinstance(resolution, Approve | Reject):
        raise InteractionError(
            f"step {step.id!r} asks whether a write happened: approve if it did, reject if it did not; "
            f"found {resolution.kind}, nothing changed"
        )
    wait = step.wait
    key, tool = str(wait.get("key", "")), str(wait.get("tool", ""))
    if isinstance(resolution, Approve):
        summary = "outcome unknown; a person said it happened"
        event = StepStateEvent(
            step_id=step.id,
            status="complete",
            reason=f"{tool}: {summary}",
            attempt=step.attempt,
            output={"outcome_unknown": True, "happened": True},
        )
        return Answered(event, step_index, Settled(key, tool, True, summary))
    said = f": {resolution.reason.strip()}" if resolution.reason.strip() else ""
    summary = "outcome unknown; a person said it did not happen"
    event = _failed(step, f"{tool}: {summary}{said}")
    return Answered(event, step_index, Settled(key, tool, False, summary))


def _failed(step: StepRun, reason: str) -> StepStateEvent:
    return StepStateEvent(step_id=step.id, status="failed", reason=reason, attempt=step.attempt)


def _rejected(resolution: Reject) -> str:
    return f"rejected: {resolution.reason}" if resolution.reason else "rejected"


def stored_answers(store: Store, run_id: str) -> Iterator[tuple[Interaction, Resolution, str | None]]:
    """The answers another process left in the store for the run's open questions (``FormulaRunner.answer``
    when it could not take the run), each as it was given; one that cannot be read is logged and skipped."""
    documents = Documents(store)
    for interaction in store.list_interactions(status="open", run_id=run_id):
        stored = documents.get(STORED_ANSWERS, interaction.id)
        if stored is None:
            continue
        by, given = stored.value.get("by"), stored.value.get("resolution")
        try:
            resolution = parse_resolution(given if isinstance(given, dict) else {})
        except InteractionError as exc:
            logger.warning("run %s: stored answer to %s not applied: %s", run_id, interaction.id, exc)
            continue
        yield interaction, resolution, by if isinstance(by, str) else None


def answer_handed_on(store: Store, interaction_id: str) -> bool:
    """Whether an answer to ``interaction_id`` is stored for the process that advances its run to take
    (given, safe in the store, not applied yet)."""
    return Documents(store).get(STORED_ANSWERS, interaction_id) is not None


__all__ = [
    "STORED_ANSWERS",
    "Answered",
    "Settled",
    "answer_handed_on",
    "answer_step",
    "commit_answer",
    "stored_answers",
]
