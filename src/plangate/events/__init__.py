"""Typed events of a run's log (a discriminated union) and their JSON form for storage and the wire.

For: the vocabulary engines use to say what happened and the one codec every reader uses. Not for:
keeping events (``plangate.store``) or streaming them (the server).

Build an event with its constructor, without ``run_id``/``seq``/``at``; the store fills those in::

    from plangate.events import SpeakEvent, event_from_json, event_to_json
    from plangate.store import open_store

    store = open_store(":memory:")
    run = store.create_run("agent", "plan my week", {})
    with store.transaction(run.id) as tx:
        stored = tx.append(SpeakEvent(text="Looking at your calendar"))
    assert (stored.run_id, stored.seq) == (run.id, 1)  # seq: 1, 2, ... gapless per run
    assert event_from_json(event_to_json(stored)) == stored
"""

from __future__ import annotations

from plangate.events.models import (
    EVENT_TYPES,
    BaseEvent,
    CorrectionEvent,
    Event,
    GateEvent,
    HeartbeatEvent,
    InteractionKind,
    InteractionOpenedEvent,
    InteractionResolvedEvent,
    InteractionTool,
    JsonObject,
    OpEvent,
    OutcomeEvent,
    OutcomeStatus,
    PlanEvent,
    PlanEventStep,
    Proof,
    ProofReceipt,
    ResolutionKind,
    ReviewEvent,
    RoundEvent,
    SpeakEvent,
    StatusEvent,
    StepAdvancedEvent,
    StepStartedEvent,
    StepStateEvent,
    StepStatus,
    ThinkingEvent,
    TokenUsage,
    ToolCallEvent,
    ToolResultEvent,
    ToolStatus,
)
from plangate.events.wire import (
    ENVELOPE_FIELDS,
    EVENT_ADAPTER,
    EVENT_FORMAT_VERSION,
    EventFormatError,
    event_from_dict,
    event_from_json,
    event_from_parts,
    event_to_dict,
    event_to_json,
    payload_json,
)

__all__ = [
    "ENVELOPE_FIELDS",
    "EVENT_ADAPTER",
    "EVENT_FORMAT_VERSION",
    "EVENT_TYPES",
    "BaseEvent",
    "CorrectionEvent",
    "Event",
    "EventFormatError",
    "GateEvent",
    "HeartbeatEvent",
    "InteractionKind",
    "InteractionOpenedEvent",
    "InteractionResolvedEvent",
    "InteractionTool",
    "JsonObject",
    "OpEvent",
    "OutcomeEvent",
    "OutcomeStatus",
    "PlanEvent",
    "PlanEventStep",
    "Proof",
    "ProofReceipt",
    "ResolutionKind",
    "ReviewEvent",
    "RoundEvent",
    "SpeakEvent",
    "StatusEvent",
    "StepAdvancedEvent",
    "StepStartedEvent",
    "StepStateEvent",
    "StepStatus",
    "ThinkingEvent",
    "TokenUsage",
    "ToolCallEvent",
    "ToolResultEvent",
    "ToolStatus",
    "event_from_dict",
    "event_from_json",
    "event_from_parts",
    "event_to_dict",
    "event_to_json",
    "payload_json",
]
