"""What is particular to the SQLite backend: URLs, opening errors, pragmas, the frozen schema, file growth."""

from __future__ import annotations

import os
import sqlite3
import textwrap
from pathlib import Path

import pytest
from components import other_tables
from forking import said_in_a_child

import plangate.store
from plangate.errors import ConfigError, RunError, StoreError
from plangate.events import SpeakEvent
from plangate.store import DEFAULT_STORE_PATH, SCHEMA_VERSION, Documents, SQLiteStore, open_store
from plangate.store import _sqlite_checkpoint as checkpoints
from plangate.store._schema import MIGRATIONS
from plangate.store.ddl import statements
from plangate.store.url import sqlite_target

FIXTURES = Path(__file__).parent / "fixtures"


def _docstring_example(module: object) -> str:
    """The code block that follows the ``::`` line of a module's docstring."""
    doc = getattr(module, "__doc__", None) or ""
    block = doc.split("::\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_the_package_example_runs() -> None:
    code = _docstring_example(plangate.store)
    assert "store.transaction(run.id)" in code
    exec(compile(code, "plangate.store docstring", "exec"), {})


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("sqlite:///runs/plangate.db", "runs/plangate.db"),
        ("sqlite:////var/lib/plangate.db", "/var/lib/plangate.db"),
        (":memory:", ":memory:"),
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("  data/store.db ", "data/store.db"),
        ("/abs/store.db", "/abs/store.db"),
        ("SQLITE:///x.db", "x.db"),
    ],
)
def test_store_urls(url: str, target: str) -> None:
    assert sqlite_target(url) == target


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "expected sqlite:///relative/path.db, .* found an empty string"),
        ("mysql://db/plangate", "found the unknown scheme 'mysql'"),
        ("sqlite:/x.db", "found 'sqlite:/x.db' .did you mean"),
        ("sqlite:///", "a path after 'sqlite:///' is missing"),
    ],
)
def test_bad_store_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        sqlite_target(url)


def test_no_url_reads_the_environment_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", "sqlite:///from-env.db")
    assert sqlite_target(None) == "from-env.db"
    monkeypatch.setenv("PLANGATE_STORE", "  ")
    assert sqlite_target(None) == str(DEFAULT_STORE_PATH)
    monkeypatch.delenv("PLANGATE_STORE")
    store = open_store()
    try:
        run_id = store.create_run("agent", "default", {}).id
    finally:
        store.close()
    assert (tmp_path / ".plangate" / "plangate.db").is_file()
    with SQLiteStore(tmp_path / ".plangate" / "plangate.db") as again:
        assert again.get_run(run_id).name == "default"


def test_opening_a_directory_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"cannot open the store at {tmp_path}: expected a database file"):
        SQLiteStore(tmp_path)


def test_opening_a_file_that_is_not_a_database_is_a_readable_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("shopping list: eggs, milk\n" * 100)
    with pytest.raises(
        StoreError, match=r"opening failed on the store at .*notes.db: .*not a plangate store"
    ):
        SQLiteStore(path)
    assert path.read_text().startswith("shopping list")


def test_a_database_of_someone_elses_tables_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    # Before, the store's tables were added to it (and the file turned to WAL): a data file named as the
    # store by mistake was changed, by reading commands too.
    path = tmp_path / "data.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders (total) VALUES (9.5)")
    conn.close()
    before = path.read_bytes()

    with pytest.raises(StoreError, match=r"is not a plangate store: it holds other tables \(orders\)"):
        SQLiteStore(path)

    assert path.read_bytes() == before
    assert not path.with_name("data.sqlite-wal").exists()


def test_a_new_or_empty_file_becomes_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "new.db"):
        SQLiteStore(path).close()
        SQLiteStore(path).close()  # and opens again as one


def test_a_folder_that_cannot_be_made_is_a_readable_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create the folder of the store at") as err:
        SQLiteStore(blocker / "sub" / "plangate.db")
    assert isinstance(err.value, RunError)


def test_busy_timeout_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="busy_timeout: expected a positive number of seconds; found -1"):
        SQLiteStore(tmp_path / "x.db", busy_timeout=-1)


