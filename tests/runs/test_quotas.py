"""Per-owner quotas (``runs/quotas``) on real stores: runs at once (the rest wait in the order they came and
are admitted as slots free, each started by one process; of many processes racing on PostgreSQL, exactly the
limit's worth are admitted), what an owner's runs spent today (counted in the run's ending transaction, a
root's only) and its daily budget, and where an owner's limits come from (the store's overrides, then the
file's)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from plangate.config import parse_config
from plangate.errors import ConfigError
from plangate.runs.quotas import (
    STALE_START,
    Admissions,
    DailyUsage,
    Limits,
    LimitSettings,
    LimitsOf,
    OwnerLimits,
)
from plangate.store import SQLiteStore, Store, open_store


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0  # 2025-06-15, mid-day UTC

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Store:
    return SQLiteStore(tmp_path / "quotas.db", clock=clock)


def _end(store: Store, run_id: str, usage: dict[str, object] | None = None) -> None:
    outcome: dict[str, object] = {"status": "completed", "stage": "run", "code": "done", "user_message": ""}
    if usage is not None:
        outcome["usage"] = usage
    with store.transaction(run_id) as tx:
        tx.set_status("completed", outcome=outcome)


def test_runs_past_the_limit_wait_in_order_and_each_slot_is_handed_out_once(store: Store) -> None:
    admissions = Admissions(store)
    runs = [store.create_run("formula", f"r{n}", {}, owner="ana").id for n in range(5)]
    assert [admissions.enter(run_id, "ana", 2) for run_id in runs] == [True, True, False, False, False]
    assert [admissions.position(run_id) for run_id in runs] == [None, None, 0, 1, 2]
    assert not admissions.may_start(runs[2]) and admissions.may_start(runs[0])
    assert admissions.may_start(store.create_run("formula", "unlimited", {}, owner="ana").id)
    assert admissions.hand_out() == []  # nothing ended: no slot free

    _end(store, runs[0])
    with store.transaction(runs[1]) as tx:
        tx.set_status("cancelled")
    assert admissions.hand_out() == runs[2:4]  # the two oldest waiting, started by this process
    assert Admissions(store).hand_out() == []  # another process finds them started already
    standing = admissions.standing("ana")
    assert (standing.going, standing.waiting) == (2, [runs[4]])
    assert admissions.waiting() == {runs[4]}


def test_an_admitted_run_its_starter_left_queued_is_started_again(store: Store, clock: Clock) -> None:
    admissions = Admissions(store)
    first, second = (store.create_run("formula", f"r{n}", {}, owner="ana").id for n in range(2))
    assert admissions.enter(first, "ana", 1) and not admissions.enter(second, "ana", 1)
    _end(store, first)
    assert admissions.hand_out() == [second]  # claimed; say its process dies before advancing it
    clock.now += STALE_START - 1
    assert Admissions(store).hand_out() == []
    clock.now += 2
    assert Admissions(store).hand_out() == [second]


def test_of_many_processes_racing_exactly_the_limit_is_admitted(postgres_url: str) -> None:
    stores = [open_store(postgres_url) for _ in range(4)]
    try:
        run_ids = [stores[0].create_run("formula", f"r{n}", {}, owner="race").id for n in range(24)]
        admitted: list[str] = []
        lock = threading.Lock()

        def enter(store: Store, ids: list[str]) -> None:
            for run_id in ids:
                if Admissions(store).enter(run_id, "race", 3):
                    with lock:
                        admitted.append(run_id)

        threads = [
            threading.Thread(target=enter, args=(store, run_ids[n::4])) for n, store in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(admitted) == 3
        for run_id in admitted:
            _end(stores[0], run_id)
        handed: list[str] = []
        threads = [
            threading.Thread(target=lambda s=store: handed.extend(Admissions(s).hand_out()))
            for store in stores
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(handed) == 3 and not set(handed) & set(admitted)
        waiting = Admissions(stores[0]).standing("race").waiting
        assert len(waiting) == 18 and set(waiting) == set(run_ids) - set(admitted) - set(handed)
    finally:
        for store in stores:
            store.close()


def test_a_days_spending_counts_root_runs_once_and_holds_the_budget(store: Store, clock: Clock) -> None:
    usage = DailyUsage(store)
    root = store.create_run("formula", "r", {}, owner="ana").id
    child = store.create_run("agent", "c", {}, owner="ana", parent_run_id=root).id
    _end(store, child, {"input_tokens": 100, "output_tokens": 50, "cost": 0.5})  # counted with its root
    _end(store, root, {"input_tokens": 300, "output_tokens": 100, "cost": 1.25})
    _end(store, store.create_run("formula", "free", {}, owner="ana").id)  # no model: nothing counted
    spent = usage.today("ana")
    assert (spent.day, spent.runs, spent.tokens, spent.cost) == ("2025-06-15", 1, 400, 1.25)
    assert usage.today("bo").tokens == 0

    assert usage.over_budget("ana", Limits(daily_tokens=401)) is None
    over = usage.over_budget("ana", Limits(daily_tokens=400))
    assert over is not None and (over.budget, over.limit, over.spent) == ("daily_tokens", 400, 400)
    assert over.retry_after == pytest.approx(1_750_032_000.0 - clock.now)  # 2025-06-16 00:00 UTC
    assert "spent its daily_tokens of 400 today (400)" in over.message("ana")
    priced = usage.over_budget("ana", Limits(daily_cost=1.0))
    assert priced is not None and priced.budget == "daily_cost"
    clock.now += 86_400  # the next day starts from nothing
    assert usage.over_budget("ana", Limits(daily_tokens=400)) is None


def test_an_owners_limits_are_the_stores_then_the_files(store: Store) -> None:
    config = parse_config(
        "[limits]\nruns_at_once = 4\nrequests_per_minute = 60\ndouble_texting = 'queue'\n"
        "[limits.owners.ci]\nruns_at_once = 10\n"
    )
    settings = LimitSettings.of_config(config.limits)
    limits = LimitsOf(store, settings, ttl=0)
    assert limits("ana") == Limits(runs_at_once=4, requests_per_minute=60, double_texting="queue")
    assert limits("ci").runs_at_once == 10 and limits("ci").requests_per_minute == 60
    owners = OwnerLimits(store)
    owners.set("ana", {"runs_at_once": 2, "daily_tokens": 1000})
    owners.set("ana", {"requests_per_minute": None})  # no limit for ana, whatever the file says
    assert limits("ana") == Limits(
        runs_at_once=2, requests_per_minute=None, daily_tokens=1000, double_texting="queue"
    )
    assert owners.reset("ana", ("daily_tokens",)) == {"runs_at_once": 2, "requests_per_minute": None}
    assert owners.reset("ana") == {} and limits("ana").runs_at_once == 4
    for bad, why in (
        ({"runs_at_once": 0}, "runs_at_once: expected a whole number of at least 1"),
        ({"daily_cost": -1}, "daily_cost: expected a cost above 0"),
        ({"double_texting": "shout"}, "double_texting: expected one of reject, queue, cancel"),
        ({"speed": 1}, "unknown limit 'speed'"),
    ):
        with pytest.raises(ConfigError, match=why):
            owners.set("ana", bad)
    assert owners.get("ana") == {}
