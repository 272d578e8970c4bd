"""A copilot turn that a stopped process left running is ended by the next server's start-up recovery."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import wait_until

from plangate.copilot import Copilot
from plangate.copilot import _store as turn_store
from plangate.copilot._conversations import Conversations
from plangate.events import OutcomeEvent
from plangate.models import ScriptedModel
from plangate.store import Store

SHOP = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"


def test_a_turn_cut_off_by_a_stopped_process_is_stored_failed_at_the_next_start(
    make_app: Callable[..., FastAPI], store: Store
) -> None:
    copilot = Copilot(model=ScriptedModel([]), store=store, owner="ana")
    prepared = copilot.prepare("How many orders are there?", SHOP)
    # What a process leaves when it is killed mid-turn: the ask run started, no turn stored yet.
    turn_store.start_run(
        store,
        prepared.run_id,
        prepared.turn_id,
        prepared.question,
        prepared.conversation_id,
        "shop",
        "scripted",
        "ana",
    )
    turn_store.begin(store.transaction, prepared.run_id, prepared.question)
    assert store.get_run(prepared.run_id).status == "running"

    with TestClient(make_app(auth=False)):
        # start-up recovery ends it in the background, as it continues every other run
        turns = Conversations(store)
        wait_until(lambda: turns.find_turn(prepared.run_id) is not None, what="the turn to be ended")

    turn = Conversations(store).get_turn(prepared.turn_id, owner="ana")
    assert (turn.status, turn.owner, turn.run_id) == ("failed", "ana", prepared.run_id)
    assert turn.reason == "the turn was interrupted: its process stopped before it finished"
    assert store.get_run(prepared.run_id).status == "failed"
    assert isinstance(store.events(prepared.run_id)[-1], OutcomeEvent)