def test_the_file_is_in_wal_mode_with_normal_sync(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with SQLiteStore(path) as store:
        store.create_run("agent", "a", {})
        outside = sqlite3.connect(path)
        try:
            assert outside.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            outside.close()
        # synchronous and foreign_keys are per connection: read them on the store's own.
        conn = store._conn
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def _schema(path: Path, expected_version: int = SCHEMA_VERSION) -> str:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql, tbl_name FROM sqlite_master WHERE sql IS NOT NULL "
            "ORDER BY type DESC, name"
        ).fetchall()
        others = other_tables()  # other components' tables: not the core's frozen schema
        found = [(kind, name, sql) for kind, name, sql, table in rows if table not in others]
        version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
    finally:
        conn.close()
    assert version == expected_version
    return "".join(f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in found).rstrip() + "\n"


def _frozen(version: int) -> str:
    return (FIXTURES / f"sqlite_schema_v{version}.sql").read_text().split("\n\n", 1)[1]


def _store_at_version(path: Path, version: int) -> None:
    """A store file as a plangate whose newest migration was number ``version`` left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for migration in MIGRATIONS[:version]:
            for statement in statements(migration, "sqlite"):
                conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    finally:
        conn.close()


def test_the_schema_matches_the_frozen_one(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "fresh.db").close()
    assert _schema(tmp_path / "fresh.db") == _frozen(SCHEMA_VERSION)


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_every_migration_still_builds_its_frozen_schema(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    _store_at_version(path, version)
    assert _schema(path, version) == _frozen(version)


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _store_at_version(path, 1)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
            "VALUES ('run_old', 'agent', 'from v1', 'local', 'completed', '{}', 1.0, 1.0)"
        )
    conn.close()
    with SQLiteStore(path) as store:
        assert store.get_run("run_old").name == "from v1"
        assert Documents(store).put("schedule", "default", {"tasks": []}, expected_version=None).version == 1
    assert _schema(path) == _frozen(SCHEMA_VERSION)


def test_receipts_written_before_version_5_read_back_with_no_output(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    _store_at_version(path, 4)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
            "VALUES ('run_old', 'agent', 'from v4', 'local', 'completed', '{}', 1.0, 1.0)"
        )
        conn.execute(
            "INSERT INTO receipts (run_id, step_index, source, name, arguments_digest, success, summary, at) "
            "VALUES ('run_old', 0, 'write_receipt', 'place', 'd', 1, 'placed', 2.0)"
        )
    conn.close()
    with SQLiteStore(path) as store:
        (receipt,) = store.receipts("run_old")
        assert (receipt.name, receipt.success, receipt.output) == ("place", True, None)
    assert _schema(path) == _frozen(SCHEMA_VERSION)


_BEFORE_ORIGINS = (
    ("run_a", '{"prompt": "p"}'),
    ("run_f", '{"prompt": "p", "forked_from": {"run_id": "run_a", "round": 2, "seq": 7}}'),
    ("run_r", '{"formula": "f", "retried_from": {"run_id": "run_a", "step": "build"}}'),
    ("run_v", '{"vars": {"note": "forked_from nothing"}, "retried_from": "not a record"}'),
)


def test_forks_and_retries_made_before_version_8_get_their_origin_from_their_input(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    _store_at_version(path, 7)
    conn = sqlite3.connect(path)
    with conn:
        for run_id, input_ in _BEFORE_ORIGINS:
            conn.execute(
                "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
                "VALUES (?, 'agent', 'old', 'local', 'completed', ?, 1.0, 1.0)",
                (run_id, input_),
            )
    conn.close()
    with SQLiteStore(path) as store:
        assert [run.id for run in store.list_runs(origin_run_id="run_a").items] == ["run_r", "run_f"]
        assert [store.get_run(r).origin_run_id for r, _ in _BEFORE_ORIGINS] == [None, "run_a", "run_a", None]
    conn = sqlite3.connect(path)
    try:  # the forks of a run are read through their index, not by reading every run
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE origin_run_id = ? ORDER BY pos DESC LIMIT 101",
            ("run_a",),
        ).fetchall()
    finally:
        conn.close()
    assert any("runs_by_origin" in str(row[-1]) for row in plan), plan


def test_an_empty_sqlite_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    with SQLiteStore(path) as store:
        assert store.create_run("ask", "q", {}).status == "queued"


def test_snapshots_are_replaced_so_the_file_grows_with_events_only(tmp_path: Path) -> None:
    path = tmp_path / "growth.db"
    with SQLiteStore(path) as store:
        run_id = store.create_run("agent", "long", {}).id
        for round_index in range(200):
            with store.transaction(run_id) as tx:
                tx.append(SpeakEvent(text=f"round {round_index}"))
                tx.set_snapshot({"round": round_index, "history": ["x" * 100] * 20})
    conn = sqlite3.connect(path)
    try:
        counts = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("events", "snapshots")
        ]
    finally:
        conn.close()
    assert counts == [200, 1]


def test_a_writer_held_elsewhere_past_the_busy_timeout_is_a_readable_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    with SQLiteStore(path, busy_timeout=0.05) as store:
        run_id = store.create_run("agent", "a", {}).id
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(
                StoreError, match=r"database is locked; another process held the store's write"
            ):
                with store.transaction(run_id) as tx:
                    tx.append(SpeakEvent(text="blocked"))
        finally:
            other.execute("ROLLBACK")
            other.close()
        with store.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="free again")).seq == 1


def test_a_store_opened_before_a_fork_refuses_to_work_in_the_child(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "fork.db")
    run_id = store.create_run("agent", "a", {}).id
    child, said = said_in_a_child(lambda: store.get_run(run_id))
    assert f"opened in process {os.getpid()} and is used in process {child}" in said
    assert store.get_run(run_id).id == run_id  # the parent's store works on
    store.close()


def test_an_event_the_store_cannot_decode_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    with SQLiteStore(path) as store:
        run_id = store.create_run("agent", "a", {}).id
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="fine"))
        outside = sqlite3.connect(path)
        with outside:
            outside.execute("UPDATE events SET payload = '{\"text\": 5}'")
        outside.close()
        with pytest.raises(
            StoreError, match=f"cannot read: event {run_id}#1: .*text: Input should be a valid string"
        ):
            store.events(run_id)


def test_a_commit_reads_of_its_run_only_what_it_needs_and_the_whole_record_only_when_asked(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "reads.db") as store:
        run_id = store.create_run("formula", "a", {"tools": ["x" * 4096]}).id
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="one"))
        reads = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
        assert reads and all("input" not in sql for sql in reads), reads
        statements.clear()
        with store.transaction(run_id) as tx:
            assert tx.run.input == {"tools": ["x" * 4096]}
            assert tx.run.last_seq == 1
        assert sum("input" in sql for sql in statements) == 1
        store._conn.set_trace_callback(None)


def test_the_log_starts_over_while_commits_never_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint made beside commits that never stop ends a few commits behind them, and the log starts
    # over only at a commit that finds it wholly folded in: without the next commit folding the rest in,
    # it would only grow. The store's thread makes no checkpoint here: the test makes one where it wants.
    monkeypatch.setattr(checkpoints, "CHECKPOINT_EVERY", 10**9)
    monkeypatch.setattr(checkpoints, "MAX_LOG_FRAMES", 8)
    path = tmp_path / "busy.db"
    log = path.with_name(path.name + "-wal")
    with SQLiteStore(path) as store:
        run_id = store.create_run("formula", "busy", {}).id

        def commit(times: int) -> None:
            for _ in range(times):
                with store.transaction(run_id) as tx:
                    tx.append(SpeakEvent(text="a step"))

        commit(50)
        # a reader's snapshot holds the checkpoint back, as commits made while it works would: it ends
        # behind the last commits
        reader, beside = sqlite3.connect(path, isolation_level=None), sqlite3.connect(path)
        try:
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM events").fetchone() == (50,)
            commit(5)
            assert store._checkpoints is not None
            store._checkpoints.fold(beside)  # the store's thread's checkpoint
            reader.execute("COMMIT")
        finally:
            reader.close()
            beside.close()
        commit(2)  # the first folds in what came since the checkpoint; the second starts the log over
        longest = log.stat().st_size  # a log is never cut shorter: what it grew to
        commit(20)
        assert log.stat().st_size == longest  # written over from its start: it did not grow
        assert store.last_seq(run_id) == 77
    with SQLiteStore(path) as store:  # every commit is in the file once the log is folded in on close
        assert store.last_seq(run_id) == 77
