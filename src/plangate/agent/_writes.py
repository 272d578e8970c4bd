"""The agent's side of the one write protocol (``plangate.runs.writes``): intents, receipts, recovery.

For: what the protocol leaves to each engine — committing with the run's own state. Before a write tool
runs, the caller commits its intent (key = the consent's interaction id, or ``<run>:<round>`` under
``always_execute``) together with ``state.inflight``; ``execute`` then runs exactly that call under the key
and commits the receipt, clearing ``inflight``, in one transaction. A process that finds ``inflight`` set
calls ``recover``, which follows the protocol's one decision tree (an approved write with no intent
starts; an open intent is reconciled, run again if the tool is idempotent, or put to a person). A write
whose outcome is unknown leaves its intent open and asks a person whether it happened. Not for: deciding
that a write may run (``_validate``, ``_interactions``) or the decision tree itself (``runs/writes.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from plangate.agent._batch import Batch, Question, WriteDone, result_event, tool_output
from plangate.agent._state import InflightWrite
from plangate.events import Event, InteractionTool, StatusEvent, ToolCallEvent
from plangate.runs import consent
from plangate.runs import writes as protocol
from plangate.tools import ToolResult

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext


async def execute(loop: RunContext) -> None:
    """Run the in-flight write (its intent is committed) and commit its receipt."""
    inflight = loop.state.inflight
    if inflight is None:
        return
    tool = loop.toolset.registry.get(inflight.tool)
    await loop.confirm_lease()  # a process that lost the run (frozen, taken over) never writes for it
    await _settle(loop, inflight, await protocol.call(tool, _call(inflight)))


async def start(loop: RunContext, inflight: InflightWrite) -> None:
    """Commit the intent of an approved write that has none yet (with its ``tool_call``), then run it."""
    await _commit_intent(loop, inflight)
    await execute(loop)


async def recover(loop: RunContext) -> None:
    """Settle a write that was approved or cut off before the process that advanced the run stopped."""
    inflight = loop.state.inflight
    if inflight is None:
        return

    async def begin() -> None:
        await _commit_intent(loop, inflight)
        await loop.confirm_lease()

    outcome = await protocol.recover(loop.store, loop.toolset.registry, _call(inflight), begin)
    await _settle(loop, inflight, outcome)


async def finish(
    loop: RunContext, inflight: InflightWrite, outcome: ToolResult, batch: Batch | None = None
) -> None:
    """Commit the write's receipt (and its ``tool_result`` event), clearing ``inflight``."""
    batch = batch if batch is not None else Batch()
    loop.state.inflight = None
    batch.write_done = WriteDone(
        inflight.key,
        inflight.step_index,
        outcome.success,
        outcome.summary,
        outcome.model_dump(mode="json"),
        tool=inflight.tool,
        output=tool_output(outcome),
        digest=inflight.digest,
    )
    batch.events.append(result_event(inflight.key, inflight.tool, outcome, _step_id(loop, inflight)))
    batch.status = "running"
    await loop.commit(batch)


async def _settle(loop: RunContext, inflight: InflightWrite, outcome: protocol.WriteOutcome) -> None:
    if isinstance(outcome, protocol.Unknown):
        # A call that came back cut off has a result to log; one never made here (recovery) has none.
        events: list[Event] = []
        if outcome.result is not None:
            events.append(result_event(inflight.key, inflight.tool, outcome.result, _step_id(loop, inflight)))
        await _ask_a_person(loop, inflight, outcome.why, cut_off=outcome.result is not None, events=events)
        return
    notes: list[Event] = []
    if outcome.note is not None:
        notes.append(StatusEvent(stage="execute", code=outcome.note[0], text=outcome.note[1]))
    if outcome.recorded:
        # The receipt and the snapshot commit together, so this means the snapshot is behind the store.
        loop.state.inflight = None
        await loop.commit(Batch(notes))
        return
    await finish(loop, inflight, outcome.result, Batch(notes))


async def _commit_intent(loop: RunContext, inflight: InflightWrite) -> None:
    step_id = _step_id(loop, inflight)
    call = ToolCallEvent(
        call_id=inflight.key, tool=inflight.tool, arguments=inflight.arguments, step_id=step_id
    )
    await loop.commit(Batch([call], intent=inflight, status="running"))


def _call(inflight: InflightWrite) -> protocol.WriteCall:
    return protocol.WriteCall(inflight.tool, inflight.arguments, inflight.key)


def _step_id(loop: RunContext, inflight: InflightWrite) -> str | None:
    return str(inflight.step_index) if loop.state.plan else None


async def _ask_a_person(
    loop: RunContext,
    inflight: InflightWrite,
    why: str,
    *,
    cut_off: bool = False,
    events: Sequence[Event] = (),
) -> None:
    lost = f"its answer was lost ({why})" if cut_off else why
    prompt = consent.unknown_prompt(inflight.tool, inflight.arguments, lost, "tell me whether it did.")
    loop.state.inflight = None
    tool = InteractionTool(name=inflight.tool, arguments=inflight.arguments, arguments_digest=inflight.digest)
    batch = Batch(
        [*events, StatusEvent(stage="execute", code="outcome_unknown", text=f"{inflight.tool}: {why}")],
        question=Question("ask_user", "outcome_unknown", prompt, inflight.step_index, tool, inflight.key),
        status="waiting",
    )
    await loop.commit(batch)


__all__ = ["execute", "finish", "recover", "start"]
