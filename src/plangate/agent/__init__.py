"""The agent runtime: route → plan → (plan consent) → execute ↺ → deliver, durable and resumable.

What it is for: ``Agent`` (run, stream, resume, cancel), its ``AgentResult`` and ``Outcome``, and the
``RunContext`` its tools may take (the ``deps`` of a run). The model
declares one decision per round; the runtime judges it (flow, evidence, safety), asks a person before any
write, advances a plan step only on evidence bound to that step, stops runaway loops with a round budget,
and commits every round in one transaction so a run can be resumed from another process with only its id,
the interaction id and the resolution. What it is not for: the decision format (``plangate.decisions``),
tools (``plangate.tools``), model providers (``plangate.models``) or the store (``plangate.store``).

Layout: ``agent`` (the public API), ``loop`` (orchestration and the one commit per step), the phases
``_route``, ``_plan``, ``_execute``, ``_deliver``, with ``_validate`` (the verdict of a round),
``_interactions`` (resolutions), ``_writes`` (exactly-once writes), ``_context`` (prompts),
``_calls`` (model calls), ``_state`` (the versioned snapshot), ``_transcript`` (the record folded from
events) and ``_stream``.

A run that needs consent, resumed with only ids::

    from plangate.agent import Agent
    from plangate.interactions import Approve
    from plangate.models import ScriptedModel
    from plangate.store import open_store
    from plangate.tools import tool

    @tool(effect="write")
    def book(room: str) -> str:
        '''Book a meeting room.'''
        return f"booked {room}"

    store = open_store(":memory:")
    model = ScriptedModel([
        '{"action": "continue", "tool_call": {"name": "book", "arguments": {"room": "Blue"}}}',
        '{"action": "done", "speak": "Booked."}',
        "The Blue room is booked.",
    ])
    result = Agent(model=model, tools=[book], store=store, mode="react").run("Book the Blue room")
    assert result.waiting and result.interaction.kind == "confirm"
    result = Agent(model=model, tools=[book], store=store).resume(
        result.run_id, result.interaction.id, Approve()
    )
    assert (result.status, result.answer) == ("completed", "The Blue room is booked.")
"""

from __future__ import annotations

from plangate.agent._state import SNAPSHOT_VERSION, AgentConfig, Mode
from plangate.agent._stream import AgentStream
from plangate.agent.agent import Agent
from plangate.agent.result import AgentResult, Outcome, OutcomeStatus, OutputT
from plangate.tools.context import DepsT, RunContext

__all__ = [
    "SNAPSHOT_VERSION",
    "Agent",
    "AgentConfig",
    "AgentResult",
    "AgentStream",
    "DepsT",
    "Mode",
    "Outcome",
    "OutcomeStatus",
    "OutputT",
    "RunContext",
]
