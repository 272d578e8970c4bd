"""The behaviour every store backend must show, run against each backend of ``conftest.BACKENDS``."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_backends import Backend, FakeClock

from plangate.errors import (
    ConfigError,
    InteractionError,
    NotFoundError,
    SchemaVersionError,
    StaleInteraction,
    StoreError,
)
from plangate.events import (
    InteractionResolvedEvent,
    InteractionTool,
    OutcomeEvent,
    SpeakEvent,
    StatusEvent,
    ToolCallEvent,
)
from plangate.store import Commit, EncodedObject, Lease, LeaseLost, Store, WriteIntentConflict


def _run(store: Store, **kwargs: object) -> str:
    options: dict[str, object] = {"kind": "agent", "name": "plan my week", "input": {"prompt": "hi"}}
    options.update(kwargs)
    return store.create_run(**options).id  # type: ignore[arg-type]


def _self_containing() -> dict[str, object]:
    value: dict[str, object] = {}
    value["me"] = value
    return value


# -- runs ---------------------------------------------------------------------------------------------------


def test_create_run_starts_queued_with_a_random_id(store: Store, clock: FakeClock) -> None:
    run = store.create_run("formula", "deploy", {"env": "staging", "n": [1, 2]})
    other = store.create_run("formula", "deploy", {})
    assert run.id.startswith("run_") and other.id != run.id
    assert (run.kind, run.name, run.status, run.owner, run.last_seq) == (
        "formula",
        "deploy",
        "queued",
        "local",
        0,
    )
    assert run.input == {"env": "staging", "n": [1, 2]}
    assert run.created_at == run.updated_at == clock.now
    assert store.get_run(run.id) == run


def test_create_run_with_given_id_and_parent(store: Store) -> None:
    parent = store.create_run("ask", "question", {}, owner="alice", run_id="run_parent")
    child = store.create_run("formula", "answer", {}, owner="alice", parent_run_id=parent.id)
    assert parent.id == "run_parent"
    assert store.get_run(child.id).parent_run_id == "run_parent"


def test_create_run_refuses_a_taken_id_and_an_unknown_parent(store: Store) -> None:
    store.create_run("agent", "a", {}, run_id="run_x")
    with pytest.raises(ConfigError, match="run_id: a run 'run_x' exists already"):
        store.create_run("agent", "b", {}, run_id="run_x")
    with pytest.raises(NotFoundError, match="parent_run_id: no run 'run_nope'"):
        store.create_run("agent", "b", {}, parent_run_id="run_nope")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "robot"}, "kind: expected one of formula, agent, ask; found 'robot'"),
        ({"input": ["not", "a", "dict"]}, "input: expected a JSON object .a dict.; found list"),
        ({"input": {"when": object()}}, "input: expected JSON data .*type object is not JSON serializable"),
        ({"input": {"x": float("nan")}}, "input: expected JSON data"),
        ({"input": _self_containing()}, "input: expected JSON data; found a structure that"),
        ({"owner": ""}, "owner: expected a non-empty string; found ''"),
    ],
)
def test_create_run_names_the_bad_argument(store: Store, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _run(store, **kwargs)


def test_get_run_is_scoped_to_its_owner(store: Store) -> None:
    run_id = _run(store, owner="alice")
    assert store.get_run(run_id, owner="alice").owner == "alice"
    with pytest.raises(NotFoundError, match=f"no run '{run_id}' for owner 'bob'"):
        store.get_run(run_id, owner="bob")
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.get_run("run_missing")


def test_set_status_and_outcome_are_committed_with_the_transaction(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    clock.advance(5)
    with store.transaction(run_id) as tx:
        tx.set_status("running")
    assert store.get_run(run_id).status == "running"
    assert store.get_run(run_id).updated_at == clock.now
    outcome = {"status": "completed", "stage": "deliver", "code": "ok", "user_message": "Done."}
    with store.transaction(run_id) as tx:
        tx.append(OutcomeEvent(status="completed", stage="deliver", code="ok", user_message="Done."))
        tx.set_status("completed", outcome=outcome)
    run = store.get_run(run_id)
    assert (run.status, run.outcome, run.last_seq) == ("completed", outcome, 1)


def test_set_status_refuses_an_unknown_status(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(ConfigError, match=r"status: expected one of queued, running, .*; found 'done'"):
        with store.transaction(run_id) as tx:
            tx.set_status("done")  # type: ignore[arg-type]
    assert store.get_run(run_id).status == "queued"


# -- listing -------------------------------------------------------------------------------------------------


def _fill(store: Store) -> list[str]:
    """Runs of several kinds, owners and statuses, oldest first."""
    ids = []
    for i in range(14):
        run_id = _run(store, kind=("agent", "formula")[i % 2], owner=("alice", "bob")[i % 3 == 0])
        if i % 4 == 0:
            with store.transaction(run_id) as tx:
                tx.set_status("waiting")
        ids.append(run_id)
    return ids


def _pages(store: Store, limit: int, **filters: object) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_runs(limit=limit, cursor=cursor, **filters)  # type: ignore[arg-type]
        assert len(page.items) <= limit
        seen.extend(run.id for run in page.items)
        if page.next_cursor is None:
            return seen
        assert len(page.items) == limit
        cursor = page.next_cursor


def test_list_runs_pages_newest_first_and_filters(store: Store) -> None:
    ids = _fill(store)
    assert _pages(store, 5) == ids[::-1]
    assert _pages(store, 100) == ids[::-1]
    waiting = [run_id for i, run_id in enumerate(ids) if i % 4 == 0]
    assert _pages(store, 2, status="waiting") == waiting[::-1]
    assert _pages(store, 2, status=["waiting", "queued"]) == ids[::-1]
    formula_bob = [run_id for i, run_id in enumerate(ids) if i % 2 == 1 and i % 3 == 0]
    assert _pages(store, 1, kind="formula", owner="bob") == formula_bob[::-1]
    assert store.list_runs(owner="carol").items == []


def test_list_runs_cursor_is_stable_when_runs_are_added_between_pages(store: Store) -> None:
    ids = _fill(store)
    first = store.list_runs(limit=6)
    _run(store)
    rest = _pages_from(store, first.next_cursor)
    assert [run.id for run in first.items] + rest == ids[::-1]


def _pages_from(store: Store, cursor: str | None) -> list[str]:
    seen: list[str] = []
    while cursor is not None:
        page = store.list_runs(limit=4, cursor=cursor)
        seen.extend(run.id for run in page.items)
        cursor = page.next_cursor
    return seen


def test_list_runs_by_parent(store: Store) -> None:
    parent = _run(store)
    children = [_run(store, parent_run_id=parent) for _ in range(3)]
    _run(store)
    assert [run.id for run in store.list_runs(parent_run_id=parent).items] == children[::-1]


def test_a_run_names_its_origin_and_an_origin_lists_its_forks_and_retries(store: Store) -> None:
    origin = _run(store)
    forks = [_run(store, origin_run_id=origin) for _ in range(3)]
    fork_of_fork = _run(store, origin_run_id=forks[0])
    _run(store)
    assert store.get_run(forks[0]).origin_run_id == origin
    assert [run.id for run in store.list_runs(origin_run_id=origin).items] == forks[::-1]
    assert [run.id for run in store.list_runs(origin_run_id=forks[0]).items] == [fork_of_fork]
    page = store.list_runs(origin_run_id=origin, limit=2)
    assert page.next_cursor is not None
    rest = store.list_runs(origin_run_id=origin, limit=2, cursor=page.next_cursor)
    assert [run.id for run in [*page.items, *rest.items]] == forks[::-1]
    # a run that is no fork shows no origin in its JSON form (records read before it existed keep theirs)
    assert "origin_run_id" not in store.get_run(origin).model_dump(mode="json")
    assert store.get_run(forks[1]).model_dump(mode="json")["origin_run_id"] == origin


def test_create_run_refuses_an_unknown_origin(store: Store) -> None:
    with pytest.raises(NotFoundError, match="origin_run_id: no run 'run_nope'"):
        store.create_run("agent", "b", {}, origin_run_id="run_nope")
    assert store.list_runs().items == []


def test_root_of_climbs_the_parent_chain_to_the_top(store: Store) -> None:
    top = _run(store)
    child = _run(store, parent_run_id=top)
    grandchild = _run(store, parent_run_id=child)
    alone = _run(store)
    assert [store.root_of(run) for run in (grandchild, child, top, alone)] == [top, top, top, alone]
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.root_of("run_missing")


def test_list_runs_top_level_leaves_sub_runs_out_and_pages(store: Store) -> None:
    first = _run(store)
    _run(store, parent_run_id=first)
    second = _run(store)
    _run(store, parent_run_id=second)
    third = _run(store)
    page = store.list_runs(top_level=True, limit=2)
    assert [run.id for run in page.items] == [third, second]
    rest = store.list_runs(top_level=True, limit=2, cursor=page.next_cursor)
    assert [run.id for run in rest.items] == [first] and rest.next_cursor is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cursor": "nonsense"}, "cursor: expected a next_cursor returned by list_runs; found 'nonsense'"),
        ({"limit": 0}, "limit: expected an integer >= 1; found 0"),
        ({"limit": 5000}, "limit: expected at most 1000; found 5000"),
        ({"status": "sleeping"}, "status: expected one of queued, .*; found 'sleeping'"),
        ({"status": []}, "status: expected at least one status"),
    ],
)
def test_list_runs_names_the_bad_argument(store: Store, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        store.list_runs(**kwargs)  # type: ignore[arg-type]


@given(limit=st.integers(1, 20), kind=st.sampled_from([None, "agent", "formula"]))
def test_paging_returns_every_matching_run_once(module_store: Store, limit: int, kind: str | None) -> None:
    if not module_store.list_runs(limit=1).items:
        _fill(module_store)
    everything = [run.id for run in module_store.list_runs(limit=1000, kind=kind).items]  # type: ignore[arg-type]
    assert _pages(module_store, limit, kind=kind) == everything


# -- events and transactions ---------------------------------------------------------------------------------


def test_events_get_gapless_seq_and_read_back_equal(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        first = tx.append(StatusEvent(stage="route", code="started", text="Routing"))
        second = tx.append(ToolCallEvent(call_id="c1", tool="get_overview", arguments={"week": 3}))
        assert [event.seq for event in tx.events] == [1, 2]
    with store.transaction(run_id) as tx:
        clock.advance(1)
        third = tx.append(SpeakEvent(text="Here is your week"))
    assert (first.run_id, first.seq, first.at) == (run_id, 1, clock.now - 1)
    assert (third.seq, third.at) == (3, clock.now)
    assert store.events(run_id) == [first, second, third]
    assert store.events(run_id, after=1) == [second, third]
    assert store.events(run_id, after=1, limit=1) == [second]
    assert store.events(run_id, after=3) == []
    assert store.last_seq(run_id) == 3


def test_events_of_an_unknown_run(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.events("run_missing")
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.last_seq("run_missing")
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        with store.transaction("run_missing"):
            pass


def test_append_refuses_an_event_of_another_run(store: Store) -> None:
    run_id = _run(store)
    stored_elsewhere = SpeakEvent(run_id="run_other", seq=4, text="hi")
    with pytest.raises(ConfigError, match="belongs to run 'run_other', not to run"):
        with store.transaction(run_id) as tx:
            tx.append(stored_elsewhere)
    with pytest.raises(ConfigError, match=r"expected an event \(plangate.events\); found dict"):
        with store.transaction(run_id) as tx:
            tx.append({"type": "speak", "text": "hi"})  # type: ignore[arg-type]


def test_rollback_on_exception_leaves_nothing(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="kept"))
        tx.set_snapshot({"phase": "route"})
        key = tx.open_interaction("ask_user", "Which week?").id
    before = store.get_run(run_id)
    opened = None
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="lost"))
            tx.set_snapshot({"phase": "execute"})
            tx.set_status("failed", outcome={"status": "failed"})
            tx.resolve_interaction(key, {"kind": "answer", "text": "3"})
            tx.add_receipt(
                step_index=0,
                source="user_reply",
                name="ask_user",
                arguments_digest="",
                success=True,
                summary="3",
            )
            tx.record_write_intent("key-1", "place", "sha256:abc")
            raise RuntimeError("boom")
    assert store.get_run(run_id) == before
    assert [event.seq for event in store.events(run_id)] == [1]
    snapshot = store.get_snapshot(run_id)
    assert snapshot is not None and snapshot.state == {"phase": "route"}
    assert store.get_interaction(key).status == "open"
    assert store.receipts(run_id) == []
    assert store.get_write_intent("key-1") is None
    with store.transaction(run_id) as tx:
        assert tx.append(SpeakEvent(text="next")).seq == 2
        opened = tx.expire_interaction(key)
    assert opened.status == "expired"


def test_rollback_of_an_interaction_opened_in_the_failed_transaction(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(RuntimeError):
        with store.transaction(run_id) as tx:
            interaction = tx.open_interaction("confirm", "Move the meeting?")
            raise RuntimeError("crash before commit")
    with pytest.raises(NotFoundError):
        store.get_interaction(interaction.id)
    assert store.list_interactions(run_id=run_id) == []


def test_a_transaction_cannot_be_used_after_its_block(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="a"))
    with pytest.raises(StoreError, match="has ended; open a new one"):
        tx.append(SpeakEvent(text="b"))
    assert store.last_seq(run_id) == 1


def test_the_store_refuses_calls_from_the_thread_holding_a_transaction(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="a"))
        with pytest.raises(StoreError, match=f"holds an open transaction on run '{run_id}'"):
            store.get_run(run_id)
        with pytest.raises(StoreError, match="holds an open transaction"):
            with store.transaction(run_id):
                pass
    assert store.last_seq(run_id) == 1


@pytest.mark.parametrize("raised", [StopIteration, KeyboardInterrupt, LookupError])
def test_whatever_a_block_raises_rolls_it_back_and_goes_on_as_it_was(
    store: Store, raised: type[BaseException]
) -> None:
    run_id = _run(store)
    for begin in (store.transaction, store.try_transaction):
        with pytest.raises(raised) as caught, begin(run_id) as tx:
            if tx is not None:  # PostgreSQL never begins at once
                tx.append(SpeakEvent(text="never stored"))
            raise raised("from the block")
        assert str(caught.value) == "from the block" and caught.traceback[-1].name.startswith("test_")
    assert store.last_seq(run_id) == 0
    with store.transaction(run_id) as tx:  # the store's lock was let go
        tx.append(SpeakEvent(text="kept"))
    assert store.last_seq(run_id) == 1


def test_tx_run_is_the_run_as_it_was_at_the_start(store: Store) -> None:
    run_id = _run(store, name="weekly review")
    with store.transaction(run_id) as tx:
        tx.set_status("running")
        assert (tx.run_id, tx.run.name, tx.run.status) == (run_id, "weekly review", "queued")


def test_tx_status_is_the_status_the_run_had_at_the_start(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        tx.set_status("running")
        assert tx.status == tx.run.status == "queued"
    with store.transaction(run_id) as tx:
        assert tx.status == "running"


def test_events_appended_in_one_block_are_stored_in_order_and_only_if_it_commits(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        appended = [tx.append(StatusEvent(stage="run", code=f"c{i}", text=f"event {i}")) for i in range(5)]
        assert [event.seq for event in tx.events] == [1, 2, 3, 4, 5]
    with pytest.raises(RuntimeError, match="boom"), store.transaction(run_id) as tx:
        tx.append(StatusEvent(stage="run", code="lost", text="never stored"))
        raise RuntimeError("boom")
    with store.transaction(run_id) as tx:
        appended.append(tx.append(StatusEvent(stage="run", code="c5", text="event 5")))
    assert store.events(run_id) == appended
    assert store.last_seq(run_id) == 6


def test_events_extended_at_once_are_stored_as_appended_ones_are(store: Store) -> None:
    run_id = _run(store)
    heard: list[Commit] = []
    with store.transaction(run_id) as tx:
        first = tx.append(SpeakEvent(text="a"))
        tx.extend(SpeakEvent(text=text) for text in ("b", "c"))
        last = tx.append(SpeakEvent(text="d"))
        assert [(event.seq, getattr(event, "text", None)) for event in tx.events] == [
            (1, "a"),
            (2, "b"),
            (3, "c"),
            (4, "d"),
        ]
    assert (first.seq, last.seq) == (1, 4)
    unsubscribe = store.subscribe(heard.append)
    with store.transaction(run_id) as tx:
        tx.extend([SpeakEvent(text="e")])
    unsubscribe()
    stored = store.events(run_id)
    assert [getattr(event, "text", None) for event in stored] == ["a", "b", "c", "d", "e"]
    assert [event.seq for event in stored] == [1, 2, 3, 4, 5] and store.last_seq(run_id) == 5
    assert [c.events for c in heard] == [(stored[-1],)]
    with pytest.raises(ConfigError, match="extend: expected an event"), store.transaction(run_id) as tx:
        tx.extend([SpeakEvent(text="lost"), {"type": "speak"}])  # type: ignore[list-item]
    assert store.last_seq(run_id) == 5  # nothing of the refused block was stored


def test_a_closed_store_refuses_calls(backend: Backend) -> None:
    store = backend.open()
    run_id = _run(store)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.get_run(run_id)


# -- snapshots -----------------------------------------------------------------------------------------------


def test_snapshot_is_replaced_and_records_the_last_seq(store: Store) -> None:
    run_id = _run(store)
    assert store.get_snapshot(run_id) is None
    with store.transaction(run_id) as tx:
        tx.set_snapshot({"round": 1})
        tx.append(SpeakEvent(text="a"))
        tx.append(SpeakEvent(text="b"))
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="c"))
        tx.set_snapshot({"round": 2, "plan": [{"content": "look", "done_when": "seen"}]}, version=3)
    snapshot = store.get_snapshot(run_id)
    assert snapshot is not None
    assert (snapshot.version, snapshot.seq) == (3, 3)
    assert snapshot.state == {"round": 2, "plan": [{"content": "look", "done_when": "seen"}]}
    assert snapshot.checked_state(3) == snapshot.state
    with pytest.raises(SchemaVersionError, match="format version 3; this plangate reads up to version 2"):
        snapshot.checked_state(2)


def test_a_snapshot_encoded_once_is_stored_as_encoded_and_reads_back_as_data(store: Store) -> None:
    run_id = _run(store)
    plan = EncodedObject.of({"steps": ["a", "b"], "title": "NaN handling, é"})
    for round_ in (1, 2):  # the same encoded part, joined into two snapshots
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text=str(round_)))
            tx.set_snapshot(EncodedObject.joined({"plan": plan, "round": EncodedObject.of({"n": round_})}))
    snapshot = store.get_snapshot(run_id)
    assert snapshot is not None and snapshot.seq == 2
    assert snapshot.state == {"plan": {"steps": ["a", "b"], "title": "NaN handling, é"}, "round": {"n": 2}}


def test_snapshot_arguments_are_checked(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(ConfigError, match="set_snapshot: version: expected an integer >= 1; found 0"):
        with store.transaction(run_id) as tx:
            tx.set_snapshot({}, version=0)
    with pytest.raises(ConfigError, match=r"set_snapshot: state: expected JSON data .*set is not JSON"):
        with store.transaction(run_id) as tx:
            tx.set_snapshot({"seen": {1, 2}})
    with pytest.raises(NotFoundError):
        store.get_snapshot("run_missing")


# -- subscribers ---------------------------------------------------------------------------------------------


def test_a_subscriber_added_while_a_transaction_is_open_hears_its_commit(store: Store) -> None:
    run_id = _run(store)
    heard: list[Commit] = []
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="before"))
        unsubscribe = store.subscribe(heard.append)  # as a stream does, then reads what is stored
        tx.append(SpeakEvent(text="after"))
    unsubscribe()
    assert [(e.seq, e.run_id, getattr(e, "text", None)) for c in heard for e in c.events] == [
        (1, run_id, "before"),
        (2, run_id, "after"),
    ]


def test_subscribers_hear_commits_after_they_are_stored(store: Store) -> None:
    run_id = _run(store)
    heard: list[Commit] = []
    stored_when_heard: list[int] = []

    def listen(commit: Commit) -> None:
        heard.append(commit)
        stored_when_heard.append(store.last_seq(commit.run_id))

    unsubscribe = store.subscribe(listen)
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="a"))
        tx.append(SpeakEvent(text="b"))
        assert heard == []
    assert len(heard) == 1
    assert heard[0].run_id == run_id and heard[0].status is None
    assert list(heard[0].events) == store.events(run_id)
    assert stored_when_heard == [2]

    with pytest.raises(RuntimeError):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="rolled back"))
            raise RuntimeError
    with store.transaction(run_id) as tx:
        tx.set_snapshot({"quiet": True})
    assert len(heard) == 1

    with store.transaction(run_id) as tx:
        tx.set_status("running")
    assert heard[-1].status == "running" and heard[-1].events == ()

    unsubscribe()
    unsubscribe()
    with store.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="unheard"))
    assert len(heard) == 2


def test_subscribers_are_told_once_other_readers_can_see_the_commit(shared_backend: Backend) -> None:
    writer, reader = shared_backend.open(), shared_backend.open()
    try:
        run_id = writer.create_run("agent", "live", {}).id
        seen_by_reader: list[int] = []
        writer.subscribe(lambda commit: seen_by_reader.append(len(reader.events(commit.run_id))))
        with writer.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="a"))
            tx.append(SpeakEvent(text="b"))
        assert seen_by_reader == [2]
    finally:
        writer.close()
        reader.close()


def test_a_failing_subscriber_is_logged_and_others_still_hear(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = _run(store)
    heard: list[Commit] = []

    def broken(commit: Commit) -> None:
        raise ValueError("listener bug")

    store.subscribe(broken)
    store.subscribe(heard.append)
    with caplog.at_level(logging.ERROR, logger="plangate.store"):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="a"))
    assert len(heard) == 1
    assert store.last_seq(run_id) == 1
    assert "a store subscriber failed" in caplog.text and "listener bug" in caplog.text


# -- interactions --------------------------------------------------------------------------------------------


def _consent(store: Store, run_id: str) -> str:
    tool = InteractionTool(name="place", arguments={"task": "gym", "slot": 4}, arguments_digest="sha256:1f")
    with store.transaction(run_id) as tx:
        interaction = tx.open_interaction("confirm", "Place gym at slot 4?", tool=tool, step_id="s1")
        tx.set_status("waiting")
    return interaction.id


def test_open_interaction_gets_a_random_id_and_reads_back(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    key = _consent(store, run_id)
    interaction = store.get_interaction(key)
    assert key.startswith("int_") and len(key) >= 20
    assert (interaction.run_id, interaction.kind, interaction.status) == (run_id, "confirm", "open")
    assert interaction.tool == InteractionTool(
        name="place", arguments={"task": "gym", "slot": 4}, arguments_digest="sha256:1f"
    )
    assert (interaction.prompt, interaction.step_id, interaction.created_at) == (
        "Place gym at slot 4?",
        "s1",
        clock.now,
    )
    assert (interaction.resolved_at, interaction.resolved_by, interaction.resolution) == (None, None, None)


def test_a_run_has_at_most_one_open_interaction(store: Store) -> None:
    run_id = _run(store)
    key = _consent(store, run_id)
    with pytest.raises(InteractionError, match=f"already has an open interaction .confirm '{key}'."):
        with store.transaction(run_id) as tx:
            tx.open_interaction("ask_user", "And also?")
    assert [i.id for i in store.list_interactions(run_id=run_id)] == [key]


def test_resolve_in_a_transaction_with_its_event(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    key = _consent(store, run_id)
    clock.advance(60)
    with store.transaction(run_id) as tx:
        resolved = tx.resolve_interaction(key, {"kind": "approve"}, "alice")
        tx.append(
            InteractionResolvedEvent(interaction_id=key, kind="confirm", resolution="approve", by="alice")
        )
        tx.set_status("running")
    assert resolved == store.get_interaction(key)
    assert (resolved.status, resolved.resolved_by, resolved.resolved_at) == ("resolved", "alice", clock.now)
    assert resolved.resolution == {"kind": "approve"}
    assert store.events(run_id)[-1].type == "interaction_resolved"
    assert store.get_run(run_id).status == "running"


def test_a_second_resolution_is_stale_and_changes_nothing(store: Store) -> None:
    run_id = _run(store)
    key = _consent(store, run_id)
    first = store.resolve_interaction(key, {"kind": "reject", "reason": "busy"}, "alice")
    with pytest.raises(StaleInteraction, match=f"interaction '{key}' of run '{run_id}' is resolved already"):
        store.resolve_interaction(key, {"kind": "approve"}, "mallory")
    with pytest.raises(StaleInteraction):
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="should vanish"))
            tx.resolve_interaction(key, {"kind": "approve"})
    assert store.get_interaction(key) == first
    assert store.last_seq(run_id) == 0


def test_unknown_and_foreign_interaction_ids(store: Store) -> None:
    run_id = _run(store)
    other_run = _run(store)
    key = _consent(store, run_id)
    with pytest.raises(NotFoundError, match="no interaction 'int_nope'"):
        store.get_interaction("int_nope")
    with pytest.raises(NotFoundError, match="no interaction 'int_nope'"):
        store.resolve_interaction("int_nope", {"kind": "approve"})
    with pytest.raises(StaleInteraction, match=f"belongs to run '{run_id}', not to run '{other_run}'"):
        with store.transaction(other_run) as tx:
            tx.resolve_interaction(key, {"kind": "approve"})
    assert store.get_interaction(key).status == "open"


def test_interactions_are_scoped_to_the_owner_of_their_run(store: Store) -> None:
    alice_run = _run(store, owner="alice")
    bob_run = _run(store, owner="bob")
    alice_key = _consent(store, alice_run)
    bob_key = _consent(store, bob_run)
    assert store.get_interaction(alice_key, owner="alice").run_id == alice_run
    with pytest.raises(NotFoundError, match="for owner 'bob'"):
        store.get_interaction(alice_key, owner="bob")
    with pytest.raises(NotFoundError):
        store.resolve_interaction(alice_key, {"kind": "approve"}, owner="bob")
    assert [i.id for i in store.list_interactions(owner="bob")] == [bob_key]
    assert [i.id for i in store.list_interactions(status="open")] == [alice_key, bob_key]
    store.resolve_interaction(bob_key, {"kind": "approve"}, owner="bob")
    assert [i.id for i in store.list_interactions(status="open")] == [alice_key]
    assert [i.id for i in store.list_interactions(status="resolved", run_id=bob_run)] == [bob_key]


def test_expire_is_compare_and_set_too(store: Store) -> None:
    run_id = _run(store)
    key = _consent(store, run_id)
    with store.transaction(run_id) as tx:
        assert tx.expire_interaction(key).status == "expired"
    with pytest.raises(StaleInteraction, match="is expired already"):
        store.resolve_interaction(key, {"kind": "approve"})
    with store.transaction(run_id) as tx:
        assert tx.open_interaction("ask_user", "Which day?").status == "open"


def test_open_interaction_checks_its_arguments(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(ConfigError, match="kind: expected one of ask_user, confirm, plan_consent, approval"):
        with store.transaction(run_id) as tx:
            tx.open_interaction("nag", "?")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool: expected an InteractionTool or None; found dict"):
        with store.transaction(run_id) as tx:
            tx.open_interaction("confirm", "?", tool={"name": "place"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="resolution: expected a JSON object"):
        store.resolve_interaction(_consent(store, run_id), "approve")  # type: ignore[arg-type]


# -- receipts and write intents ------------------------------------------------------------------------------


def test_receipts_are_kept_in_order(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        read = tx.add_receipt(
            step_index=0,
            source="tool_observation",
            name="get_overview",
            arguments_digest="sha256:aa",
            success=True,
            summary="12 tasks",
        )
        tx.add_receipt(
            step_index=1,
            source="user_reply",
            name="ask_user",
            arguments_digest="",
            success=True,
            summary="Monday",
        )
    assert read.run_id == run_id and read.at == clock.now
    assert [(r.step_index, r.source, r.summary) for r in store.receipts(run_id)] == [
        (0, "tool_observation", "12 tasks"),
        (1, "user_reply", "Monday"),
    ]
    assert store.receipts(run_id)[0] == read
    with pytest.raises(
        ConfigError, match="source: expected one of tool_observation, write_receipt, user_reply"
    ):
        with store.transaction(run_id) as tx:
            tx.add_receipt(
                step_index=0,
                source="rumour",  # type: ignore[arg-type]
                name="x",
                arguments_digest="",
                success=True,
                summary="",
            )
    with pytest.raises(ConfigError, match="step_index: expected an integer >= 0; found -1"):
        with store.transaction(run_id) as tx:
            tx.add_receipt(
                step_index=-1, source="user_reply", name="x", arguments_digest="", success=True, summary=""
            )
    with pytest.raises(NotFoundError):
        store.receipts("run_missing")


def test_a_receipt_keeps_what_its_call_returned(store: Store) -> None:
    run_id = _run(store)
    outputs: list[object] = [{"placed": True, "task": {"id": "t9", "slot": 4}}, "3 free slots", [1, 2], None]
    with store.transaction(run_id) as tx:
        for output in outputs:
            tx.add_receipt(
                step_index=0,
                source="tool_observation",
                name="get_overview",
                arguments_digest="",
                success=True,
                summary="",
                output=output,  # type: ignore[arg-type]
            )
        tx.record_write_intent("k-out", "place", "d")
    with store.transaction(run_id) as tx:
        tx.complete_write_intent(
            "k-out", step_index=1, success=False, summary="taken", output={"placed": False}
        )
    assert [r.output for r in store.receipts(run_id)] == [*outputs, {"placed": False}]
    with pytest.raises(ConfigError, match="add_receipt: output: expected JSON data"):
        with store.transaction(run_id) as tx:
            tx.add_receipt(
                step_index=0,
                source="user_reply",
                name="ask_user",
                arguments_digest="",
                success=True,
                summary="",
                output={"when": object()},  # type: ignore[dict-item]
            )
    assert len(store.receipts(run_id)) == 5  # the refused receipt left nothing behind


def test_write_intent_then_receipt_is_exactly_once(store: Store) -> None:
    run_id = _run(store)
    with store.transaction(run_id) as tx:
        intent = tx.record_write_intent("int_key", "place", "sha256:1f")
    assert (intent.status, intent.result, intent.run_id) == ("intent", None, run_id)
    assert store.pending_write_intents(run_id) == [intent]
    assert store.get_write_intent("int_key") == intent

    with pytest.raises(
        WriteIntentConflict, match=r"key 'int_key' exists already .*the write may have run"
    ) as err:
        with store.transaction(run_id) as tx:
            tx.record_write_intent("int_key", "place", "sha256:1f")
    assert err.value.intent == intent

    with store.transaction(run_id) as tx:
        receipt = tx.complete_write_intent(
            "int_key", step_index=2, success=True, summary="placed gym", result={"slot": 4}
        )
    assert (receipt.source, receipt.name, receipt.arguments_digest, receipt.step_index) == (
        "write_receipt",
        "place",
        "sha256:1f",
        2,
    )
    done = store.get_write_intent("int_key")
    assert done is not None and (done.status, done.result) == ("done", {"slot": 4})
    assert store.pending_write_intents(run_id) == []
    assert store.receipts(run_id) == [receipt]

    with pytest.raises(WriteIntentConflict, match="is done already"):
        with store.transaction(run_id) as tx:
            tx.complete_write_intent("int_key", step_index=2, success=True, summary="again")
    assert store.receipts(run_id) == [receipt]


def test_completing_an_unknown_or_foreign_write_intent(store: Store) -> None:
    run_id = _run(store)
    other = _run(store)
    with store.transaction(run_id) as tx:
        tx.record_write_intent("k1", "move", "d")
    for target, key in ((run_id, "k-missing"), (other, "k1")):
        with pytest.raises(NotFoundError, match=f"run '{target}' has no write intent '{key}'"):
            with store.transaction(target) as tx:
                tx.complete_write_intent(key, step_index=0, success=True, summary="")
    assert store.get_write_intent("k-missing") is None
    assert [i.key for i in store.pending_write_intents(run_id)] == ["k1"]


# -- leases --------------------------------------------------------------------------------------------------


def test_leases_are_compare_and_set_and_expire(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    lease = store.take_lease(run_id, "worker-a", ttl=30)
    assert lease is not None
    assert store.take_lease(run_id, "worker-b", ttl=30) is None
    assert store.take_lease(run_id, "worker-a", ttl=30) == lease
    run = store.get_run(run_id)
    assert (run.lease_owner, run.lease_expires_at) == ("worker-a", clock.now + 30)

    clock.advance(20)
    lease = store.extend_lease(lease, ttl=30)
    assert lease.expires_at == clock.now + 30
    clock.advance(29)
    assert store.take_lease(run_id, "worker-b", ttl=30) is None

    clock.advance(2)
    with pytest.raises(LeaseLost, match="it expired"):
        store.extend_lease(lease, ttl=30)
    assert store.take_lease(run_id, "worker-b", ttl=30) is not None
    assert not store.release_lease(run_id, "worker-a")
    assert store.release_lease(run_id, "worker-b")
    assert (store.get_run(run_id).lease_owner, store.get_run(run_id).lease_expires_at) == (None, None)
    assert store.take_lease(run_id, "worker-a", ttl=1) is not None


def test_a_run_created_with_its_lease_is_held_from_the_start(store: Store, clock: FakeClock) -> None:
    run = store.create_run("formula", "f", {}, lease=("worker-a", 30))
    assert (run.lease_owner, run.lease_expires_at) == ("worker-a", clock.now + 30)
    assert store.get_lease(run.id) == Lease(
        run_id=run.id, holder="worker-a", generation=1, expires_at=clock.now + 30
    )
    assert store.take_lease(run.id, "worker-b", ttl=30) is None  # live: nobody else takes it
    with store.transaction(run.id, fence=store.get_lease(run.id)) as tx:  # it fences commits at once
        tx.append(SpeakEvent(text="hello"))
    clock.advance(31)
    taken = store.take_lease(run.id, "worker-b", ttl=30)
    assert taken is not None and taken.generation == 2
    with pytest.raises(ConfigError, match="create_run: lease ttl: expected a positive number of seconds"):
        store.create_run("formula", "f", {}, lease=("worker-a", 0))
    with pytest.raises(ConfigError, match="create_run: lease holder: expected a non-empty string"):
        store.create_run("formula", "f", {}, lease=("", 5))


def test_lease_arguments_and_unknown_runs(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(ConfigError, match="ttl: expected a positive number of seconds; found 0"):
        store.take_lease(run_id, "w", ttl=0)
    with pytest.raises(ConfigError, match="holder: expected a non-empty string"):
        store.take_lease(run_id, "", ttl=5)
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.take_lease("run_missing", "w", 5)
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.extend_lease(Lease(run_id="run_missing", holder="w", generation=1, expires_at=0.0), 5)
    with pytest.raises(NotFoundError):
        store.release_lease("run_missing", "w")


# -- reopening and versions (backends where two handles share data) ------------------------------------------


def test_reopening_sees_everything(shared_backend: Backend) -> None:
    first = shared_backend.open()
    run_id = _run(first, owner="alice")
    key = _consent(first, run_id)
    with first.transaction(run_id) as tx:
        tx.append(SpeakEvent(text="hello"))
        tx.record_write_intent("wk", "place", "d")
        tx.set_snapshot({"round": 4}, version=2)
    expected = (
        first.get_run(run_id),
        first.events(run_id),
        first.get_snapshot(run_id),
        first.get_interaction(key),
        first.pending_write_intents(run_id),
    )
    first.close()
    second = shared_backend.open()
    try:
        assert (
            second.get_run(run_id),
            second.events(run_id),
            second.get_snapshot(run_id),
            second.get_interaction(key),
            second.pending_write_intents(run_id),
        ) == expected
        with second.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="again")).seq == 2
    finally:
        second.close()


def test_a_store_written_by_a_newer_plangate_is_refused(shared_backend: Backend) -> None:
    from plangate.store import SCHEMA_VERSION

    shared_backend.open().close()
    assert shared_backend.set_schema_version is not None
    shared_backend.set_schema_version(SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}, written by a newer"):
        shared_backend.open()
    shared_backend.set_schema_version(SCHEMA_VERSION)
    shared_backend.open().close()
