"""DataSources: registering SQLite files and PostgreSQL URLs, lookups, and the bundled example database."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plangate.errors import ConfigError
from plangate.tools.data import DataSources, register_shop, shop_db_path
from plangate.tools.data.postgres import mask_password
from plangate.tools.data.sources import SHOP_DB_ENV
from plangate.tools.data.sqlite import SqliteSource


def test_sqlite_paths_and_urls_register(shop_db: Path) -> None:
    sources = DataSources()
    first = sources.register("a", shop_db)
    second = sources.register("b", f"sqlite://{shop_db}")
    third = sources.register("c", str(shop_db))
    assert isinstance(first, SqliteSource) and isinstance(second, SqliteSource)
    assert first.path == second.path == Path(third.describe())
    assert (first.dialect, first.name) == ("sqlite", "a")
    assert sources.names() == ["a", "b", "c"]
    assert "b" in sources and "z" not in sources
    assert len(sources) == 3
    assert sources.get("c") is third


def test_registration_mistakes_are_config_errors(tmp_path: Path, shop_db: Path) -> None:
    sources = DataSources()
    missing = tmp_path / "missing.db"
    with pytest.raises(
        ConfigError, match=f"data source 'x': expected an existing SQLite file, got '{missing}'"
    ):
        sources.register("x", missing)
    sources.register("shop", shop_db)
    with pytest.raises(ConfigError, match="a data source named 'shop' is already registered"):
        sources.register("shop", shop_db)
    with pytest.raises(ConfigError, match="a data source needs a non-empty name"):
        sources.register(" ", shop_db)
    with pytest.raises(ConfigError, match=r"unknown data source 'shoq' \(did you mean 'shop'\?\)"):
        sources.get("shoq")


def test_postgres_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes the import fail, installed or not
    with pytest.raises(
        ConfigError, match=r'^PostgreSQL data sources need psycopg: pip install "plangate\[postgres\]"$'
    ):
        DataSources().register("warehouse", "postgresql://reader:secret@db.internal:5432/warehouse")


def test_passwords_are_masked() -> None:
    assert mask_password("postgresql://reader:s3cret@db:5432/w") == "postgresql://reader:***@db:5432/w"
    assert mask_password("postgresql://db/w") == "postgresql://db/w"


def test_a_file_that_is_not_a_database_fails_when_read(tmp_path: Path) -> None:
    from plangate.tools.data import DataSourceError, QueryLimits

    bogus = tmp_path / "notes.db"
    bogus.write_text("not a database", encoding="utf-8")
    source = DataSources().register("notes", bogus)
    with pytest.raises(DataSourceError, match=r"data source 'notes'.*file is not a database"):
        source.schema(QueryLimits())


def test_the_example_database_registers_as_shop(shop_db: Path) -> None:
    sources = DataSources()
    source = register_shop(sources)
    assert sources.names() == ["shop"]
    assert source.describe() == str(shop_db)
    assert shop_db_path() == shop_db


def test_the_example_database_location_can_be_overridden(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SHOP_DB_ENV, str(tmp_path / "elsewhere.db"))
    with pytest.raises(ConfigError, match=r"the example database is not at .*elsewhere\.db"):
        shop_db_path()


def test_a_plangate_store_is_no_data_source(tmp_path: Path, shop_db: Path) -> None:
    # Before, a SQLite store named as data was read like any file: its tokens' hashes, answers and outputs.
    from plangate.server.tokens import Tokens, hash_token
    from plangate.store import SQLiteStore
    from plangate.tools.data.results import QueryLimits, SourceForbidden

    store = SQLiteStore(tmp_path / "runs.db")
    Tokens(store).create("ana", hash_token("pg_secret"))
    store.close()
    source = SqliteSource("runs", tmp_path / "runs.db")
    limits = QueryLimits()
    with pytest.raises(SourceForbidden, match="the file holds a plangate store") as refused:
        source.query("SELECT owner, token_hash FROM tokens", limits)
    assert refused.value.kind == "store"
    with pytest.raises(SourceForbidden, match="the file holds a plangate store"):
        source.schema(limits)
    assert SqliteSource("shop", shop_db).query("SELECT count(*) FROM orders", limits).rows[0][0] > 0
