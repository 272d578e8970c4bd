"""Bad input ends a turn with a status and a reason a person understands: no traceback, nothing half-stored.

A question about a table that does not exist, a source that cannot be opened, a locked or huge database, a
model that writes garbage or nothing, a failing run, and a process killed in the middle of a turn.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from copilot_helpers import DONE, aggregate_step, answer_step, assert_stored_whole, lines, query_step

from plangate.copilot import Copilot, ask
from plangate.copilot._conversations import Conversations
from plangate.events import OutcomeEvent, StatusEvent
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore, Store
from plangate.tools.data import QueryLimits

HERE = Path(__file__).resolve().parent
SHOP = HERE.parents[1] / "examples" / "data" / "shop.db"
COUNT_OPS = lines(query_step("q", "shop", "SELECT count(*) AS n FROM orders"), answer_step("q"), DONE)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened  # type: ignore[misc]
    opened.close()


def test_a_question_about_a_table_that_does_not_exist(store: Store) -> None:
    ops = lines(query_step("q", "shop", "SELECT name, salary FROM employees"), answer_step("q"), DONE)
    turn = ask(
        "What is the average salary of the employees?",
        SHOP,
        model=ScriptedModel([ops, ops, ops]),
        store=store,
    )
    assert turn.status == "failed" and turn.answer == ""
    assert "unknown table 'employees'" in turn.reason
    assert_stored_whole(store, turn)


def test_a_model_that_says_the_table_does_not_exist_answers_so(store: Store) -> None:
    reply = lines({"op": "look", "table": "employees"})
    answer = lines(
        {"op": "reply", "text": "The shop data has no employees table, so salaries cannot be answered."}
    )
    turn = ask(
        "What is the average salary of the employees?",
        SHOP,
        model=ScriptedModel([reply, answer]),
        store=store,
    )
    assert turn.status == "done" and "no employees table" in turn.answer


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda tmp: tmp / "missing.db",
            "no data at '{path}': expected a SQLite file, a postgresql:// URL or a",
        ),
        (
            lambda tmp: _write(tmp / "notes.db", b"these are not the tables you are looking for" * 20),
            "cannot open {path}: data source 'notes': file is not a database",
        ),
        (lambda tmp: tmp, "data source '{path.name}': expected an existing SQLite file, got '{path}'"),
    ],
)
def test_a_source_that_cannot_be_opened(store: Store, tmp_path: Path, make: object, expected: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    model = ScriptedModel([COUNT_OPS])
    turn = ask("How many orders are there?", str(path), model=model, store=store)
    assert turn.status == "failed" and turn.reason.startswith(expected.format(path=path))
    assert model.requests == []  # nothing was asked of the model
    assert_stored_whole(store, turn)
    scope = [e for e in store.events(turn.run_id) if isinstance(e, StatusEvent) and e.stage == "scope"]
    assert [e.code for e in scope] == ["source_error"]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_postgres_database_that_cannot_be_reached_hides_the_password(store: Store) -> None:
    turn = ask(
        "How many orders?",
        "postgresql://reader:s3cret@127.0.0.1:1/shop",
        model=ScriptedModel([]),
        store=store,
    )
    assert turn.status == "failed"
    assert turn.reason.startswith(
        "cannot open postgresql://reader:***@127.0.0.1:1/shop: data source 'shop': "
    )
    assert "s3cret" not in turn.model_dump_json()
    run = store.get_run(turn.run_id)
    assert (
        "s3cret" not in run.model_dump_json()
        and run.input["data"] == "postgresql://reader:***@127.0.0.1:1/shop"
    )
    assert all("s3cret" not in event.model_dump_json() for event in store.events(turn.run_id))


def test_a_locked_database_ends_the_turn_within_its_time_limit(store: Store, shop_copy: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(shop_copy)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        copilot = Copilot(model=ScriptedModel([COUNT_OPS]), store=store, limits=QueryLimits(timeout_s=0.5))
        started = time.monotonic()
        turn = copilot.ask("How many orders are there?", shop_copy)
        assert time.monotonic() - started < 20
    finally:
        holder.kill()
        holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()
    assert turn.status == "failed" and "database is locked" in turn.reason
    assert_stored_whole(store, turn)


def test_a_query_that_runs_too_long_on_a_huge_table_fails_the_run_with_the_limit(store: Store) -> None:
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM c"
    ops = lines(query_step("q", "shop", slow), answer_step("q"), DONE)
    copilot = Copilot(model=ScriptedModel([ops, ops]), store=store, limits=QueryLimits(timeout_s=0.3))
    turn = copilot.ask("How many numbers are there?", SHOP)
    assert [a.status for a in turn.attempts] == ["failed", "failed"]
    assert turn.status == "failed" and "query stopped after 0.3 s" in turn.reason
    assert_stored_whole(store, turn)


def test_a_source_with_hundreds_of_tables_is_described_within_the_prompt_budget(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "wide.db"
    with closing(sqlite3.connect(path)) as connection:
        for index in range(400):
            connection.execute(
                f"CREATE TABLE t{index} (id INTEGER PRIMARY KEY, label TEXT, amount REAL, "
                "created_on TEXT, note TEXT)"
            )
        connection.execute("INSERT INTO t7 VALUES (1, 'a', 2.5, '2025-01-01', 'n')")
        connection.commit()
    ops = lines(
        aggregate_step("q", source="wide", table="t7", measures=[{"agg": "sum", "column": "t7.amount"}]),
        answer_step("q"),
        DONE,
    )
    model = ScriptedModel([ops, "The total is 2.5."])
    turn = ask("What is the total amount in t7?", path, model=model, store=store)
    assert turn.status == "done" and turn.answer == "The total is 2.5."
    system = model.requests[0].messages[0].content
    assert "More tables (look at one to see its columns):" in system and len(system) < 20_000


def test_a_run_whose_answer_step_fails_ends_failed_with_the_steps_reason(store: Store) -> None:
    from plangate.models import ModelRateLimitError

    failure = ModelRateLimitError("rate limited", provider="x")
    turn = ask(
        "How many orders are there?",
        SHOP,
        model=ScriptedModel([COUNT_OPS, failure, COUNT_OPS, failure]),
        store=store,
    )
    assert turn.status == "failed" and "step 'answer' failed" in turn.reason and "rate limited" in turn.reason
    assert_stored_whole(store, turn)


@pytest.mark.parametrize(
    "responses", [["", ""], ["\n\n```\n```\n", "no JSON here at all"], ["{not json", "[]"]]
)
def test_a_model_that_writes_nothing_or_garbage(store: Store, responses: list[str]) -> None:
    turn = ask("How many orders are there?", SHOP, model=ScriptedModel(responses), store=store)
    assert turn.status == "failed" and turn.reason.startswith("The model wrote no op")
    assert [a.status for a in turn.attempts] == ["failed", "failed"]
    assert_stored_whole(store, turn)


def test_a_turn_killed_mid_run_is_recovered_with_a_status_and_nothing_half_stored(tmp_path: Path) -> None:
    store_path, marker = tmp_path / "store.db", tmp_path / "answering"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "turn_worker.py"), str(store_path), str(SHOP), str(marker)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert worker.stdout is not None
        run_id = worker.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert worker.poll() is None, "the worker ended before its answer step"
            assert time.monotonic() < deadline, "the worker never reached its answer step"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        if worker.stdout is not None:
            worker.stdout.close()
    with SQLiteStore(store_path) as store:
        assert store.get_run(run_id).status == "running" and Conversations(store).find_turn(run_id) is None
        turn = Copilot(store=store, model=ScriptedModel([])).recover(run_id)
        assert turn.status == "failed"
        assert turn.reason == "the turn was interrupted: its process stopped before it finished"
        assert_stored_whole(store, turn)
        [child] = store.list_runs(parent_run_id=run_id, kind="formula").items
        assert child.status == "cancelled"
        assert next(e for e in store.events(run_id) if isinstance(e, OutcomeEvent)).code == "failed"
        assert Copilot(store=store, model=ScriptedModel([])).recover(run_id) == turn  # once ended, as stored
