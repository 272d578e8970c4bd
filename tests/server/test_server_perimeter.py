"""The data perimeter through the HTTP API, on real PostgreSQL: owners ask about what the operator offered.

A client's ``postgresql://`` URL is refused unless the operator turned client URLs on, and then only to an
allowed host; the server's own store is never a source (compared by identity, not URL), nor is any database
holding plangate's tables or a hard link to the store's file; a role that can do more than read is refused
with the SQL of one that cannot; declared sources are listed for every owner and asked about by name.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ask_helpers import CopilotScript, data_dir
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import bearer, make_token

from plangate.server._sources import DeclaredSource, host_refused, parse_declared
from plangate.store import Store
from plangate.store.postgres import PostgresStore

REVENUE_ANSWER = "East led with 1,328,137.93, then West with 899,479.59 and South with 495,110.24."


@pytest.fixture(scope="module")
def warehouse(postgres_server: Any) -> tuple[str, str]:
    """A database holding a small regions table: (the superuser's URL, a read-only role's URL)."""
    name = postgres_server.new_database("perimeter_srv")
    admin = postgres_server.database_url(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE regions (region_id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO regions VALUES (1, 'East'), (2, 'West')")
    return admin, postgres_server.reader_url(name)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_url) as store:
        yield store


@pytest.fixture
def app_on(make_app: Callable[..., FastAPI], tmp_path: Path) -> Callable[..., FastAPI]:
    folder = data_dir(tmp_path)

    def make(**options: Any) -> FastAPI:
        options.setdefault("model", CopilotScript().model)
        options.setdefault("data_dirs", [folder])
        return make_app(**options)

    return make


def _problem(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    detail: str = response.json()["detail"]
    return detail


def test_a_clients_postgresql_url_is_refused_unless_the_operator_allows_it(
    app_on: Callable[..., FastAPI], warehouse: tuple[str, str]
) -> None:
    _, reader = warehouse
    with TestClient(app_on(auth=False)) as client:
        detail = _problem(client.post("/v1/sources", json={"data": reader}), 403)
        assert "does not let clients register postgresql:// URLs" in detail
        assert "[[sources]] in plangate.toml" in detail and "--source NAME=URL" in detail
        assert [item["name"] for item in client.get("/v1/sources").json()["items"]] == ["shop"]
    with TestClient(app_on(auth=False, allow_client_urls=True, allowed_hosts=["db.internal"])) as client:
        detail = _problem(client.post("/v1/sources", json={"data": reader}), 403)
        assert "the host '127.0.0.1' is not one the operator allows" in detail
    with TestClient(app_on(auth=False, allow_client_urls=True, allowed_hosts=["127.0.0.0/8"])) as client:
        created = client.post("/v1/sources", json={"data": reader, "name": "regions"})
        assert created.status_code == 201, created.text
        assert created.json()["source"]["tables"] == 1


def test_a_superuser_url_is_refused_with_the_sql_of_a_read_only_role(
    app_on: Callable[..., FastAPI], warehouse: tuple[str, str]
) -> None:
    admin, _ = warehouse
    with TestClient(app_on(auth=False, allow_client_urls=True, allowed_hosts=["127.0.0.1"])) as client:
        detail = _problem(client.post("/v1/sources", json={"data": admin}), 403)
    assert "is a superuser" in detail and "CREATE ROLE plangate_reader LOGIN" in detail
    assert "GRANT SELECT ON ALL TABLES IN SCHEMA" in detail


def test_the_servers_own_postgres_store_is_never_a_source_however_it_is_named(
    make_app: Callable[..., FastAPI], pg_store: PostgresStore, postgres_server: Any, tmp_path: Path
) -> None:
    # The store's database reached as a read-only role, by another host name, with no schema option.
    database = pg_store.url.split("/")[-1].split("?")[0]
    reader = postgres_server.reader_url(database).replace("127.0.0.1", "localhost")
    app = make_app(
        store=pg_store,
        auth=False,
        model=CopilotScript().model,
        allow_client_urls=True,
        allowed_hosts=["localhost", "127.0.0.1"],
        data_dirs=[data_dir(tmp_path)],
    )
    with TestClient(app) as client:
        detail = _problem(client.post("/v1/sources", json={"data": reader}), 403)
    assert "is the server's own store" in detail  # by identity, checked before anything else
    assert "plangate_reader" not in detail


def test_any_database_holding_plangate_tables_is_refused(
    app_on: Callable[..., FastAPI], postgres_server: Any, postgres_url: str
) -> None:
    with PostgresStore(postgres_url):  # a store in a schema of the session's database, not this server's
        pass
    database = postgres_url.split("/")[-1].split("?")[0]
    reader = postgres_server.reader_url(database)
    with TestClient(app_on(auth=False, allow_client_urls=True, allowed_hosts=["127.0.0.1"])) as client:
        detail = _problem(client.post("/v1/sources", json={"data": reader}), 403)
    assert "holds a plangate store" in detail


def test_a_hard_link_to_the_servers_store_file_is_refused(
    ask_store_app: Callable[..., FastAPI], workdir: Path
) -> None:
    os.link(workdir / "server.db", workdir / "innocent.db")
    with TestClient(ask_store_app(auth=False, data_dirs=[workdir])) as client:
        detail = _problem(client.post("/v1/sources", json={"data": "innocent.db"}), 403)
    assert "the server's own store" in detail


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def ask_store_app(make_app: Callable[..., FastAPI], workdir: Path) -> Callable[..., FastAPI]:
    from plangate.store import SQLiteStore

    store = SQLiteStore(workdir / "server.db")

    def make(**options: Any) -> FastAPI:
        options.setdefault("model", CopilotScript().model)
        return make_app(store=store, **options)

    yield make  # type: ignore[misc]
    store.close()


def test_declared_sources_are_listed_for_every_owner_and_asked_about_by_name(
    app_on: Callable[..., FastAPI], store: Store, warehouse: tuple[str, str]
) -> None:
    _, reader = warehouse
    ops = CopilotScript(
        ops=(
            '{"op": "plan", "summary": "regions"}\n'
            '{"op": "add_step", "step": {"id": "n", "tool": {"name": "db_query", "args": {"source": '
            '"warehouse", "sql": "SELECT name FROM regions ORDER BY region_id"}}}}\n'
            '{"op": "add_step", "step": {"id": "answer", "needs": ["n"], "llm": {"prompt": '
            '"Rows: {{steps.n.output.rows}}"}}}\n'
            '{"op": "done", "explanation": "list", "run": true}\n'
        ),
        answer="The regions are East and West.",
    )
    declared = [DeclaredSource("warehouse", reader, schemas=("public",), description="the regions")]
    with TestClient(app_on(model=ops.model, sources=declared, pepper=b"")) as client:
        one = bearer(make_token(store, "ann"))
        two = bearer(make_token(store, "bob"))
        for headers in (one, two):
            items = client.get("/v1/sources", headers=headers).json()["items"]
            shown = next(item for item in items if item["name"] == "warehouse")
            assert shown["declared"] is True and shown["kind"] == "postgresql"
            assert shown["description"] == "the regions"
        question = {"question": "Which regions?", "source": "warehouse"}
        started = client.post("/v1/ask", json=question, headers=one)
        assert started.status_code == 202, started.text
        turn = _wait(client, started.json()["turn_id"], one)
        assert turn["status"] == "done", turn["reason"]
        assert [row[0] for row in turn["result"]["rows"]] == ["East", "West"]
        # A client may not register a source under an operator's name.
        taken = client.post("/v1/sources", json={"data": "chinook.sqlite", "name": "warehouse"}, headers=one)
        assert taken.status_code == 409


def test_a_declared_superuser_source_is_unusable_unless_allowed_and_then_warns(
    app_on: Callable[..., FastAPI], warehouse: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    admin, _ = warehouse
    with caplog.at_level(logging.INFO), TestClient(
        app_on(auth=False, sources=[DeclaredSource("wide", admin)])
    ) as client:
        _wait_log(caplog, "plangate.server", "'wide' cannot be asked about")
        started = client.post("/v1/ask", json={"question": "How many regions?", "source": "wide"})
        turn = _wait(client, started.json()["turn_id"], {})
        assert turn["status"] == "failed" and "is a superuser" in turn["reason"]
    caplog.clear()
    allowed = DeclaredSource("wide_ok", admin, allow_privileged=True)
    with caplog.at_level(logging.INFO), TestClient(app_on(auth=False, sources=[allowed])):
        _wait_log(caplog, "plangate.server", "'wide_ok': 1 tables")
        assert any(
            r.name == "plangate.data" and "allow_privileged" in r.getMessage() for r in caplog.records
        )


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("postgresql://r@db.internal/x", ["db.internal"], None),
        ("postgresql://r@DB.Internal:6000/x", ["db.internal:6000"], None),
        ("postgresql://r@db.internal:6000/x", ["db.internal:5432"], "db.internal"),
        ("postgresql://r@a.analytics.internal/x", ["*.analytics.internal"], None),
        ("postgresql://r@10.1.2.3/x", ["10.0.0.0/8"], None),
        ("postgresql://r@10.1.2.3/x", ["192.168.0.0/16"], "10.1.2.3"),
        ("postgresql://r@db.internal/x?hostaddr=10.9.9.9", ["db.internal"], "10.9.9.9"),
        ("postgresql://r@ok,evil/x", ["ok"], "evil"),
        ("postgresql:///x", ["db.internal"], "localhost"),
        ("postgresql://r@[::1]:5432/x", ["::1"], None),
    ],
)
def test_the_host_allow_list(url: str, allowed: list[str], refused: str | None) -> None:
    assert host_refused(url, allowed) == refused


def test_a_source_flag_is_name_equals_url() -> None:
    assert parse_declared("warehouse=postgresql://r@db/w") == DeclaredSource("warehouse", "postgresql://r@db/w")
    with pytest.raises(Exception, match=r"--source: expected NAME=URL .* got 'postgresql://r:\*\*\*@db/w'"):
        parse_declared("postgresql://r:secret@db/w")


def _wait(client: TestClient, turn_id: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        turn: dict[str, Any] = client.get(f"/v1/turns/{turn_id}", headers=headers).json()["turn"]
        if not turn["running"]:
            return turn
        time.sleep(0.05)
    pytest.fail(f"turn {turn_id} did not end within 30 s")


def _wait_log(caplog: pytest.LogCaptureFixture, logger: str, text: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if any(r.name == logger and text in r.getMessage() for r in caplog.records):
            return
        time.sleep(0.05)
    pytest.fail(f"no {logger} log line with {text!r}: {[r.getMessage() for r in caplog.records]}")
