"""Store access for turns: the ``ask`` run and its events, the conversation and its history, and the finished
turn, written in one transaction with the run's outcome (so a turn is stored whole or not at all).

For: every read and write a turn makes in the store, in one place (the run through ``Store``, the
conversation and the turn through the ``Conversations`` repository, its place in the conversation through
``TurnOrder``). Not for: what a turn decides, or the
SQL of conversations and turns (``copilot/_conversations.py``).
"""

from __future__ import annotations

import asyncio
import secrets

from pydantic import JsonValue

from plangate._offloop import off_loop
from plangate.copilot._conversations import Conversation, Conversations, TurnStatus
from plangate.copilot._turn_order import TurnOrder
from plangate.copilot.policy import HISTORY_TURNS, HistoryItem, clip
from plangate.copilot.results import Attempt, Turn
from plangate.events import Event, StatusEvent
from plangate.runs import Outcome, OutcomeStatus
from plangate.runs.contract import Transactions
from plangate.store import TERMINAL_STATUSES, RunStatus, Store

SNAPSHOT_VERSION = 1
"""The format of an ``ask`` run's snapshot: ``{question, attempts: [stored attempts]}``."""
TITLE_CHARS = 80
_TURN_POLL = 0.2
"""Seconds between two looks of a queued turn at its conversation."""

_RUN_STATUS: dict[TurnStatus, RunStatus] = {
    "done": "completed",
    "partial": "completed",
    "unusable": "failed",
    "failed": "failed",
    "cancelled": "cancelled",
}


def new_turn_id() -> str:
    """A fresh turn id."""
    return "turn_" + secrets.token_urlsafe(12)


def new_run_id() -> str:
    """A fresh run id for a turn's ``ask`` run (known before the run exists, so a stream can follow it)."""
    return "run_" + secrets.token_urlsafe(12)


def conversation_for(store: Store, conversation: str | None, question: str, owner: str) -> Conversation:
    """The conversation a turn joins: the one named (it must exist and be ``owner``'s), else a new one.

    Raises:
        NotFoundError: the named conversation does not exist (for this owner).
    """
    conversations = Conversations(store)
    if conversation is not None:
        return conversations.get_conversation(conversation, owner=owner)
    return conversations.create_conversation(owner=owner, title=clip(" ".join(question.split()), TITLE_CHARS))


def history(store: Store, conversation_id: str, owner: str) -> list[HistoryItem]:
    """The conversation's last turns, as the next turn sees them (usable answers only; others by reason)."""
    turns = Conversations(store).list_turns(conversation_id, owner=owner, last=HISTORY_TURNS)
    return [HistoryItem(turn.question, turn.answer or f"(no answer: {turn.reason})") for turn in turns]


def start_run(
    store: Store,
    run_id: str,
    turn_id: str,
    question: str,
    conversation_id: str,
    source: str,
    model: str,
    owner: str,
) -> None:
    """Create the turn's ``ask`` run (its first commit is :func:`begin`'s, under the run's lease)."""
    store.create_run(
        "ask",
        clip(" ".join(question.split()), TITLE_CHARS),
        {
            "question": question,
            "data": source,
            "conversation_id": conversation_id,
            "turn_id": turn_id,
            "model": model,
        },
        owner=owner,
        run_id=run_id,
    )


def begin(transaction: Transactions, run_id: str, question: str) -> list[Event]:
    """The turn's first commit: its run ``running``, with no attempt yet. Returns the events stored."""
    with transaction(run_id) as tx:
        tx.append(StatusEvent(stage="turn", code="started", text=question))
        tx.set_status("running")
        tx.set_snapshot({"question": question, "attempts": []}, version=SNAPSHOT_VERSION)
    return list(tx.events)


def append(transaction: Transactions, run_id: str, *events: Event) -> list[Event]:
    """Commit events to the turn's run; returns them as stored."""
    with transaction(run_id) as tx:
        for event in events:
            tx.append(event)
    return list(tx.events)


def checkpoint(transaction: Transactions, run_id: str, question: str, attempts: list[Attempt]) -> None:
    """Save the attempts finished so far (what recovery stores if the process stops before the turn ends)."""
    records: list[JsonValue] = [attempt.record().model_dump(mode="json") for attempt in attempts]
    with transaction(run_id) as tx:
        tx.set_snapshot({"question": question, "attempts": records}, version=SNAPSHOT_VERSION)


async def take_turn(store: Store, transaction: Transactions, run_id: str, conversation_id: str) -> bool:
    """Wait until the turn of ``run_id`` writes its conversation: at once when no other turn does, else once
    the turns ahead of it ended (saying so in its run: ``status`` ``queued``). False when its run ended
    meanwhile (another process cancelled it)."""
    order = TurnOrder(store)
    holder = await off_loop(order.claim, conversation_id, run_id)
    if holder is None:
        return True
    said = f"waits for the turn before it in the conversation (run {holder}) to end"
    append(transaction, run_id, StatusEvent(stage="turn", code="queued", text=said))
    while await off_loop(order.claim, conversation_id, run_id) is not None:
        await asyncio.sleep(_TURN_POLL)
        if (await off_loop(store.get_run, run_id)).status in TERMINAL_STATUSES:
            return False
    return True


def finish(
    store: Store,
    transaction: Transactions,
    turn: Turn,
    stage: str,
    usage: dict[str, JsonValue] | None = None,
    exhausted: Outcome | None = None,
) -> list[Event]:
    """Store the finished turn, its attempts and the run's outcome (with the turn's model usage), together;
    its conversation is free for the next turn then. Returns the events committed. ``exhausted``: the
    outcome of a turn that reached its budget (the run ends ``exhausted``)."""
    status = _RUN_STATUS[turn.status]
    message = turn.answer or turn.reason or turn.status
    outcome_status: OutcomeStatus = (
        "completed" if status == "completed" else "cancelled" if status == "cancelled" else "failed"
    )
    ended = Outcome(
        status=outcome_status, stage=stage, code=turn.status, user_message=clip(message, 500), usage=usage
    )
    if exhausted is not None and status == "failed":
        ended, status = exhausted.model_copy(update={"usage": usage}), "exhausted"
    conversations = Conversations(store)  # made before the transaction: it may bring its tables up to date
    TurnOrder(store)  # the same: the conversation is freed in the transaction
    with transaction(turn.run_id) as tx:
        tx.append(ended.event())
        conversations.record_turn(tx, turn.record())
        TurnOrder.release(tx)
        tx.set_status(status, outcome=ended.stored())
    return list(tx.events)


__all__ = [
    "SNAPSHOT_VERSION",
    "append",
    "begin",
    "checkpoint",
    "conversation_for",
    "finish",
    "history",
    "new_run_id",
    "new_turn_id",
    "start_run",
    "take_turn",
]
