"""Real PostgreSQL and Redis servers for the tests: started once per session, on demand, stopped at its end.

For: the fixtures ``postgres_server`` (the session's cluster), ``postgres_url`` (an empty store of it per
test: a schema of its own, whose rows the previous test left are deleted), ``postgres_schemas`` (fresh schemas
for wider scopes), ``fresh_postgres`` (a cluster of a test's
own, for tests that restart the server), ``redis_url``, and ``store_url``: a test that takes it runs once
on a SQLite file and once on PostgreSQL (the engines' smoke sets). Servers come from ``scripts/services.py``:
throwaway instances in a temporary folder on free loopback ports. Nothing is mocked.

Environment:
    PLANGATE_TEST_POSTGRES: unset: start a cluster (a test that needs one FAILS when it cannot start);
        ``off``: skip the tests that need PostgreSQL (a developer's choice, never CI's); a URL: use that
        server instead (each test gets a schema of its own there, dropped at the end).
    PLANGATE_TEST_REDIS: the same for Redis (``off``, or a ``redis://`` URL).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

OFF = "off"


def _load_services() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "scripts" / "services.py"
    spec = importlib.util.spec_from_file_location("plangate_test_services", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


services = _load_services()


class PostgresServer:
    """The session's PostgreSQL server: its base URL, fresh schemas made on it, and schemas lent to tests.

    A lent schema goes back to the server after its test, and the next test that borrows it finds its
    tables empty: deleting a few rows costs a millisecond, where creating and migrating a schema costs a
    hundred. Only on a cluster of the session's own (its user may switch foreign keys off while deleting).
    """

    def __init__(self, url: str, cluster: object | None) -> None:
        import psycopg

        self.url = url
        self.cluster = cluster  # a services.Postgres when the session started it, else None
        self._admin = psycopg.connect(url, autocommit=True)
        self._made: list[str] = []
        self._databases: list[str] = []
        self._spare: list[str] = []
        self._counter = itertools.count(1)

    def new_schema(self, prefix: str = "t") -> str:
        """An empty schema's name."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        self._admin.execute(f'CREATE SCHEMA "{name}"')
        self._made.append(name)
        return name

    def schema_url(self, schema: str, **options: str) -> str:
        """The URL whose connections work in ``schema`` (and carry the given libpq ``options``)."""
        params = [f"options={quote(f'-csearch_path={schema}')}"]
        params += [f"{key}={quote(value)}" for key, value in options.items()]
        separator = "&" if urlsplit(self.url).query else "?"
        return f"{self.url}{separator}{'&'.join(params)}"

    def new_url(self, **options: str) -> str:
        """The URL of a fresh, empty schema."""
        return self.schema_url(self.new_schema(), **options)

    def new_database(self, prefix: str = "db") -> str:
        """An empty database's name (dropped when the session ends)."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        self._admin.execute(f'CREATE DATABASE "{name}"')
        self._databases.append(name)
        return name

    def reader_url(self, database: str, schemas: tuple[str, ...] = ("public",)) -> str:
        """The URL of ``database`` as a role that may only read ``schemas`` (made once per database): what
        an operator should give a data source."""
        import psycopg

        role = f"reader_{database}"[:63]
        with psycopg.connect(self.database_url(database), autocommit=True) as admin:
            exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if exists is None:
                admin.execute(f'CREATE ROLE "{role}" LOGIN')
            admin.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
            for schema in schemas:
                admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
                admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        return urlunsplit(urlsplit(self.database_url(database))._replace(netloc=self._netloc(role)))

    def database_url(self, database: str) -> str:
        """The URL of another database of this server, as the session's user."""
        return urlunsplit(urlsplit(self.url)._replace(path=f"/{database}", query=""))

    def _netloc(self, user: str) -> str:
        parts = urlsplit(self.url)
        return f"{user}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    def lend(self) -> str:
        """The name of a schema for one test: a spare one emptied, else a fresh one."""
        while self._spare:
            name = self._spare.pop()
            if self._emptied(name):
                return name
        return self.new_schema()

    def give_back(self, name: str) -> None:
        """Take back a lent schema; it is emptied when lent again."""
        if self.cluster is not None:
            self._spare.append(name)

    def _emptied(self, name: str) -> bool:
        """Delete every row of the schema's tables; False when the schema cannot be reused as it is."""
        import psycopg

        from plangate.store import SCHEMA_VERSION

        try:
            tables = [
                str(row[0])
                for row in self._admin.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (name,)
                ).fetchall()
            ]
            if not set(tables) <= _store_tables():
                return False  # a test made tables of its own there: the next one gets a fresh schema
            if "schema_version" in tables:
                found = self._admin.execute(f'SELECT version FROM "{name}".schema_version').fetchall()
                if found != [(SCHEMA_VERSION,)]:
                    return False  # left at another version by its test: not an empty store of this one
            with self._admin.transaction():
                self._admin.execute("SET LOCAL session_replication_role = replica")  # no FK order needed
                self._admin.execute("SET LOCAL lock_timeout = '2s'")
                for table in tables:
                    if table != "schema_version":
                        self._admin.execute(f'DELETE FROM "{name}"."{table}"')
        except psycopg.Error:
            return False  # still locked by something the test left behind: use a fresh schema instead
        return True

    def close(self) -> None:
        for name in self._databases:
            self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if self.cluster is None:
            # Someone else's server: leave it as it was found.
            for name in self._made:
                self._admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        self._admin.close()


