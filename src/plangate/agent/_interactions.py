"""Resolving the interaction a run waits on: check the resolution, then apply it in one commit.

For: ``check`` (every refusal happens here, before anything is written: an unknown id, an id that is not the
run's open interaction, a resolution that does not fit its kind, edited arguments that do not fit the tool)
and ``apply``, which commits the resolution with its consequences. The resolution is a compare-and-set in
the store, so of two concurrent resolutions exactly one wins; the loser's commit is rolled back whole.

What each resolution does:

- consent (``confirm``): ``Approve`` / ``Edit`` run exactly the stored call (or the edited one) through the
  write protocol (``_writes``), with no model call and no round consumed, and record a ``write_receipt``;
  ``Reject`` tells the model, as an observation, that the user declined and why.
- question (``ask_user``): the ``Answer`` joins the conversation and is a ``user_reply`` receipt of the
  current step (not while planning: no step is current yet).
- ``outcome_unknown``: the ``Answer`` settles the write's intent (recorded as not proven) and is a
  ``user_reply`` receipt; the model reads what the person said.
- plan consent: ``Approve`` starts the plan; ``Reject`` sends the run back to planning, with the reason.

Not for: finding the run or rebuilding it (``agent.py``, ``loop.load_loop``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from plangate.agent import _writes
from plangate.agent._batch import Batch, ReceiptSpec, WriteDone, result_event
from plangate.agent._state import InflightWrite, Waiting
from plangate.agent._transcript import UNKNOWN_OUTCOME
from plangate.decisions import digest_arguments
from plangate.errors import InteractionError, StaleInteraction
from plangate.events import (
    InteractionResolvedEvent,
    JsonObject,
    StepStartedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.interactions import Answer, Approve, Edit, Reject, Resolution, resolution_dict
from plangate.store import Interaction
from plangate.tools import ToolArgumentsError, ToolResult, clip_summary

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext


_ACCEPTS: dict[str, tuple[type[Resolution], ...]] = {
    "consent": (Approve, Edit, Reject),
    "question": (Answer,),
    "outcome_unknown": (Answer,),
    "plan": (Approve, Reject),
}

_REPLY_SUMMARY = 200


def check(loop: RunContext, interaction: Interaction, resolution: Resolution) -> JsonObject | None:
    """Refuse a resolution that cannot apply; returns the validated arguments of an ``Edit``.

    Raises:
        StaleInteraction: the interaction is resolved or expired, or is not the one the run waits on.
        InteractionError: the resolution does not fit the interaction, or edited arguments do not fit
            the tool.
    """
    waiting = loop.state.waiting
    if interaction.status != "open":
        raise StaleInteraction(
            f"interaction {interaction.id!r} of run {loop.run_id!r} is {interaction.status} already; "
            "expected an open one, nothing changed"
        )
    if waiting is None or waiting.interaction_id != interaction.id:
        current = f"it waits on {waiting.interaction_id!r}" if waiting else "it waits on no interaction"
        raise StaleInteraction(
            f"interaction {interaction.id!r} is not the one run {loop.run_id!r} waits on ({current}); "
            "nothing changed"
        )
    accepted = _ACCEPTS[waiting.purpose]
    if not isinstance(resolution, accepted):
        kinds = [str(kind.model_fields["kind"].default) for kind in accepted]
        names = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
        raise InteractionError(
            f"interaction {interaction.id!r} ({interaction.kind}) takes {names}; found {resolution.kind}, "
            "nothing changed"
        )
    if isinstance(resolution, Edit):
        return _edited(loop, waiting, resolution)
    return None


def _edited(loop: RunContext, waiting: Waiting, resolution: Edit) -> JsonObject:
    name = waiting.tool or ""
    tool = loop.toolset.registry.get(name)
    try:
        return tool.validate(resolution.arguments)
    except ToolArgumentsError as exc:
        raise InteractionError(
            f"the edited arguments of {name!r} do not fit its parameters: {exc}; nothing changed"
        ) from None


async def apply(
    loop: RunContext,
    resolution: Resolution,
    edited: JsonObject | None,
    by: str | None,
    *,
    act: bool = True,
    committed: Callable[[], object] | None = None,
) -> None:
    """Commit ``resolution`` of the run's open interaction (checked with ``check``) and its consequences.

    With ``act`` false, an approved write is only recorded as approved (``inflight``, no intent yet): the
    process that advances the run next starts it (``_writes.recover``), so nothing runs where the run is
    not advanced (a server that hands runs to workers). ``committed`` is called once the resolution is
    committed, before an approved write runs.

    Raises:
        StaleInteraction: another resolution won the race; nothing changed.
    """
    state = loop.state
    waiting = state.waiting
    if waiting is None:
        raise StaleInteraction(f"run {loop.run_id!r} waits on no interaction; nothing changed")
    state.waiting = None
    state.corrections = 0
    state.stall = None
    batch = Batch(
        [
            InteractionResolvedEvent(
                interaction_id=waiting.interaction_id, kind=waiting.kind, resolution=resolution.kind, by=by
            )
        ],
        resolve=(waiting.interaction_id, resolution_dict(resolution), by),
        status="running",
    )
    if waiting.purpose == "consent" and not isinstance(resolution, Reject):
        arguments = edited if edited is not None else dict(waiting.arguments or {})
        _start_write(loop, batch, waiting, arguments, record_intent=act)
        await loop.commit(batch)
        if committed is not None:
            committed()
        if act:
            await _writes.execute(loop)
        return
    if waiting.purpose == "consent":
        _declined(loop, batch, waiting, resolution)
    elif waiting.purpose == "plan":
        _plan_answered(loop, batch, resolution)
    else:
        _answered(loop, batch, waiting, resolution)
    await loop.commit(batch)
    if committed is not None:
        committed()


def _start_write(
    loop: RunContext, batch: Batch, waiting: Waiting, arguments: JsonObject, *, record_intent: bool
) -> None:
    name = waiting.tool or ""
    inflight = InflightWrite(
        key=waiting.interaction_id,
        tool=name,
        arguments=arguments,
        digest=digest_arguments(arguments),
        step_index=waiting.step_index,
    )
    loop.state.inflight = inflight
    if not record_intent:
        return  # the intent and the tool_call commit where the write runs, right before it
    batch.intent = inflight
    step_id = str(waiting.step_index) if loop.state.plan else None
    batch.events.append(ToolCallEvent(call_id=inflight.key, tool=name, arguments=arguments, step_id=step_id))


def _declined(loop: RunContext, batch: Batch, waiting: Waiting, resolution: Resolution) -> None:
    reason = resolution.reason.strip() if isinstance(resolution, Reject) else ""
    arguments = json.dumps(waiting.arguments or {}, ensure_ascii=False, sort_keys=True)
    observation = f"The user declined the call {waiting.tool} with {arguments}: " + (
        reason or "no reason given"
    )
    batch.events.append(
        ToolResultEvent(
            call_id=waiting.interaction_id,
            tool=waiting.tool or "",
            status="blocked",
            success=False,
            summary="declined by the user",
            observation=observation,
            error_code="rejected",
            error_message=reason or None,
            step_id=str(waiting.step_index) if loop.state.plan else None,
        )
    )


def _plan_answered(loop: RunContext, batch: Batch, resolution: Resolution) -> None:
    state = loop.state
    if isinstance(resolution, Approve) and state.plan:
        state.phase = "execute"
        batch.events.append(StepStartedEvent(step_index=0, content=state.plan[0].content))
        return
    state.plan = None
    state.step_index = 0
    state.phase = "plan"


def _answered(loop: RunContext, batch: Batch, waiting: Waiting, resolution: Resolution) -> None:
    text = resolution.text if isinstance(resolution, Answer) else ""
    summary = clip_summary(text, _REPLY_SUMMARY)
    if loop.state.phase == "execute":
        batch.receipts.append(
            ReceiptSpec(waiting.step_index, "user_reply", "ask_user", "", summary, output=text)
        )
    if waiting.purpose != "outcome_unknown" or waiting.write_key is None:
        return
    unknown = clip_summary(f"{UNKNOWN_OUTCOME}; the user said: {text}", _REPLY_SUMMARY)
    batch.write_done = WriteDone(
        waiting.write_key, waiting.step_index, False, unknown, tool=waiting.tool or "", output=text
    )
    outcome = ToolResult.failed(
        "outcome_unknown",
        "the write may or may not have happened",
        observation=(
            f"The call {waiting.tool} may or may not have happened before a restart; the user says: {text}"
        ),
    )
    step_id = str(waiting.step_index) if loop.state.plan else None
    batch.events.append(result_event(waiting.write_key, waiting.tool or "", outcome, step_id))


__all__ = ["apply", "check"]
