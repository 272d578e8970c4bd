"""Copilot conversations, turns and attempts (``copilot/_conversations.py``) on every backend: stored whole
with the run's outcome, read back as written, owners kept apart."""

from __future__ import annotations

import pytest
from store_backends import Backend, FakeClock

from plangate.copilot._conversations import AttemptRecord, Conversations, TurnRecord
from plangate.errors import ConfigError, NotFoundError
from plangate.events import OutcomeEvent
from plangate.store import Store


def _attempt(n: int, status: str = "done", **fields: object) -> AttemptRecord:
    values: dict[str, object] = {
        "n": n,
        "status": status,
        "reason": "why",
        "review": {"severity": "ok", "verdict": "accept", "signals": []},
        "formula": {"formula": "f", "steps": [{"id": "a", "llm": {"prompt": "p"}}]},
        "run_id": None,
        "answer": "an answer",
        "result": {"columns": ["a"], "rows": [[1]]},
        "issues": [{"level": "warning", "code": "c", "path": "p", "message": "m"}],
        "started_at": 1.0,
        "finished_at": 2.0,
    }
    values.update(fields)
    return AttemptRecord.model_validate(values)


def _turn(
    store: Store,
    conversation: str,
    *,
    owner: str = "local",
    attempts: list[AttemptRecord] | None = None,
    turn_id: str = "turn_1",
    question: str = "How many?",
) -> TurnRecord:
    run = store.create_run("ask", question, {"question": question}, owner=owner)
    return TurnRecord(
        id=turn_id,
        conversation_id=conversation,
        run_id=run.id,
        owner=owner,
        question=question,
        status="done",
        reason="answered",
        answer="42 things.",
        result={"columns": ["n"], "rows": [[42]]},
        formula={"formula": "f", "steps": []},
        source="shop",
        model="scripted",
        created_at=10.0,
        finished_at=20.0,
        attempts=attempts if attempts is not None else [_attempt(1, "unusable"), _attempt(2)],
    )


def _record(store: Store, turn: TurnRecord) -> None:
    with store.transaction(turn.run_id) as tx:
        tx.append(OutcomeEvent(status="completed", stage="review", code="done", user_message=turn.answer))
        Conversations(store).record_turn(tx, turn)
        tx.set_status("completed")


def test_a_conversation_is_created_found_and_listed(store: Store, clock: FakeClock) -> None:
    created = Conversations(store).create_conversation(owner="ana", title="Revenue questions")
    assert created.id.startswith("conv_") and (created.owner, created.title, created.turns) == (
        "ana",
        "Revenue questions",
        0,
    )
    assert created.created_at == created.updated_at == clock.now
    assert Conversations(store).get_conversation(created.id) == created
    assert Conversations(store).list_conversations(owner="ana").items == [created]
    with pytest.raises(ConfigError, match="exists already"):
        Conversations(store).create_conversation(conversation_id=created.id)


def test_a_turn_is_stored_with_its_attempts_and_its_runs_outcome(store: Store, clock: FakeClock) -> None:
    conversation = Conversations(store).create_conversation()
    turn = _turn(store, conversation.id).model_copy(update={"finished_at": clock.now + 20})
    _record(store, turn)
    assert Conversations(store).get_turn(turn.id) == turn
    assert Conversations(store).find_turn(turn.run_id) == turn
    assert Conversations(store).list_turns(conversation.id) == [turn]
    after = Conversations(store).get_conversation(conversation.id)
    assert (after.turns, after.updated_at) == (1, clock.now + 20)
    assert [type(e).__name__ for e in store.events(turn.run_id)] == ["OutcomeEvent"]


