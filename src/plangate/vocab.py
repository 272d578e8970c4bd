"""plangate's shared vocabulary: the names every layer agrees on, defined once.

For: the kinds of runs, the statuses of runs, steps, interactions, write intents and copilot turns, how a
run ends, where evidence comes from and what a person is asked — as ``Literal`` types with the tuple of
their values beside them, so code, stored rows (the store's SQL ``CHECK`` lists, tied to these by a test)
and the wire all read from one place. Not for: behaviour (which engine runs a kind: ``plangate.runs``) or
records (``plangate.store``, ``plangate.events``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

RunKind = Literal["formula", "agent", "ask"]
"""What engine a run belongs to: a formula run, an agent run, a copilot turn's run."""

RunStatus = Literal[
    "queued", "running", "waiting", "completed", "failed", "aborted", "exhausted", "cancelled"
]
"""Where a run stands."""

OutcomeStatus = Literal["completed", "failed", "aborted", "exhausted", "cancelled"]
"""How a run ended, whatever its kind: the terminal run statuses."""

StepStatus = Literal["pending", "ready", "running", "waiting", "complete", "failed", "skipped", "cancelled"]
"""Where a formula step stands."""

InteractionKind = Literal["ask_user", "confirm", "plan_consent", "approval"]
"""What a person is asked: a question, consent to a call, consent to a plan, an approval."""

InteractionStatus = Literal["open", "resolved", "expired"]
"""Where an interaction stands."""

ResolutionKind = Literal["approve", "reject", "answer", "edit"]
"""What a person may answer."""

ReceiptSource = Literal["tool_observation", "write_receipt", "user_reply"]
"""Where a piece of evidence came from: a read's observation, an executed write, a person's reply."""

WriteIntentStatus = Literal["intent", "done"]
"""Where an exactly-once write stands: its intent committed, or its receipt too."""

TurnStatus = Literal["failed", "cancelled", "unusable", "partial", "done"]
"""How a copilot turn (and each of its attempts) ended."""

RUN_KINDS: Final[tuple[RunKind, ...]] = get_args(RunKind)
RUN_STATUSES: Final[tuple[RunStatus, ...]] = get_args(RunStatus)
OUTCOME_STATUSES: Final[tuple[OutcomeStatus, ...]] = get_args(OutcomeStatus)
STEP_STATUSES: Final[tuple[StepStatus, ...]] = get_args(StepStatus)
INTERACTION_KINDS: Final[tuple[InteractionKind, ...]] = get_args(InteractionKind)
INTERACTION_STATUSES: Final[tuple[InteractionStatus, ...]] = get_args(InteractionStatus)
RESOLUTION_KINDS: Final[tuple[ResolutionKind, ...]] = get_args(ResolutionKind)
RECEIPT_SOURCES: Final[tuple[ReceiptSource, ...]] = get_args(ReceiptSource)
WRITE_INTENT_STATUSES: Final[tuple[WriteIntentStatus, ...]] = get_args(WriteIntentStatus)
TURN_STATUSES: Final[tuple[TurnStatus, ...]] = get_args(TurnStatus)

TERMINAL_STATUSES: Final[frozenset[RunStatus]] = frozenset(OUTCOME_STATUSES)
"""Statuses a run never leaves on its own: one per way it can end."""

__all__ = [
    "INTERACTION_KINDS",
    "INTERACTION_STATUSES",
    "OUTCOME_STATUSES",
    "RECEIPT_SOURCES",
    "RESOLUTION_KINDS",
    "RUN_KINDS",
    "RUN_STATUSES",
    "STEP_STATUSES",
    "TERMINAL_STATUSES",
    "TURN_STATUSES",
    "WRITE_INTENT_STATUSES",
    "InteractionKind",
    "InteractionStatus",
    "OutcomeStatus",
    "ReceiptSource",
    "ResolutionKind",
    "RunKind",
    "RunStatus",
    "StepStatus",
    "TurnStatus",
    "WriteIntentStatus",
]
