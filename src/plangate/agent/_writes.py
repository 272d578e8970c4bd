"""Exactly-once writes: run a write whose intent is committed, record its receipt, reconcile after a crash.

For: the second half of the write protocol of SPEC §6. Before a write tool runs, the caller commits its
intent (key = the consent's interaction id, or ``<run>:<round>`` under ``always_execute``) together with
``state.inflight``; ``execute`` then runs exactly that call with the key as idempotency key and commits the
receipt, clearing ``inflight``, in one transaction. If the process dies in between, the next ``advance``
finds ``inflight`` set and calls ``recover``, which never re-runs the write blindly (an ``inflight`` with no
intent at all is a write approved by a process that leaves the running to another, never started: it
starts): the tool's
``reconcile(key)`` says whether it happened (its earlier ``ToolResult``) or not (``None``: it runs now, under
the same key); a tool without ``reconcile`` (or one whose ``reconcile`` fails) marks the step
``outcome_unknown`` and asks a person. A write that comes back cut off (``ToolResult.outcome_unknown``:
its MCP server died or ran out of time after the call was sent) is treated the same way, at once: its
intent stays open and a person is asked whether it happened. Not for: deciding that a write may run
(``_validate``, ``_interactions``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plangate.agent._batch import Batch, Question, WriteDone, result_event, tool_output
from plangate.agent._state import InflightWrite
from plangate.events import Event, InteractionTool, StatusEvent, ToolCallEvent
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
    outcome = await tool.invoke(inflight.arguments, idempotency_key=inflight.key)
    if outcome.outcome_unknown:
        why = outcome.error_message or "the call was cut off"
        step_id = str(inflight.step_index) if loop.state.plan else None
        event = result_event(inflight.key, inflight.tool, outcome, step_id)
        await _ask_a_person(loop, inflight, why, cut_off=True, events=[event])
        return
    await finish(loop, inflight, outcome)


async def start(loop: RunContext, inflight: InflightWrite) -> None:
    """Commit the intent of an approved write that has none yet (with its ``tool_call``), then run it."""
    step_id = str(inflight.step_index) if loop.state.plan else None
    call = ToolCallEvent(
        call_id=inflight.key, tool=inflight.tool, arguments=inflight.arguments, step_id=step_id
    )
    await loop.commit(Batch([call], intent=inflight, status="running"))
    await execute(loop)


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
    )
    step_id = str(inflight.step_index) if loop.state.plan else None
    batch.events.append(result_event(inflight.key, inflight.tool, outcome, step_id))
    batch.status = "running"
    await loop.commit(batch)


async def recover(loop: RunContext) -> None:
    """Settle a write that was cut off between its intent and its receipt."""
    inflight = loop.state.inflight
    if inflight is None:
        return
    intent = loop.store.get_write_intent(inflight.key)
    if intent is None:
        # Approved where the run is not advanced (a server handing it to a worker): the intent commits
        # before any call, so without one the call never started. It starts here, as it would have there.
        await start(loop, inflight)
        return
    if intent.status == "done":
        # The receipt and the snapshot commit together, so this means the snapshot is behind the store.
        loop.state.inflight = None
        settled = StatusEvent(stage="execute", code="write_settled", text=f"{inflight.tool} done")
        await loop.commit(Batch([settled]))
        return
    tool = loop.toolset.registry.get(inflight.tool)
    if tool.reconcile is None:
        await _ask_a_person(loop, inflight, "the tool has no reconcile hook")
        return
    try:
        found = await asyncio.to_thread(tool.reconcile, inflight.key)
    except Exception as exc:
        await _ask_a_person(loop, inflight, f"its reconcile hook failed: {type(exc).__name__}: {exc}")
        return
    if found is None:
        note = f"{inflight.tool} left no trace before the restart; running it now, under the same key"
        await loop.commit(Batch([StatusEvent(stage="execute", code="not_run", text=note)]))
        await execute(loop)
        return
    if not isinstance(found, ToolResult):
        await _ask_a_person(
            loop, inflight, f"its reconcile hook returned a {type(found).__name__}, not a ToolResult"
        )
        return
    note = f"{inflight.tool} had already run before the restart; its result was reconciled"
    await finish(loop, inflight, found, Batch([StatusEvent(stage="execute", code="reconciled", text=note)]))


async def _ask_a_person(
    loop: RunContext,
    inflight: InflightWrite,
    why: str,
    *,
    cut_off: bool = False,
    events: Sequence[Event] = (),
) -> None:
    arguments = json.dumps(inflight.arguments, ensure_ascii=False, sort_keys=True)
    lost = (
        f"its answer was lost ({why})" if cut_off else "the run stopped before its result was recorded"
    )
    prompt = (
        f"The approved call {inflight.tool} with {arguments} started, but {lost}, so it may or may not have "
        "happened. Please check, and tell me whether it did."
    )
    loop.state.inflight = None
    tool = InteractionTool(name=inflight.tool, arguments=inflight.arguments, arguments_digest=inflight.digest)
    batch = Batch(
        [*events, StatusEvent(stage="execute", code="outcome_unknown", text=f"{inflight.tool}: {why}")],
        question=Question("ask_user", "outcome_unknown", prompt, inflight.step_index, tool, inflight.key),
        status="waiting",
    )
    await loop.commit(batch)


__all__ = ["execute", "finish", "recover", "start"]
