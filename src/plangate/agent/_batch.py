"""What one step of a run writes: the ``Batch`` that ``RunLoop.commit`` turns into one transaction.

For: the plain records the phases fill (events, receipts, an interaction to open, a resolution, a write's
intent or completion, the run's new status) so that a step's writes are gathered first and committed
together or not at all; and ``result_event``, the one way a tool's result becomes a ``tool_result`` event.
Not for: the transaction itself (``loop.py``) or deciding what to write (the phase modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from plangate._models import built
from plangate.agent._state import InflightWrite, WaitKind, WaitPurpose
from plangate.events import Event, InteractionTool, JsonObject, ToolResultEvent
from plangate.store import ReceiptSource, RunStatus
from plangate.tools import ToolResult


@dataclass(frozen=True, slots=True)
class Question:
    """An interaction to open (kind, prompt, the call it is about) and what its resolution is for."""

    kind: WaitKind
    purpose: WaitPurpose
    prompt: str
    step_index: int
    tool: InteractionTool | None = None
    write_key: str | None = None


@dataclass(frozen=True, slots=True)
class ReceiptSpec:
    """A receipt to record, bound to plan step ``step_index``; ``output`` is what its call returned."""

    step_index: int
    source: ReceiptSource
    name: str
    arguments_digest: str
    summary: str
    success: bool = True
    output: JsonValue = None


@dataclass(frozen=True, slots=True)
class WriteDone:
    """The completion of a write intent (its ``write_receipt``, for ``tool``, is recorded with it)."""

    key: str
    step_index: int
    success: bool
    summary: str
    result: JsonObject | None = None
    tool: str = ""
    output: JsonValue = None
    digest: str = ""
    """The digest of the arguments the write ran with."""


@dataclass
class Batch:
    """Everything one step of a run writes, committed together or not at all.

    Attributes:
        resolve: ``(interaction id, resolution, resolved by)``: resolved first, compare-and-set.
        intent: a write about to run: its intent is recorded.
        write_done: a write that ran (or was settled): its intent is completed with a receipt.
        status: the run's new status, when it changes.
    """

    events: list[Event] = field(default_factory=list)
    receipts: list[ReceiptSpec] = field(default_factory=list)
    question: Question | None = None
    resolve: tuple[str, JsonObject, str | None] | None = None
    intent: InflightWrite | None = None
    write_done: WriteDone | None = None
    status: RunStatus | None = None


def tool_output(outcome: ToolResult) -> JsonValue:
    """What a receipt keeps of a tool's result: its JSON data, else the observation the model read."""
    return outcome.data if outcome.data is not None else outcome.observation


def result_event(call_id: str, tool: str, outcome: ToolResult, step_id: str | None) -> ToolResultEvent:
    """The ``tool_result`` event of a call (built from a result already valid: nothing to check again)."""
    values = {
        "call_id": call_id,
        "tool": tool,
        "status": outcome.status,
        "success": outcome.success,
        "summary": outcome.summary,
        "observation": outcome.observation,
        "error_code": outcome.error_code,
        "error_message": outcome.error_message,
        "step_id": step_id,
    }
    return built(ToolResultEvent, values)


__all__ = ["Batch", "Question", "ReceiptSpec", "WriteDone", "result_event", "tool_output"]
