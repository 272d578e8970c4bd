"""The scheduler (``runs/scheduler.py``) in one process on a SQLite store: each slot fires once (a second
scheduler racing it starts nothing), missed slots follow the schedule's policy, a run that outlasts its slot
makes the next slot skip, queue or run, a slot whose claimer died gets its run, a formula that cannot start
is recorded as failed. Real formulas and tools; the clock is the store's, moved by hand."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import EXAMPLES, example_tools

from plangate.engines import build as build_engines
from plangate.errors import ConfigError
from plangate.runs import Runs
from plangate.runs.scheduler import Scheduler
from plangate.runs.schedules import Schedules, due_slots
from plangate.store import SQLiteStore, Store

HERE = Path(__file__).parent / "schedules"
START = 1_750_000_000.0  # a whole multiple of 10 s


class Clock:
    def __init__(self) -> None:
        self.now = START + 0.1

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Store:
    return SQLiteStore(tmp_path / "s.db", clock=clock)


def _scheduler(store: Store) -> Scheduler:
    engines = build_engines(store, example_tools(), search_paths=[HERE])
    return Scheduler(store, engines.formulas.create, grace=2.0)


def _runs(store: Store) -> list[dict[str, object]]:
    items = store.list_runs(limit=100).items
    return sorted((run.input["schedule"] for run in items), key=lambda origin: str(origin["slot"]))  # type: ignore[arg-type, index, return-value]


def test_each_slot_fires_once_whoever_races(store: Store, clock: Clock) -> None:
    Schedules(store).add("ana", "nightly", "nightly", every=1.0, vars={"suite": "unit"}, overlap="allow")
    one, two = _scheduler(store), _scheduler(store)
    started: list[str] = []
    for _ in range(5):
        clock.now += 1.0
        started += one.run_pass() + two.run_pass()
    assert len(started) == 5 and len(set(started)) == 5
    origins = _runs(store)
    assert [o["slot"] for o in origins] == sorted({str(o["slot"]) for o in origins})
    assert all(o["missed"] == 0 for o in origins)
    run = store.get_run(started[0])
    assert (run.owner, run.name, run.input["vars"]) == ("ana", "nightly", {"suite": "unit"})


@pytest.mark.parametrize(("policy", "expected"), [("skip", 0), ("catch_up", 1)])
def test_missed_slots_follow_the_policy(store: Store, clock: Clock, policy: str, expected: int) -> None:
    Schedules(store).add("ana", "n", "nightly", every=1.0, missed=policy, overlap="allow")
    clock.now += 30.0  # nothing ran for 30 s
    started = _scheduler(store).run_pass()
    origins = _runs(store)
    on_time = [o for o in origins if o["missed"] == 0]
    caught = [o for o in origins if o["missed"] != 0]
    assert len(caught) == expected
    assert len(on_time) == 2  # the slots at most 2 s old (the grace)
    if caught:
        assert caught[0]["missed"] == 28 and caught[0]["missed_policy"] == "catch_up"
    assert len(started) == len(origins)


@pytest.mark.parametrize(("overlap", "runs_while_busy"), [("skip", 1), ("queue", 1), ("allow", 3)])
def test_overlap_policy(store: Store, clock: Clock, overlap: str, runs_while_busy: int) -> None:
    schedules = Schedules(store)
    schedule = schedules.add("ana", "s", "slow", every=1.0, overlap=overlap)
    scheduler = _scheduler(store)
    for _ in range(3):  # the first run waits on its 3-second timer: nobody advances it here
        clock.now += 1.0
        scheduler.run_pass()
    assert len(store.list_runs(limit=100).items) == runs_while_busy
    states = sorted(slot.state for slot in schedules.slots(schedule.id))
    if overlap == "queue":
        assert states == ["fired", "queued", "skipped"]
        first = store.list_runs(limit=100).items[0]
        with store.transaction(first.id) as tx:
            tx.set_status("completed")
        assert len(scheduler.run_pass()) == 1  # the queued slot's run starts once the first one ended
        assert sorted(s.state for s in schedules.slots(schedule.id)) == ["fired", "fired", "skipped"]
    elif overlap == "skip":
        assert states == ["fired", "skipped", "skipped"]


def test_a_slot_whose_claimer_died_gets_its_run_once(store: Store, clock: Clock) -> None:
    schedules = Schedules(store)
    schedule = schedules.add("ana", "n", "nightly", every=10.0, overlap="skip")
    clock.now += 10.0
    [slot] = due_slots(schedule, schedule.last_slot, clock.now)
    assert schedules.claim(schedule, slot, "fired", "run_orphan", "")  # ... and the process dies here
    clock.now += 11.0
    scheduler = _scheduler(store)
    scheduler.run_pass()
    scheduler.run_pass()  # a second pass finds the run there
    assert store.get_run("run_orphan").input["schedule"]["id"] == schedule.id  # type: ignore[index]
    assert sum(run.id == "run_orphan" for run in store.list_runs(limit=10).items) == 1


def test_a_formula_that_cannot_start_is_recorded(store: Store, clock: Clock) -> None:
    schedules = Schedules(store)
    schedule = schedules.add("ana", "gone", "no-such-formula", every=1.0)
    clock.now += 1.0
    assert _scheduler(store).run_pass() == []
    [slot] = schedules.slots(schedule.id)
    assert slot.state == "failed" and "no-such-formula" in slot.note


def test_paused_schedules_fire_nothing_and_resume_from_now(store: Store, clock: Clock) -> None:
    schedules = Schedules(store)
    schedules.add("ana", "n", "nightly", every=1.0, missed="catch_up")
    schedules.set_paused("n", True, owner="ana")
    clock.now += 30.0
    scheduler = _scheduler(store)
    assert scheduler.run_pass() == []
    schedules.set_paused("n", False, owner="ana")
    clock.now += 1.0
    assert len(scheduler.run_pass()) == 1  # the slots while paused are never caught up


def test_cron_slots_follow_the_time_zone(store: Store) -> None:
    schedule = Schedules(store).add("ana", "c", "nightly", cron="0 9 * * MON", timezone="Europe/Paris")
    # Mondays 2026-03-02 and 2026-03-30, 09:00 in Paris: 08:00 UTC, then 07:00 UTC (summer time from 03-29)
    winter, summer = 1_772_438_400.0, 1_774_854_000.0
    assert due_slots(schedule, winter - 86_400, winter + 86_400) == [winter]
    assert due_slots(schedule, summer - 86_400, summer + 86_400) == [summer]
    assert len(due_slots(schedule, winter, summer)) == 4  # the three Mondays between, and the last


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "give one of cron"),
        ({"cron": "every day"}, "is not a cron expression"),
        ({"every": 1.0, "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"every": 1.0, "missed": "later"}, "expected 'skip' or 'catch_up'"),
        ({"every": 1.0, "overlap": "both"}, "expected 'skip', 'queue' or 'allow'"),
        ({"cron": "0 9 31 2 *"}, re.escape("'0 9 31 2 *' never fires: no date matches it")),
        ({"every": 99_999_999_999 * 86_400.0}, "expected 1 second to 3650 days"),
    ],
)
def test_bad_schedules_say_what_is_wrong(store: Store, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Schedules(store).add("ana", "x", "nightly", **options)  # type: ignore[arg-type]
    assert Schedules(store).listed() == []


def test_a_schedule_that_never_fires_again_breaks_neither_the_others_nor_the_lists(
    store: Store, clock: Clock, make_app: Callable[..., FastAPI], tmp_path: Path
) -> None:
    # Stored before ``add`` refused such a cron (or by hand): before, every pass of the scheduler failed on it
    # (the other schedules' slots never fired) and listing the schedules was a traceback, or a 500.
    schedules = Schedules(store)
    schedules.add("local", "every-second", "nightly", every=1.0, overlap="allow")
    schedules.add("local", "feb-31", "nightly", cron="0 9 28 2 *")
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db, db:
        db.execute("UPDATE schedules SET cron = '0 9 31 2 *' WHERE name = 'feb-31'")
    clock.now += 1.0
    assert len(_scheduler(store).run_pass()) == 1
    assert [s.name for s in schedules.listed()] == ["every-second", "feb-31"]
    with TestClient(make_app(store=store, auth=False, schedules=False, search_paths=[HERE])) as client:
        listed = client.get("/v1/schedules")
        assert listed.status_code == 200, listed.text
        assert [item["next_slot"] is None for item in listed.json()["items"]] == [False, True]
        assert client.get("/v1/schedules/feb-31").status_code == 200


def test_the_servers_passes_advance_the_runs_they_start(store: Store, clock: Clock) -> None:
    from plangate.runs.operations import Operations
    from plangate.server.app import _operations

    Schedules(store).add("ana", "n", "nightly", every=1.0)
    engines = build_engines(store, example_tools(), search_paths=[HERE])
    runs = Runs(store, engines.registry)

    async def main() -> None:
        operations = Operations(store, engines.formulas.create, grace=2.0)
        task = asyncio.create_task(_operations(runs, operations, 0.05))
        clock.now += 1.0
        for _ in range(100):
            await asyncio.sleep(0.05)
            items = store.list_runs(limit=10).items
            if items and items[0].status == "completed":
                break
        task.cancel()
        await runs.close()

    asyncio.run(main())
    assert [run.status for run in store.list_runs(limit=10).items] == ["completed"]


def test_the_api_keeps_each_owners_schedules(make_app: Callable[..., FastAPI], store: Store) -> None:
    from plangate.server.tokens import Tokens, hash_token

    Tokens(store).create("ana", hash_token("pg_ana"))
    Tokens(store).create("bo", hash_token("pg_bo"))
    ana = {"Authorization": "Bearer pg_ana"}
    bo = {"Authorization": "Bearer pg_bo"}
    body = {"name": "daily", "formula": "nightly", "cron": "0 6 * * *", "timezone": "Europe/Paris"}
    with TestClient(make_app(store=store, schedules=False, search_paths=[HERE])) as client:
        made = client.post("/v1/schedules", json=body, headers=ana)
        assert made.status_code == 201, made.text
        assert made.json()["schedule"]["cron"] == "0 6 * * *"
        assert client.post("/v1/schedules", json=body, headers=ana).status_code == 422  # the name is taken
        bad = client.post(
            "/v1/schedules", json={**body, "name": "x", "every": "soon", "cron": None}, headers=ana
        )
        assert bad.status_code == 422 and "every: expected an interval" in bad.json()["detail"]
        assert client.get("/v1/schedules", headers=bo).json()["items"] == []
        assert client.post("/v1/schedules/daily/pause", headers=bo).status_code == 404
        assert client.post("/v1/schedules/daily/pause", headers=ana).json()["schedule"]["paused"] is True
        assert client.post("/v1/schedules/daily/resume", headers=ana).json()["schedule"]["paused"] is False
        assert client.get("/v1/schedules/daily", headers=ana).json()["slots"] == []
        assert client.delete("/v1/schedules/daily", headers=ana).status_code == 204
        assert client.get("/v1/schedules", headers=ana).json()["items"] == []


def test_the_api_adds_no_schedule_of_a_path_or_of_a_formula_that_does_not_pass_check(
    make_app: Callable[..., FastAPI], store: Store, tmp_path: Path
) -> None:
    # Before, any of these was a 201: a path was run from wherever it pointed at each slot (a client made the
    # server read files of its choosing), the others failed at every slot.
    outside = tmp_path / "outside.formula.toml"
    outside.write_text((HERE / "nightly.formula.toml").read_text(encoding="utf-8"), encoding="utf-8")
    with TestClient(
        make_app(store=store, auth=False, schedules=False, search_paths=[HERE, EXAMPLES])
    ) as client:
        for formula, problem in [
            (str(outside), "invalid-request"),
            ("../../outside.formula.toml", "invalid-request"),
            ("outside.formula.toml", "invalid-request"),
            ("nowhere", "formula-check-failed"),
            ("release", "formula-check-failed"),  # its var ``version`` is required
        ]:
            body = {"name": "s", "formula": formula, "every": "1m"}
            refused = client.post("/v1/schedules", json=body)
            assert refused.status_code == 422, (formula, refused.text)
            assert refused.json()["type"].endswith(problem), (formula, refused.json())
        assert client.get("/v1/schedules").json()["items"] == []
        body = {"name": "s", "formula": "release", "vars": {"version": "1.0.0"}, "every": "1m"}
        assert client.post("/v1/schedules", json=body).status_code == 201
    assert [s.formula for s in Schedules(store).listed()] == ["release"]


def test_plangate_toml_defines_schedules(store: Store) -> None:
    from plangate.cli._serve import define_schedules
    from plangate.config import parse_config

    first = (
        '[[schedules]]\nname = "daily"\nformula = "nightly"\ncron = "0 6 * * *"\nvars = { suite = "unit" }\n'
    )
    define_schedules(parse_config(first), store)
    Schedules(store).set_paused("daily", True, owner="local")
    define_schedules(parse_config(first.replace("0 6 * * *", "30 6 * * *")), store)
    [stored] = Schedules(store).listed()
    assert (stored.cron, stored.vars, stored.paused) == ("30 6 * * *", {"suite": "unit"}, True)
    bad = '[[schedules]]\nname = "x"\nformula = "nightly"\nevery = "1m"\ntimezone = "Nowhere/City"\n'
    with pytest.raises(ConfigError, match=r"schedules\[0\] \(x\): schedule: timezone: unknown time zone"):
        define_schedules(parse_config(bad), store)
