"""The one write protocol: a write runs exactly once, and a write cut off is settled by one decision tree.

For: what every engine does with a consented write (SPEC §6). The intent (idempotency key = the consent's
interaction id, or a key of the run's own) is committed before the call, by the engine, with its own state;
:func:`call` then runs the tool under that key; the receipt commits with the engine's next transition. A
call that times out or comes back cut off (an MCP server that died after the call was sent) may still have
happened, so its outcome is unknown — unless the tool is idempotent. After a crash, :func:`recover` decides
what became of a write from what the store holds, the same way for an agent round and a formula step:

1. no intent → the call never started (approved where the run is not advanced) → start it: the engine
   commits its intent (``start``), then it runs — its consent stands;
2. intent done → settle from the stored result (its receipt is there already);
3. intent open → the tool's ``reconcile(key)`` hook: a result → settled with it; None → it never
   happened: run it now, under the same key; a hook that fails → unknown;
4. no hook and the tool is ``idempotent`` → run it again under the same key;
5. otherwise → unknown: a person is asked whether it happened (and a tool missing here cannot be
   reconciled here either).

Not for: committing anything (each engine commits intents, receipts and questions with its own state) or
asking for consent (``consent.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from plangate.store import Store
from plangate.tools import Reconciler, Tool, ToolRegistry, ToolResult

Note = tuple[str, str]
"""``(code, text)`` of the status event that says how a write was settled (``reconciled``, ``not_run`` …)."""


@dataclass(frozen=True, slots=True)
class Settled:
    """The write's result is known.

    Attributes:
        result: what the call returned (or what its reconcile hook or stored receipt says it returned).
        note: how recovery settled it, when it did (None for a plain call).
        recorded: its receipt is in the store already: nothing to commit but the engine's own state.
    """

    result: ToolResult
    note: Note | None = None
    recorded: bool = False


@dataclass(frozen=True, slots=True)
class Unknown:
    """Nobody can tell whether the write happened: a person must say.

    Attributes:
        why: what cut it off, in words for that person (``it timed out``, ``the tool has no reconcile hook``).
        result: what came back, when something did (a cut-off call's error), for the engine's log.
    """

    why: str
    result: ToolResult | None = None


WriteOutcome = Settled | Unknown


@dataclass(frozen=True, slots=True)
class WriteCall:
    """A consented write: the tool, the exact arguments, and the key it runs under."""

    tool: str
    arguments: Mapping[str, JsonValue]
    key: str


async def call(
    tool: Tool, write: WriteCall, *, limit: float | None = None, note: Note | None = None
) -> WriteOutcome:
    """Run the write under its key, for at most ``limit`` seconds (None: no limit but the tool's own).

    A call that timed out or was cut off after it was sent has an unknown outcome unless the tool is
    idempotent: a sync tool's thread goes on after a timeout, so running it again could write twice.
    """
    try:
        async with asyncio.timeout(limit):
            result = await tool.invoke(dict(write.arguments), idempotency_key=write.key)
    except TimeoutError:
        why = f"it was still running when the step timed out after {limit:g} s"
        result = ToolResult.failed("tool_timeout", why)
    if (result.error_code == "tool_timeout" or result.outcome_unknown) and not tool.idempotent:
        return Unknown(result.error_message or "the call was cut off", result)
    return Settled(result, note)


async def recover(
    store: Store,
    tools: ToolRegistry,
    write: WriteCall,
    start: Callable[[], Awaitable[None]],
    *,
    limit: float | None = None,
) -> WriteOutcome:
    """Settle a write that was approved or started before the process that advanced its run stopped.

    Args:
        store: where its intent and receipt are.
        tools: this process's tools (a write is reconciled or run again only with its own tool).
        write: the write as its run recorded it.
        start: commits the write's intent, when it has none (the call never started).
        limit: the most seconds a call made here may take.
    """
    intent = store.get_write_intent(write.key)
    if intent is None:
        if write.tool not in tools:
            return Unknown(f"{write.tool!r} is not available here to run it")
        await start()
        return await call(tools.get(write.tool), write, limit=limit)
    if intent.status == "done":
        result = ToolResult.model_validate(intent.result) if intent.result else ToolResult.done("done")
        return Settled(result, ("write_settled", f"{write.tool} had its receipt already"), recorded=True)
    stopped = "the run stopped before its result was recorded"
    if write.tool not in tools:
        return Unknown(f"{stopped}, and {write.tool!r} is not available here to reconcile it")
    tool = tools.get(write.tool)
    if tool.reconcile is not None:
        return await _reconciled(tool, tool.reconcile, write, stopped, limit)
    if tool.idempotent:
        note = ("rerun", f"{tool.name} is idempotent: running it again under the same key")
        return await call(tool, write, limit=limit, note=note)
    return Unknown(f"{stopped} (the tool has no reconcile hook)")


async def _reconciled(
    tool: Tool, reconcile: Reconciler, write: WriteCall, stopped: str, limit: float | None
) -> WriteOutcome:
    try:
        found = await asyncio.to_thread(reconcile, write.key)
    except Exception as exc:
        return Unknown(f"{stopped} (its reconcile hook failed: {type(exc).__name__}: {exc})")
    if found is None:
        text = f"{tool.name} left no trace before the restart; running it now, under the same key"
        note = ("not_run", text)
        return await call(tool, write, limit=limit, note=note)
    if not isinstance(found, ToolResult):
        kind = type(found).__name__
        return Unknown(f"{stopped} (its reconcile hook returned a {kind}, not a ToolResult)")
    note = ("reconciled", f"{tool.name} had already run before the restart; its result was reconciled")
    return Settled(found, note)


__all__ = ["Note", "Settled", "Unknown", "WriteCall", "WriteOutcome", "call", "recover"]
