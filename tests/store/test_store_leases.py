"""Lease generations and fenced commits on every backend: a holder that lost its lease never commits again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from store_backends import Backend, FakeClock

from plangate.errors import ConfigError, NotFoundError
from plangate.events import SpeakEvent
from plangate.store import Documents, Lease, LeaseLost, Store


def _run(store: Store) -> str:
    return store.create_run("formula", "leased", {}).id


def test_taking_a_free_or_expired_lease_starts_a_new_generation(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    assert store.get_lease(run_id) is None
    first = store.take_lease(run_id, "worker-a", ttl=30)
    assert first == Lease(run_id=run_id, holder="worker-a", generation=1, expires_at=clock.now + 30)
    assert store.get_lease(run_id) == first
    run = store.get_run(run_id)
    assert (run.lease_owner, run.lease_expires_at) == ("worker-a", clock.now + 30)

    assert store.take_lease(run_id, "worker-b", ttl=30) is None
    clock.advance(10)
    again = store.take_lease(run_id, "worker-a", ttl=30)
    assert again is not None and (again.generation, again.expires_at) == (1, clock.now + 30)

    clock.advance(31)
    taken = store.take_lease(run_id, "worker-b", ttl=30)
    assert taken is not None and (taken.holder, taken.generation) == ("worker-b", 2)
    assert store.release_lease(run_id, "worker-b")
    assert store.get_lease(run_id) is None
    after_release = store.take_lease(run_id, "worker-b", ttl=5)
    assert after_release is not None and after_release.generation == 3
    clock.advance(6)
    own_expired = store.take_lease(run_id, "worker-b", ttl=5)
    assert own_expired is not None and own_expired.generation == 4


def test_extend_lease_renews_only_the_current_lease(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    lease = store.take_lease(run_id, "worker-a", ttl=10)
    assert lease is not None
    clock.advance(5)
    extended = store.extend_lease(lease, ttl=10)
    assert extended == lease.model_copy(update={"expires_at": clock.now + 10})
    assert store.get_lease(run_id) == extended

    clock.advance(11)
    with pytest.raises(LeaseLost, match=r"extend_lease on run .* it expired 1 s ago") as err:
        store.extend_lease(extended, ttl=10)
    assert err.value.lease == extended and err.value.current == extended
    assert store.get_lease(run_id) == extended  # unchanged

    other = store.take_lease(run_id, "worker-b", ttl=10)
    assert other is not None
    with pytest.raises(LeaseLost, match=r"'worker-b' took it over \(generation 2, live\)") as err:
        store.extend_lease(extended, ttl=10)
    assert err.value.current == other


def test_a_fenced_transaction_commits_while_its_lease_is_current(store: Store) -> None:
    run_id = _run(store)
    lease = store.take_lease(run_id, "worker-a", ttl=30)
    assert lease is not None
    with store.transaction(run_id, fence=lease) as tx:
        tx.append(SpeakEvent(text="mine"))
        tx.set_status("running")
    assert store.last_seq(run_id) == 1 and store.get_run(run_id).status == "running"


def _late_commit(store: Store, run_id: str, lease: Lease) -> None:
    """Everything a transaction can write, fenced by ``lease`` (a document too)."""
    documents = Documents(store)
    with store.transaction(run_id, fence=lease) as tx:
        tx.append(SpeakEvent(text="late"))
        tx.set_snapshot({"from": "the paused holder"})
        tx.set_status("failed", outcome={"status": "failed"})
        tx.open_interaction("ask_user", "late?")
        tx.add_receipt(
            step_index=0, source="user_reply", name="ask_user", arguments_digest="", success=True, summary="x"
        )
        tx.record_write_intent("late-key", "place", "sha256:1")
        documents.put("schedule", "late", {"x": 1}, expected_version=None, tx=tx)


def test_a_holder_paused_past_expiry_cannot_commit_after_a_takeover(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    paused = store.take_lease(run_id, "worker-a", ttl=30)
    assert paused is not None
    with store.transaction(run_id, fence=paused) as tx:
        tx.append(SpeakEvent(text="before the pause"))
        tx.set_snapshot({"from": "worker-a"})
    clock.advance(45)  # worker-a is paused (GC, SIGSTOP, a partition) past its lease
    taker = store.take_lease(run_id, "worker-b", ttl=30)
    assert taker is not None and taker.generation == 2
    with store.transaction(run_id, fence=taker) as tx:
        tx.append(SpeakEvent(text="after the takeover"))
        tx.set_status("running")
    before = (store.get_run(run_id), store.events(run_id), store.get_snapshot(run_id))

    with pytest.raises(
        LeaseLost,
        match=r"the lease of 'worker-a' \(generation 1\) is no longer current: 'worker-b' took it over "
        r"\(generation 2, live\); nothing was written",
    ) as err:
        _late_commit(store, run_id, paused)
    assert (err.value.lease, err.value.current) == (paused, taker)

    assert (store.get_run(run_id), store.events(run_id), store.get_snapshot(run_id)) == before
    assert store.list_interactions(run_id=run_id) == []
    assert store.receipts(run_id) == []
    assert store.get_write_intent("late-key") is None
    assert Documents(store).get("schedule", "late") is None
    with store.transaction(run_id, fence=taker) as tx:
        assert tx.append(SpeakEvent(text="the new holder goes on")).seq == 3


def test_an_expired_or_released_lease_fences_too(store: Store, clock: FakeClock) -> None:
    run_id = _run(store)
    lease = store.take_lease(run_id, "worker-a", ttl=30)
    assert lease is not None
    clock.advance(31)
    with pytest.raises(LeaseLost, match="it expired 1 s ago; nothing was written"):
        _late_commit(store, run_id, lease)
    renewed = store.take_lease(run_id, "worker-a", ttl=30)
    assert renewed is not None and renewed.generation == 2
    assert store.release_lease(run_id, "worker-a")
    with pytest.raises(LeaseLost, match=r"nobody holds it now \(it was released\)") as err:
        _late_commit(store, run_id, renewed)
    assert err.value.current is None
    assert store.last_seq(run_id) == 0 and store.get_run(run_id).status == "queued"


def test_a_fence_must_be_a_lease_of_that_run(store: Store) -> None:
    run_id, other = _run(store), _run(store)
    lease = store.take_lease(other, "worker-a", ttl=30)
    assert lease is not None
    with pytest.raises(ConfigError, match=f"the lease is of run '{other}', not of run '{run_id}'"):
        with store.transaction(run_id, fence=lease):
            pass
    with pytest.raises(
        ConfigError, match=r"fence: expected a Lease \(from store.take_lease\) or None; found dict"
    ):
        with store.transaction(run_id, fence={"generation": 1}):  # type: ignore[arg-type]
            pass


def test_lease_calls_check_their_arguments(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(ConfigError, match="take_lease: holder: expected a non-empty string"):
        store.take_lease(run_id, "", ttl=5)
    with pytest.raises(ConfigError, match="take_lease: ttl: expected a positive number of seconds"):
        store.take_lease(run_id, "w", ttl=-1)
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.take_lease("run_missing", "w", ttl=5)
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.get_lease("run_missing")
    with pytest.raises(ConfigError, match=r"extend_lease: lease: expected a Lease .* found str"):
        store.extend_lease("worker-a", ttl=5)  # type: ignore[arg-type]
    ghost = Lease(run_id="run_missing", holder="w", generation=1, expires_at=0.0)
    with pytest.raises(NotFoundError, match="no run 'run_missing'"):
        store.extend_lease(ghost, ttl=5)


def test_a_takeover_waits_for_the_fenced_transaction_in_flight(shared_backend: Backend) -> None:
    clock = FakeClock()
    holder, taker = shared_backend.open(clock), shared_backend.open(clock)
    try:
        run_id = _run(holder)
        lease = holder.take_lease(run_id, "worker-a", ttl=30)
        assert lease is not None
        taken: list[Lease | None] = []
        thread = threading.Thread(target=lambda: taken.append(taker.take_lease(run_id, "worker-b", ttl=30)))
        with holder.transaction(run_id, fence=lease) as tx:
            tx.append(SpeakEvent(text="in flight"))
            clock.advance(31)  # the lease lapses while the transaction holds the run
            thread.start()
            thread.join(timeout=0.3)
            assert thread.is_alive(), "the lease moved while a fenced transaction held the run"
        thread.join(timeout=30)
        assert taken and taken[0] is not None and taken[0].generation == 2
        assert [event.seq for event in taker.events(run_id)] == [1]
    finally:
        holder.close()
        taker.close()


_PAUSED_HOLDER = textwrap.dedent(
    """
    import sys
    from plangate.events import SpeakEvent
    from plangate.store import LeaseLost, open_store

    store = open_store(sys.argv[1])
    lease = store.take_lease(sys.argv[2], "paused-worker", ttl=float(sys.argv[3]))
    print("leased", lease.generation, flush=True)
    sys.stdin.readline()  # the parent stops this process here, past the lease, then lets it go on
    try:
        with store.transaction(sys.argv[2], fence=lease) as tx:
            tx.append(SpeakEvent(text="the late commit"))
    except LeaseLost as exc:
        print("refused", exc.current.holder, exc.current.generation, flush=True)
    else:
        print("committed", flush=True)
    store.close()
    """
)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_a_process_stopped_past_its_lease_has_its_late_commit_refused(shared_backend: Backend) -> None:
    store = shared_backend.open()
    run_id = _run(store)
    ttl = 0.5
    holder = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_HOLDER, shared_backend.url, run_id, str(ttl)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline().split() == ["leased", "1"]
        os.kill(holder.pid, signal.SIGSTOP)
        lease = store.get_lease(run_id)
        assert lease is not None
        while time.time() <= lease.expires_at:
            time.sleep(0.05)
        taker = store.take_lease(run_id, "worker-b", ttl=60)
        assert taker is not None and taker.generation == 2
        with store.transaction(run_id, fence=taker) as tx:
            tx.append(SpeakEvent(text="the new holder's commit"))
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write("go\n")
        holder.stdin.close()
        assert holder.stdout.readline().split() == ["refused", "worker-b", "2"]
        assert holder.wait(timeout=60) == 0
        texts = [event.text for event in store.events(run_id) if isinstance(event, SpeakEvent)]
        assert texts == ["the new holder's commit"]
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
        if holder.stdout is not None:
            holder.stdout.close()
        store.close()