def _store_tables() -> set[str]:
    """The tables a store of this version has (the core's and its repositories', and the version tables)."""
    from plangate.store import _schema
    from plangate.store.ddl import Table

    return {value.name for value in vars(_schema).values() if isinstance(value, Table)} | {"schema_version"}


def _setting(name: str) -> str:
    return os.environ.get(name, "").strip()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (started on first use, stopped at the end of the session)."""
    setting = _setting("PLANGATE_TEST_POSTGRES")
    if setting == OFF:
        pytest.skip("PostgreSQL tests turned off by PLANGATE_TEST_POSTGRES=off")
    cluster = None
    if setting:
        url = setting
    else:
        try:
            cluster = services.Postgres.start(services.new_folder("plangate-test-pg-"))
        except services.ServiceError as exc:
            pytest.fail(f"could not start PostgreSQL for the tests: {exc}", pytrace=False)
        url = cluster.url
    server = PostgresServer(url, cluster)
    try:
        yield server
    finally:
        server.close()
        if cluster is not None:
            cluster.stop()


@pytest.fixture(scope="session")
def postgres_schemas(postgres_server: PostgresServer) -> Callable[[], str]:
    """Make the URL of a fresh, empty schema (for fixtures of module or session scope)."""
    return postgres_server.new_url


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of an empty store for this test alone (a schema of the session's server; its tables, if a
    previous test made them, are at the current version and empty)."""
    name = postgres_server.lend()
    yield postgres_server.schema_url(name)
    postgres_server.give_back(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a new, empty store: a SQLite file, then a PostgreSQL schema (the test runs on each)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'plangate.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def fresh_postgres() -> Iterator[object]:
    """A cluster of this test's own (a ``services.Postgres``), for tests that stop or restart the server."""
    if _setting("PLANGATE_TEST_POSTGRES") == OFF:
        pytest.skip("PostgreSQL tests turned off by PLANGATE_TEST_POSTGRES=off")
    try:
        cluster = services.Postgres.start(services.new_folder("plangate-test-pg-"))
    except services.ServiceError as exc:
        pytest.fail(f"could not start PostgreSQL for the test: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of the session's Redis server (started on first use, stopped at the end)."""
    setting = _setting("PLANGATE_TEST_REDIS")
    if setting == OFF:
        pytest.skip("Redis tests turned off by PLANGATE_TEST_REDIS=off")
    if setting:
        yield setting
        return
    try:
        server = services.Redis.start(services.new_folder("plangate-test-redis-"))
    except services.ServiceError as exc:
        pytest.fail(f"could not start Redis for the tests: {exc}", pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()
