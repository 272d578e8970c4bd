"""Retention (``store/retention.py``) on every backend: ended run trees past the horizon go whole, with their
events, snapshots, interactions, receipts, write intents, sub-runs and copilot turns; a waiting, recent,
leased or other owner's run stays; a dry run removes nothing; a failure leaves the tree whole."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from store_backends import FakeClock

from plangate.copilot._conversations import AttemptRecord, Conversations, TurnRecord
from plangate.errors import ConfigError, NotFoundError, StoreError
from plangate.events import StatusEvent
from plangate.store import Store, retention
from plangate.store._sql import Db

DAY = 86_400.0
TABLES = ("events", "snapshots", "interactions", "receipts", "write_intents")


def _count(store: Store, table: str, run_ids: Sequence[str]) -> int:
    marks = ", ".join("?" for _ in run_ids)
    with store.database.reading("test") as db:  # type: ignore[attr-defined]
        row = db.one(f"SELECT COUNT(*) AS n FROM {table} WHERE run_id IN ({marks})", list(run_ids))
    assert row is not None
    return int(row["n"])


def _lived(store: Store, *, status: str = "completed", owner: str = "ana", parent: str | None = None) -> str:
    """A run with an event, a snapshot, a resolved interaction, a receipt and a done write, ended."""
    run = store.create_run("formula", "f", {"v": 1}, owner=owner, parent_run_id=parent)
    with store.transaction(run.id) as tx:
        tx.append(StatusEvent(stage="route", code="started"))
        tx.set_snapshot({"phase": "a"})
        asked = tx.open_interaction("approval", "go?")
        tx.resolve_interaction(asked.id, {"kind": "approve"})
        tx.record_write_intent(f"{run.id}:w", "publish", "d" * 8)
        tx.set_status("running")
    with store.transaction(run.id) as tx:
        tx.complete_write_intent(f"{run.id}:w", step_index=1, success=True, summary="ok")
        tx.add_receipt(
            step_index=1, source="tool_observation", name="t", arguments_digest="x", success=True, summary="s"
        )
        if status == "waiting":
            tx.open_interaction("approval", "still there?")
        tx.set_status(status)  # type: ignore[arg-type]
    return run.id


def _present(store: Store, run_id: str) -> bool:
    try:
        store.get_run(run_id)
    except NotFoundError:
        return False
    return True


def test_ended_trees_past_the_horizon_go_whole_and_nothing_else(store: Store, clock: FakeClock) -> None:
    old = _lived(store)
    child = _lived(store, parent=old)
    waiting = _lived(store, status="waiting")
    blocked_root = _lived(store)
    _lived(store, status="waiting", parent=blocked_root)  # a sub-run waiting on a person keeps its root
    other = _lived(store, owner="bo", status="failed")
    clock.advance(31 * DAY)
    recent = _lived(store)

    dry = retention.prune(store, 30 * DAY, owner="ana", dry_run=True)
    assert (dry.trees, dry.runs, dry.kept) == (1, 2, 1)
    assert dry.rows["events"] == _count(store, "events", [old, child]) > 0
    assert all(_present(store, run_id) for run_id in (old, child, waiting, blocked_root, other, recent))

    report = retention.prune(store, 30 * DAY, owner="ana")
    assert (report.trees, report.runs, report.kept) == (1, 2, 1)
    assert report.rows == dry.rows
    for table in TABLES:
        assert _count(store, table, [old, child]) == 0, table
        assert _count(store, table, [waiting]) > 0 or table == "write_intents", table
    assert not _present(store, old) and not _present(store, child)
    assert all(_present(store, run_id) for run_id in (waiting, blocked_root, other, recent))

    everyone = retention.prune(store, 30 * DAY)
    assert (everyone.trees, everyone.runs) == (1, 1)  # bo's failed run; the waiting ones stay
    assert not _present(store, other) and _present(store, waiting) and _present(store, recent)


def test_a_run_under_a_live_lease_stays(store: Store, clock: FakeClock) -> None:
    run_id = _lived(store)
    clock.advance(31 * DAY)
    assert store.take_lease(run_id, "someone", 60.0) is not None
    assert retention.prune(store, 30 * DAY).kept == 1
    clock.advance(61.0)
    assert retention.prune(store, 30 * DAY).trees == 1


def test_copilot_turns_go_with_their_runs(store: Store, clock: FakeClock) -> None:
    conversations = Conversations(store)
    conversation = conversations.create_conversation(owner="ana", title="q")
    ask = store.create_run("ask", "How many?", {"question": "How many?"}, owner="ana")
    formula_run = _lived(store, parent=ask.id)
    attempt = AttemptRecord.model_validate(
        {
            "n": 1,
            "status": "done",
            "reason": "r",
            "review": {"severity": "ok", "verdict": "accept", "signals": []},
            "formula": None,
            "run_id": formula_run,
            "answer": "42",
            "result": {"columns": ["n"], "rows": [[42]]},
            "issues": [],
            "started_at": 1.0,
            "finished_at": 2.0,
        }
    )
    turn = TurnRecord(
        id="turn_1",
        conversation_id=conversation.id,
        run_id=ask.id,
        owner="ana",
        question="How many?",
        status="done",
        reason="answered",
        answer="42",
        result={"columns": ["n"], "rows": [[42]]},
        formula=None,
        source="shop",
        model="scripted",
        created_at=1.0,
        finished_at=2.0,
        attempts=[attempt],
    )
    with store.transaction(ask.id) as tx:
        conversations.record_turn(tx, turn)
        tx.set_status("completed")
    clock.advance(31 * DAY)

    report = retention.prune(store, 30 * DAY)
    assert (report.trees, report.runs, report.rows["turns"]) == (1, 2, 3)  # attempt, turn, conversation
    assert conversations.find_turn(ask.id) is None
    assert conversations.list_conversations(owner="ana").items == []


def test_a_failure_mid_tree_leaves_the_tree_whole(store: Store, clock: FakeClock) -> None:
    run_id = _lived(store)
    child = _lived(store, parent=run_id)
    clock.advance(31 * DAY)

    def failing(db: Db, run_ids: Sequence[str]) -> int:
        db.run("DELETE FROM events WHERE run_id = ?", (run_ids[-1],))
        raise StoreError("the disk is full")

    with _hook("zz-failing", failing), pytest.raises(StoreError, match="disk is full"):
        retention.prune(store, 30 * DAY)
    assert _present(store, run_id) and _present(store, child)
    assert _count(store, "events", [run_id]) > 0 and _count(store, "events", [child]) > 0


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * DAY), ("1d12h", 1.5 * DAY), ("90s", 90.0), (3600, 3600.0)]
)
def test_ages_read(text: object, seconds: float) -> None:
    assert retention.parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "30 days", "1d 12h", "0s", -5, True, "1w"])
def test_bad_ages_say_what_was_found(text: object) -> None:
    with pytest.raises(ConfigError, match="older_than: expected an age"):
        retention.parse_age(text)


def test_prune_refuses_bad_arguments(store: Store) -> None:
    with pytest.raises(ConfigError, match="older_than"):
        retention.prune(store, 0)
    with pytest.raises(ConfigError, match="store opened by plangate"):
        retention.prune(object(), 10)


class _hook:
    """A ``run_rows`` hook registered for one ``with`` block."""

    def __init__(self, name: str, delete: retention.RunRows) -> None:
        self.name = name
        self.delete = delete

    def __enter__(self) -> None:
        retention.run_rows(self.name, self.delete)

    def __exit__(self, *exc: object) -> None:
        retention._HOOKS.pop(self.name, None)


@pytest.fixture(autouse=True)
def _no_stray_hooks() -> Iterator[None]:
    before = dict(retention._HOOKS)
    yield
    assert retention._HOOKS == before
