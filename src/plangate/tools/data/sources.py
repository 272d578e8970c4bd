"""The registry of data sources (name → SQLite file or PostgreSQL URL, and the semantic layer a source
declares) and the bundled example database.

This module only maps names to backends; querying is the backends' job (``sqlite.py``, ``postgres.py``) and
turning results into observations is the toolkit's (``toolkit.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from plangate.bundled import example_path
from plangate.errors import ConfigError
from plangate.tools.data.postgres import URL_SCHEMES, PostgresSource
from plangate.tools.data.results import QueryLimits, QueryResult, SchemaInfo
from plangate.tools.data.semantic import read_semantic_file, semantic_path_for
from plangate.tools.data.sqlite import SqliteSource
from plangate.tools.registry import closest_name
from plangate.tools.sql_guard import Dialect

SHOP_DB_ENV = "PLANGATE_SHOP_DB"
"""Environment variable that points at another example database than the bundled one."""


class DataSource(Protocol):
    """What the data tools need from a backend."""

    @property
    def name(self) -> str:
        """The name the tools use for the source."""
        ...

    @property
    def dialect(self) -> Dialect:
        """The SQL dialect the guard parses queries in."""
        ...

    def describe(self) -> str:
        """Where the data lives, safe to show (no password)."""
        ...

    def query(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Check ``sql`` with the read-only guard, then run it within ``limits``."""
        ...

    def schema(self, limits: QueryLimits) -> SchemaInfo:
        """Tables, columns, keys and row counts."""
        ...


class DataSources:
    """Named data sources a run may query.

    Example::

        sources = DataSources()
        sources.register("sales", "data/sales.db")
        sources.register("warehouse", "postgresql://reader@db/warehouse")
        register_shop(sources)
    """

    def __init__(self) -> None:
        self._sources: dict[str, DataSource] = {}
        self._semantic: dict[str, tuple[Mapping[str, object], str]] = {}

    def register(
        self,
        name: str,
        target: str | os.PathLike[str],
        *,
        schemas: Sequence[str] | None = None,
        allow_privileged: bool = False,
        semantic: Mapping[str, object] | str | os.PathLike[str] | None = None,
    ) -> DataSource:
        """Register a SQLite file (a path or ``sqlite:///path``) or a ``postgresql://`` URL under ``name``.

        A PostgreSQL source is vetted when it is first opened: a role that can do more than read is refused
        unless ``allow_privileged`` (see :class:`~plangate.tools.data.postgres.PostgresSource`); ``schemas``
        are the schemas its questions read. ``semantic`` is its semantic layer: a table as a semantic file
        holds it, or the path of one; without it, a SQLite file's ``<stem>.semantic.toml`` beside it is its
        layer when there is one (read when a turn opens the source, in ``semantic_of``).

        Raises:
            ConfigError: the name is taken or empty, the SQLite file does not exist, or the URL is a
                PostgreSQL one and psycopg is not installed (the message names ``plangate[postgres]``).
        """
        if not name or not name.strip():
            raise ConfigError("a data source needs a non-empty name")
        if name in self._sources:
            raise ConfigError(f"a data source named {name!r} is already registered")
        source = _open(name, target, schemas, allow_privileged)
        self._sources[name] = source
        if semantic is not None:
            self.set_semantic(name, semantic)
        return source

    def set_semantic(self, name: str, semantic: Mapping[str, object] | str | os.PathLike[str]) -> None:
        """Give the source ``name`` a semantic layer: a semantic file's table, or the file's path.

        Raises:
            SemanticError: the file cannot be read or is not TOML.
        """
        if isinstance(semantic, Mapping):
            self._semantic[name] = (semantic, f"the semantic layer of {name!r}")
        else:
            path = Path(semantic).expanduser()
            self._semantic[name] = (read_semantic_file(path), str(path))

    def semantic_of(self, name: str) -> tuple[Mapping[str, object], str] | None:
        """The semantic layer of ``name`` as declared (its table and where it came from), or the
        ``<stem>.semantic.toml`` beside its SQLite file, or None.

        Raises:
            SemanticError: the file beside it cannot be read or is not TOML.
        """
        if name in self._semantic:
            return self._semantic[name]
        path = getattr(self._sources.get(name), "path", None)
        if isinstance(path, Path):
            beside = semantic_path_for(path)
            if beside.is_file():
                return read_semantic_file(beside), str(beside)
        return None

    def add(self, source: DataSource) -> DataSource:
        """Register a source built elsewhere (another backend, a test double).

        Raises:
            ConfigError: the name is taken.
        """
        if source.name in self._sources:
            raise ConfigError(f"a data source named {source.name!r} is already registered")
        self._sources[source.name] = source
        return source

    def get(self, name: str) -> DataSource:
        """The source called ``name``.

        Raises:
            ConfigError: no such source; the message lists the known ones or suggests the closest.
        """
        try:
            return self._sources[name]
        except KeyError:
            raise ConfigError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        """What to say when ``name`` is not a registered source."""
        suggestion = closest_name(name, self._sources)
        if suggestion:
            return f"unknown data source {name!r} (did you mean {suggestion!r}?)"
        known = ", ".join(self._sources) or "none registered"
        return f"unknown data source {name!r} (known: {known})"

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._sources)

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    def __len__(self) -> int:
        return len(self._sources)


def _open(
    name: str, target: str | os.PathLike[str], schemas: Sequence[str] | None, allow_privileged: bool
) -> DataSource:
    text = os.fspath(target)
    scheme = urlsplit(text).scheme
    if scheme in URL_SCHEMES:
        return PostgresSource(name, text, schemas=schemas, allow_privileged=allow_privileged)
    if scheme == "sqlite":
        return SqliteSource(name, text.removeprefix("sqlite://"))
    return SqliteSource(name, text)


def shop_db_path() -> Path:
    """The bundled example database, ``data/shop.db`` of the bundled examples (``plangate.bundled``: in the
    installed package, or ``examples/`` of a source checkout), or ``$PLANGATE_SHOP_DB``.

    Raises:
        ConfigError: the file is not there (a ``$PLANGATE_SHOP_DB`` that names no file, a broken install).
    """
    override = os.environ.get(SHOP_DB_ENV)
    path = Path(override) if override else example_path("data", "shop.db")
    if not path.is_file():
        where = f"${SHOP_DB_ENV}" if override else "the bundled examples"
        raise ConfigError(
            f"the example database is not at {str(path)!r} ({where}): set {SHOP_DB_ENV} to the path of a "
            "shop database (make one with make_shop_db.py, beside the bundled one), or reinstall plangate"
        )
    return path


def register_shop(sources: DataSources, name: str = "shop") -> DataSource:
    """Register the bundled example sales database under ``name`` (``shop``)."""
    return sources.register(name, shop_db_path())


__all__ = ["SHOP_DB_ENV", "DataSource", "DataSources", "register_shop", "shop_db_path"]