def test_a_transaction_that_fails_stores_neither_the_turn_nor_the_outcome(store: Store) -> None:
    conversation = Conversations(store).create_conversation()
    turn = _turn(store, conversation.id)
    with pytest.raises(RuntimeError, match="crash"):
        with store.transaction(turn.run_id) as tx:
            tx.append(OutcomeEvent(status="completed", stage="review", code="done", user_message="x"))
            Conversations(store).record_turn(tx, turn)
            raise RuntimeError("crash before commit")
    assert Conversations(store).find_turn(turn.run_id) is None and store.events(turn.run_id) == []
    assert Conversations(store).get_conversation(conversation.id).turns == 0
    with pytest.raises(NotFoundError):
        Conversations(store).get_turn(turn.id)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run_id": "run_other"}, "the turn belongs to run 'run_other'"),
        ({"attempts": [_attempt(2)]}, r"expected them numbered 1, 2, …; found \[2\]"),
        ({"conversation_id": "conv_missing"}, "no conversation 'conv_missing'"),
    ],
)
def test_a_turn_that_does_not_fit_is_refused(store: Store, change: dict[str, object], message: str) -> None:
    conversation = Conversations(store).create_conversation()
    turn = _turn(store, conversation.id).model_copy(update=change)
    run_id = _turn(store, conversation.id).run_id if "run_id" in change else turn.run_id
    with pytest.raises((ConfigError, NotFoundError), match=message):
        with store.transaction(run_id) as tx:
            Conversations(store).record_turn(tx, turn)


def test_a_turn_is_written_once(store: Store) -> None:
    conversation = Conversations(store).create_conversation()
    turn = _turn(store, conversation.id)
    _record(store, turn)
    with pytest.raises(ConfigError, match="is stored already"):
        with store.transaction(turn.run_id) as tx:
            Conversations(store).record_turn(tx, turn)


def test_the_last_turns_come_oldest_first(store: Store) -> None:
    conversation = Conversations(store).create_conversation()
    turns = [_turn(store, conversation.id, turn_id=f"turn_{i}", question=f"q{i}") for i in range(8)]
    for turn in turns:
        _record(store, turn)
    assert [t.question for t in Conversations(store).list_turns(conversation.id, last=6)] == [
        f"q{i}" for i in range(2, 8)
    ]
    assert len(Conversations(store).list_turns(conversation.id)) == 8


def test_owners_see_only_their_own(store: Store) -> None:
    mine = Conversations(store).create_conversation(owner="ana")
    theirs = Conversations(store).create_conversation(owner="bo")
    turn = _turn(store, mine.id, owner="ana")
    _record(store, turn)
    with pytest.raises(NotFoundError):
        Conversations(store).get_conversation(mine.id, owner="bo")
    with pytest.raises(NotFoundError):
        Conversations(store).get_turn(turn.id, owner="bo")
    with pytest.raises(NotFoundError):
        Conversations(store).list_turns(mine.id, owner="bo")
    assert [c.id for c in Conversations(store).list_conversations(owner="bo").items] == [theirs.id]


def test_conversations_page_most_recently_updated_first(store: Store, clock: FakeClock) -> None:
    made = []
    for index in range(5):
        clock.advance(1)
        made.append(Conversations(store).create_conversation(title=f"c{index}"))
    turn = _turn(store, made[0].id).model_copy(update={"finished_at": clock.now + 100})
    _record(store, turn)
    first = Conversations(store).list_conversations(limit=2)
    assert [c.title for c in first.items] == ["c0", "c4"] and first.next_cursor is not None
    second = Conversations(store).list_conversations(limit=2, cursor=first.next_cursor)
    third = Conversations(store).list_conversations(limit=2, cursor=second.next_cursor)
    assert [c.title for c in second.items + third.items] == ["c3", "c2", "c1"] and third.next_cursor is None
    with pytest.raises(ConfigError, match="next_cursor returned by list_conversations"):
        Conversations(store).list_conversations(cursor="p3")


def test_turns_survive_reopening_the_store(shared_backend: Backend) -> None:
    store = shared_backend.open()
    conversation = Conversations(store).create_conversation(title="kept")
    turn = _turn(store, conversation.id)
    _record(store, turn)
    store.close()
    again = shared_backend.open()
    try:
        assert Conversations(again).get_turn(turn.id) == turn
        assert Conversations(again).get_conversation(conversation.id).turns == 1
    finally:
        again.close()
