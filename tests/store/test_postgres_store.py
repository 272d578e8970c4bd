"""What is particular to the PostgreSQL backend: URLs, the frozen schema, commits heard across processes, and
the faults only a server database has (a killed session, a lock held too long, the server restarted).

The conformance suite (``test_store_*.py``) runs on PostgreSQL too; these tests add what SQLite has no
counterpart for. They use the session's real server (``services_plugin.py``), one schema per test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from components import without_other_tables
from forking import said_in_a_child
from pg_schema import dump, schema_at

from plangate.errors import ConfigError, StoreError
from plangate.events import SpeakEvent
from plangate.store import SCHEMA_VERSION, Commit, Documents, Transaction, open_store
from plangate.store._pg_schema import migrate
from plangate.store._schema import MIGRATIONS
from plangate.store.ddl import statements
from plangate.store.postgres import PostgresStore
from plangate.store.url import postgres_url
from services_plugin import PostgresServer

FIXTURES = Path(__file__).parent / "fixtures"
BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    yield store
    store.close()


def _wait_for(condition: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not true within {timeout} s")


# -- urls and opening ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "libpq"),
    [
        ("postgresql://app:pw@db:5433/plangate", "postgresql://app:pw@db:5433/plangate"),
        ("postgres://db/plangate", "postgresql://db/plangate"),
        (
            "postgresql+psycopg://app@db/plangate?sslmode=require",
            "postgresql://app@db/plangate?sslmode=require",
        ),
        ("  POSTGRESQL://db/x ", "postgresql://db/x"),
        ("sqlite:///x.db", None),
        (":memory:", None),
    ],
)
def test_postgres_urls(url: str, libpq: str | None) -> None:
    assert postgres_url(url) == libpq


def test_without_the_extra_a_postgres_url_names_it_and_hides_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "plangate.store.postgres", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(ConfigError) as err:
        open_store("postgresql://app:s3cret@127.0.0.1:1/plangate")
    assert 'pip install "plangate[postgres]"' in str(err.value)
    assert "s3cret" not in str(err.value)


def test_an_unreachable_server_is_a_readable_error_without_the_password() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nobody listens there once the probe is closed
    with pytest.raises(StoreError) as err:
        open_store(f"postgresql://app:s3cret@127.0.0.1:{port}/plangate")
    message = str(err.value)
    assert f"cannot connect to the store at postgresql://app@127.0.0.1:{port}/plangate" in message
    assert "Connection refused" in message and "check that the server runs" in message
    assert "s3cret" not in message


def test_a_schema_missing_from_the_search_path_is_a_readable_error(postgres_server: PostgresServer) -> None:
    with pytest.raises(StoreError, match="no schema to create tables in"):
        PostgresStore(postgres_server.schema_url("no_such_schema"))


def test_stores_in_two_schemas_of_one_database_are_apart(postgres_server: PostgresServer) -> None:
    with PostgresStore(postgres_server.new_url()) as one, PostgresStore(postgres_server.new_url()) as two:
        run_id = one.create_run("agent", "here", {}).id
        assert [run.id for run in one.list_runs().items] == [run_id]
        assert two.list_runs().items == []


def test_a_store_opened_before_a_fork_refuses_to_work_in_the_child(pg: PostgresStore) -> None:
    run_id = pg.create_run("agent", "a", {}).id
    child, said = said_in_a_child(lambda: pg.get_run(run_id))
    assert f"opened in process {os.getpid()} and is used in process {child}" in said
    assert pg.get_run(run_id).id == run_id  # the parent's store works on


def test_more_threads_than_connections_take_turns(postgres_url: str) -> None:
    with PostgresStore(postgres_url, pool_size=2) as store:
        run_id = store.create_run("formula", "busy", {}).id
        errors: list[BaseException] = []

        def work(writer: int) -> None:
            try:
                for index in range(10):
                    with store.transaction(run_id) as tx:
                        tx.append(SpeakEvent(text=f"{writer}:{index}"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert [event.seq for event in store.events(run_id)] == list(range(1, 61))


# -- the schema ---------------------------------------------------------------------------------------------


def _frozen(version: int) -> str:
    return (FIXTURES / f"postgres_schema_v{version}.sql").read_text().split("\n\n", 1)[1]


def test_both_backends_are_at_the_same_schema_version() -> None:
    # one list of migrations, rendered in each dialect statement for statement
    assert len(MIGRATIONS) == SCHEMA_VERSION
    assert [len(statements(m, "sqlite")) for m in MIGRATIONS] == [
        len(statements(m, "postgresql")) for m in MIGRATIONS
    ]


def test_the_schema_matches_the_frozen_one(pg: PostgresStore, postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert without_other_tables(dump(conn)) == _frozen(SCHEMA_VERSION)
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_every_migration_still_builds_its_frozen_schema(
    postgres_server: PostgresServer, version: int
) -> None:
    assert schema_at(postgres_server.url, version) == _frozen(version)


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_runs(postgres_server: PostgresServer) -> None:
    postgres_url = postgres_server.new_url()  # a schema without tables
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, "test", upto=1)
        conn.execute(
            "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
            "VALUES ('run_old', 'agent', 'from v1', 'local', 'running', '{}', 1.0, 1.0)"
        )
    with PostgresStore(postgres_url) as store:
        assert store.get_run("run_old").name == "from v1"
        lease = store.take_lease("run_old", "worker", ttl=30)
        assert lease is not None and lease.generation == 1
        assert Documents(store).put("schedule", "default", {"tasks": []}, expected_version=None).version == 1
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert without_other_tables(dump(conn)) == _frozen(SCHEMA_VERSION)


def test_receipts_written_before_version_5_read_back_with_no_output(postgres_server: PostgresServer) -> None:
    postgres_url = postgres_server.new_url()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, "test", upto=4)
        conn.execute(
            "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
            "VALUES ('run_old', 'agent', 'from v4', 'local', 'completed', '{}', 1.0, 1.0)"
        )
        conn.execute(
            "INSERT INTO receipts (run_id, step_index, source, name, arguments_digest, success, summary, at) "
            "VALUES ('run_old', 0, 'write_receipt', 'place', 'd', true, 'placed', 2.0)"
        )
    with PostgresStore(postgres_url) as store:
        (receipt,) = store.receipts("run_old")
        assert (receipt.name, receipt.success, receipt.output) == ("place", True, None)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert without_other_tables(dump(conn)) == _frozen(SCHEMA_VERSION)


def test_forks_and_retries_made_before_version_8_get_their_origin_from_their_input(
    postgres_server: PostgresServer,
) -> None:
    postgres_url = postgres_server.new_url()
    inputs = (
        ("run_a", '{"prompt": "p"}'),
        ("run_f", '{"prompt": "p", "forked_from": {"run_id": "run_a", "round": 2, "seq": 7}}'),
        ("run_r", '{"formula": "f", "retried_from": {"run_id": "run_a", "step": "build"}}'),
        ("run_v", '{"vars": {"note": "forked_from nothing"}, "retried_from": "not a record"}'),
    )
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, "test", upto=7)
        for run_id, input_ in inputs:
            conn.execute(
                "INSERT INTO runs (id, kind, name, owner, status, input, created_at, updated_at) "
                "VALUES (%s, 'agent', 'old', 'local', 'completed', %s, 1.0, 1.0)",
                (run_id, input_),
            )
    with PostgresStore(postgres_url) as store:
        assert [run.id for run in store.list_runs(origin_run_id="run_a").items] == ["run_r", "run_f"]
        assert [store.get_run(r).origin_run_id for r, _ in inputs] == [None, "run_a", "run_a", None]


def test_processes_opening_a_new_schema_at_once_migrate_it_once(postgres_server: PostgresServer) -> None:
    postgres_url = postgres_server.new_url()  # a schema without tables
    opener = textwrap.dedent(
        """
        import sys
        from plangate.store import open_store

        print("ready", flush=True)
        sys.stdin.readline()
        open_store(sys.argv[1]).close()
        """
    )
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", opener, postgres_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        for process in openers:  # every one imported, so that they open the store at the same moment
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in openers:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.close()
        assert [process.wait(timeout=60) for process in openers] == [0, 0, 0]
    finally:
        for process in openers:
            if process.poll() is None:
                process.kill()
            if process.stdout is not None:
                process.stdout.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert without_other_tables(dump(conn)) == _frozen(SCHEMA_VERSION)


# -- commits heard by other processes (LISTEN/NOTIFY) -------------------------------------------------------


def test_a_remote_subscriber_hears_another_handles_commits_once_each(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as listener, PostgresStore(postgres_url) as writer:
        heard: list[Commit] = []
        local_only: list[Commit] = []
        listener.subscribe(heard.append, remote=True)
        listener.subscribe(local_only.append)
        run_id = writer.create_run("agent", "live", {}).id
        with writer.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="a"))
            tx.append(SpeakEvent(text="b"))
        with writer.transaction(run_id) as tx:
            tx.set_status("completed")
        _wait_for(lambda: len(heard) == 2)
        with listener.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="its own"))
        time.sleep(0.3)  # anything heard twice would arrive by now
        assert [(c.run_id, [e.seq for e in c.events], c.status) for c in heard] == [
            (run_id, [1, 2], None),
            (run_id, [], "completed"),
            (run_id, [3], None),  # its own commit, told in the committing thread, once
        ]
        assert heard[0].events == tuple(writer.events(run_id, limit=2))
        assert [[e.seq for e in c.events] for c in local_only] == [[3]]


def test_a_remote_subscriber_hears_another_process(postgres_url: str) -> None:
    writer = textwrap.dedent(
        """
        import sys
        from plangate.events import SpeakEvent
        from plangate.store import open_store

        store = open_store(sys.argv[1])
        for index in range(20):
            with store.transaction(sys.argv[2]) as tx:
                tx.append(SpeakEvent(text=f"from afar {index}"))
                if index == 19:
                    tx.set_status("completed")
        store.close()
        """
    )
    with PostgresStore(postgres_url) as store:
        run_id = store.create_run("formula", "far", {}).id
        heard: list[Commit] = []
        store.subscribe(heard.append, remote=True)
        process = subprocess.run(
            [sys.executable, "-c", writer, postgres_url, run_id], capture_output=True, text=True, timeout=60
        )
        assert process.returncode == 0, process.stderr
        _wait_for(lambda: len(heard) == 20)
        assert [e.seq for commit in heard for e in commit.events] == list(range(1, 21))
        assert heard[-1].status == "completed"


def test_stores_in_other_schemas_are_not_heard(postgres_server: PostgresServer) -> None:
    with (
        PostgresStore(postgres_server.new_url()) as listener,
        PostgresStore(postgres_server.new_url()) as elsewhere,
    ):
        heard: list[Commit] = []
        listener.subscribe(heard.append, remote=True)
        run_id = elsewhere.create_run("agent", "elsewhere", {}).id
        with elsewhere.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="not for you"))
        mine = listener.create_run("agent", "mine", {}).id
        with PostgresStore(listener_url(listener)) as neighbour, neighbour.transaction(mine) as tx:
            tx.append(SpeakEvent(text="for you"))
        _wait_for(lambda: len(heard) == 1)
        time.sleep(0.2)
        assert [commit.run_id for commit in heard] == [mine]


def listener_url(store: PostgresStore) -> str:
    return store._url


# -- faults only a server database has ----------------------------------------------------------------------


def test_a_session_killed_mid_transaction_writes_nothing_and_the_store_goes_on(
    postgres_server: PostgresServer,
) -> None:
    name = f"victim-{os.getpid()}-{time.monotonic_ns()}"
    with PostgresStore(postgres_server.new_url(application_name=name)) as store:
        run_id = store.create_run("agent", "doomed", {}).id
        with store.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="committed"))
        admin = psycopg.connect(postgres_server.url, autocommit=True)
        try:
            with pytest.raises(StoreError) as err:
                with store.transaction(run_id) as tx:
                    tx.append(SpeakEvent(text="never committed"))
                    tx.set_snapshot({"from": "the killed session"})
                    tx.open_interaction("ask_user", "lost?")
                    # the second argument waits until the session is gone, before the block goes on
                    killed = admin.execute(
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                        "WHERE application_name = %s AND state = 'idle in transaction'",
                        (name,),
                    ).fetchall()
                    assert killed == [(True,)]
                    tx.append(SpeakEvent(text="after the kill"))
        finally:
            admin.close()
        assert f"the transaction on run '{run_id}' failed" in str(err.value)
        assert "the connection to the database was lost" in str(err.value)
        assert [event.seq for event in store.events(run_id)] == [1]
        assert store.get_snapshot(run_id) is None
        assert store.list_interactions(run_id=run_id) == []
        with store.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="a new connection")).seq == 2


def test_a_session_killed_before_a_one_round_trip_commit_is_sent_writes_nothing_and_the_store_goes_on(
    postgres_server: PostgresServer,
) -> None:
    # A commit under the lease that begins from what the store knew sends nothing before its function
    # returns: the session dies while the function runs, and the one query (the guard, the writes and the
    # COMMIT) finds it gone.
    name = f"victim-{os.getpid()}-{time.monotonic_ns()}"
    with PostgresStore(postgres_server.new_url(application_name=name)) as store:
        run_id = store.create_run("formula", "doomed", {}, lease=("worker-a", 30)).id
        lease = store.get_lease(run_id)
        assert lease is not None
        store.commit(run_id, lambda tx: tx.append(SpeakEvent(text="committed")), fence=lease)
        admin = psycopg.connect(postgres_server.url, autocommit=True)

        def killed_meanwhile(tx: Transaction) -> None:
            tx.append(SpeakEvent(text="never committed"))
            tx.set_status("running")
            states = admin.execute(
                "SELECT state FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
            assert states and all(row == ("idle",) for row in states)  # nothing sent yet: no transaction
            # the second argument waits until the session is gone, before the function goes on
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s",
                (name,),
            ).fetchall()
            assert killed and all(row == (True,) for row in killed)
            tx.append(SpeakEvent(text="after the kill"))

        try:
            with pytest.raises(StoreError) as err:
                store.commit(run_id, killed_meanwhile, fence=lease)
        finally:
            admin.close()
        assert f"the transaction on run '{run_id}' failed" in str(err.value)
        assert "the connection to the database was lost" in str(err.value)
        assert [event.seq for event in store.events(run_id)] == [1]
        assert store.get_run(run_id).status == "queued"
        for seq, text in ((2, "a new connection"), (3, "and one more")):
            event = store.commit(run_id, lambda tx, text=text: tx.append(SpeakEvent(text=text)), fence=lease)
            assert event.seq == seq


def test_a_run_locked_past_the_busy_timeout_is_a_readable_error(postgres_url: str) -> None:
    with PostgresStore(postgres_url, busy_timeout=0.1) as store:
        run_id = store.create_run("agent", "held", {}).id
        other = psycopg.connect(postgres_url, autocommit=False)
        try:
            other.execute("SELECT 1 FROM runs WHERE id = %s FOR UPDATE", (run_id,))
            with pytest.raises(
                StoreError, match=r"another transaction held the run's lock for more than 0.1 s"
            ):
                with store.transaction(run_id) as tx:
                    tx.append(SpeakEvent(text="blocked"))
        finally:
            other.rollback()
            other.close()
        with store.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="free again")).seq == 1


def test_a_transaction_left_open_past_the_stuck_timeout_is_ended_and_frees_the_run(postgres_url: str) -> None:
    with PostgresStore(postgres_url, stuck_timeout=0.2) as stuck, PostgresStore(postgres_url) as other:
        run_id = stuck.create_run("agent", "stuck", {}).id
        with pytest.raises(StoreError, match="failed on the store"):
            with stuck.transaction(run_id) as tx:
                tx.append(SpeakEvent(text="then the process hangs"))
                time.sleep(1.0)  # a paused process: the server ends its session after 0.2 s
        with other.transaction(run_id) as tx:
            assert tx.append(SpeakEvent(text="the run is free")).seq == 1


_RESILIENT_WRITER = textwrap.dedent(
    """
    import sys, time
    from plangate.errors import StoreError
    from plangate.events import SpeakEvent
    from plangate.store.postgres import PostgresStore

    url, run_id, writer, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = PostgresStore(url, connect_timeout=30)
    print("ready", flush=True)
    sys.stdin.readline()
    for index in range(count):
        try:
            with store.transaction(run_id) as tx:
                tx.append(SpeakEvent(text=f"{writer}:{index}:0"))
                tx.append(SpeakEvent(text=f"{writer}:{index}:1"))
        except StoreError as exc:
            print("err", index, time.time(), str(exc).replace("\\n", " "), flush=True)
            time.sleep(0.05)
        else:
            print("ok", index, time.time(), flush=True)
        time.sleep(0.01)
    store.close()
    """
)


def _outcomes(process: subprocess.Popen[str]) -> list[tuple[str, int, float, str]]:
    assert process.stdout is not None and process.stderr is not None
    out = process.stdout.read()  # until it exits (its stdin is closed already, so no communicate())
    err = process.stderr.read()
    assert process.wait(timeout=120) == 0, err
    found = []
    for line in out.splitlines():
        kind, index, at, *rest = line.split(" ", 3)
        found.append((kind, int(index), float(at), " ".join(rest)))
    return found


@pytest.mark.slow
def test_the_server_restarted_under_load_loses_no_commit_and_tears_none(fresh_postgres: object) -> None:
    cluster = fresh_postgres
    url: str = cluster.url  # type: ignore[attr-defined]
    count = 150
    with PostgresStore(url, connect_timeout=30) as store:
        run_id = store.create_run("formula", "under load", {}).id
        heard: list[Commit] = []
        store.subscribe(heard.append, remote=True)
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", _RESILIENT_WRITER, url, run_id, f"w{i}", str(count)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        try:
            for writer in writers:
                assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
            for writer in writers:
                assert writer.stdin is not None
                writer.stdin.write("go\n")
                writer.stdin.close()
            _wait_for(lambda: store.last_seq(run_id) >= 40, timeout=60)
            restart_began = time.time()
            cluster.pg_ctl("restart", mode="immediate")  # type: ignore[attr-defined]
            restart_ended = time.time()
            outcomes = [_outcomes(writer) for writer in writers]
        finally:
            for writer in writers:
                if writer.poll() is None:
                    writer.kill()
                writer.wait(timeout=30)
                for pipe in (writer.stdout, writer.stderr):
                    if pipe is not None:
                        pipe.close()

        texts = [event.text for event in store.events(run_id) if isinstance(event, SpeakEvent)]
        assert [event.seq for event in store.events(run_id)] == list(range(1, len(texts) + 1))
        batches = [texts[i : i + 2] for i in range(0, len(texts), 2)]
        stored = set()
        for batch in batches:  # every transaction whole: its two events side by side, in order
            name, index, _ = batch[0].split(":")
            assert batch == [f"{name}:{index}:0", f"{name}:{index}:1"]
            assert (name, int(index)) not in stored
            stored.add((name, int(index)))
        for number, found in enumerate(outcomes):
            name = f"w{number}"
            assert [index for _, index, _, _ in found] == list(range(count))
            for kind, index, _, message in found:
                if kind == "ok":
                    assert (name, index) in stored, f"{name}:{index} was acknowledged but is not stored"
                else:
                    assert "failed on the store" in message
                    if "may or may not have been committed" not in message:
                        assert (name, index) not in stored, f"{name}:{index} failed yet is stored"
            assert any(kind == "ok" and at < restart_began for kind, _, at, _ in found)
            assert any(kind == "ok" and at > restart_ended for kind, _, at, _ in found), "no reconnect"

        # The store of this process reconnected too, and its listener hears other processes again.
        _wait_for(lambda: store._listener is not None and store._listener.listening, timeout=30)
        heard.clear()
        with PostgresStore(url) as other, other.transaction(run_id) as tx:
            tx.append(SpeakEvent(text="after the restart"))
        _wait_for(lambda: any(e.text == "after the restart" for c in heard for e in c.events))

        # Down for good: a call fails clearly once the connect timeout has passed, and works once it is back.
        with PostgresStore(url, connect_timeout=1) as short:
            cluster.pg_ctl("stop")  # type: ignore[attr-defined]
            with pytest.raises(StoreError, match=r"no connection within 1 s \(the server is down"):
                short.get_run(run_id)
            cluster.pg_ctl("start")  # type: ignore[attr-defined]
            # The pool retries its connections with a growing pause, which may outlast one 1 s wait.
            _wait_for(lambda: _answers(short, run_id), timeout=60)


def _answers(store: PostgresStore, run_id: str) -> bool:
    try:
        return store.get_run(run_id).id == run_id
    except StoreError:
        return False


_ROUND_TRIPS = textwrap.dedent(
    """
    import sys

    sys.path.insert(0, sys.argv[2])
    from workers import watch_round_trips  # bench/workers.py's count of the waits for the server

    sent = watch_round_trips()

    import threading

    import psycopg

    import plangate.runs.quotas  # the components whose hooks act on a run's end
    import plangate.runs.webhooks
    from plangate.events import SpeakEvent
    from plangate.store import open_store

    store = open_store(sys.argv[1])

    # Connections are set up all along in another thread, as the pool's workers may do at any moment (the
    # pool grows when its first connection is late): the transactions' own waits are what is counted.
    done = threading.Event()

    def setting_up() -> None:
        with psycopg.connect(sys.argv[1], autocommit=True) as conn:
            while not done.is_set():
                store._configure(conn)

    beside = threading.Thread(target=setting_up, daemon=True)  # a failed count ends the process at once
    beside.start()
    counts = []
    for _ in range(2):  # the second time: the pool's connections and their prepared statements are warm
        run_id = store.create_run("agent", "counted", {"task": "x" * 10_000}).id
        counts.clear()
        for status in ("running", "completed"):  # the second ends the run: the components' hooks act
            sent[0] = 0
            with store.transaction(run_id) as tx:
                tx.append(SpeakEvent(text=status))
                tx.set_status(status, outcome={"status": status} if status == "completed" else None)
            counts.append(sent[0])
    done.set()
    beside.join()
    store.close()
    print(*counts)
    """
)


def test_a_transaction_is_two_round_trips_even_when_it_ends_the_run(postgres_url: str) -> None:
    # the run's whole record, which the hooks of a run's end read, comes with the statement that locks its
    # row: no round trip of its own
    process = subprocess.run(
        [sys.executable, "-c", _ROUND_TRIPS, postgres_url, str(BENCH)],
        env={**os.environ, "PSYCOPG_IMPL": "python"},  # libpq's Python binding, which can be watched
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["2", "2"]


_COMMIT_ROUND_TRIPS = textwrap.dedent(
    """
    import sys

    sys.path.insert(0, sys.argv[2])
    from workers import watch_round_trips

    sent = watch_round_trips()

    import plangate.runs.quotas  # the components whose hooks act on a run's end
    import plangate.runs.webhooks
    from plangate.events import SpeakEvent
    from plangate.store import open_store

    store = open_store(sys.argv[1])


    def counted(write, fence):
        sent[0] = 0
        store.commit(run_id, write, fence=fence)
        return sent[0]


    def ends(tx):
        tx.set_status("completed", outcome={"status": "completed"})


    for _ in range(2):  # the second time: the pool's connections are warm
        run_id = store.create_run("formula", "counted", {}, lease=("worker-a", 30)).id
        lease = store.get_lease(run_id)
        counts = [
            counted(lambda tx: tx.set_status("running"), lease),
            counted(lambda tx: tx.append(SpeakEvent(text="step")), lease),
        ]
        with store.transaction(run_id) as tx:  # somebody else writes to the run
            tx.append(SpeakEvent(text="theirs"))
        counts.append(counted(lambda tx: tx.append(SpeakEvent(text="after theirs")), lease))
        counts.append(counted(lambda tx: tx.append(SpeakEvent(text="and on")), lease))
        counts.append(counted(ends, lease))
    store.close()
    print(*counts)
    """
)


def test_a_commit_after_the_stores_own_is_one_round_trip(postgres_url: str) -> None:
    # begun from what the store's last commit on the run left (a run created with its lease counts), checked
    # by a guard sent with the writes; after somebody else's write, the guard fails (one round trip, and one
    # to roll back) and the commit reads the row (two more); a run's end reads its record for the hooks
    process = subprocess.run(
        [sys.executable, "-c", _COMMIT_ROUND_TRIPS, postgres_url, str(BENCH)],
        env={**os.environ, "PSYCOPG_IMPL": "python"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["1", "1", "4", "1", "2"]
