"""A turn's scope: the data source a question is about, its schema, date ranges and semantic layer, and the
tools over it.

For: turning ``data`` (a file path, a ``sqlite:///`` or ``postgresql://`` URL, or the name of a registered
source) into an open, described source, and saying in words why one cannot be opened. A file is registered
under its stem (``shop``, ``chinook``) unless a name is given. Not for: querying for answers (the formula
run does that through the tools built here).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from plangate.errors import ConfigError, RunError
from plangate.tools import ToolRegistry
from plangate.tools.data import (
    DataSource,
    DataSourceError,
    DataSources,
    DateRange,
    QueryLimits,
    QueryTimeout,
    SchemaInfo,
    SemanticError,
    SemanticLayer,
    data_tools,
    date_ranges,
    load_semantic,
    shop_db_path,
)
from plangate.tools.data.postgres import URL_SCHEMES, mask_password
from plangate.tools.data.profile import CategoryColumn, category_columns
from plangate.tools.data.results import TableInfo

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class ScopeError(RunError):
    """The data a question is about cannot be opened or described; the message says why, for a person.

    Attributes:
        code: ``source_error`` (cannot open or read it) or ``source_timeout`` (describing it took too long).
    """

    def __init__(self, message: str, code: str = "source_error") -> None:
        self.code = code
        super().__init__(message)


@dataclass
class Scope:
    """What a turn may read.

    Attributes:
        sources: the registry the turn's tools read: the asked source alone.
        source: the source the question is about.
        schema: its tables, columns, keys and row counts.
        dates: the first and last date of each date column (empty when they could not be read).
        registry: ``db_schema``, ``db_query`` and ``db_aggregate`` over ``sources``.
        limits: the row, size and time limits of every query.
        categories: the source's category columns and their values (read when the turn's generation
            strategy asks for them: a grammar that allows filters on them alone, a review that checks a
            query filters on the values its question names).
        semantic: the source's semantic layer (named metrics, dimensions, relationships), or None; its
            relationships are in ``schema`` already.
    """

    sources: DataSources
    source: DataSource
    schema: SchemaInfo
    limits: QueryLimits
    dates: list[DateRange] = field(default_factory=list)
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    categories: list[CategoryColumn] = field(default_factory=list)
    semantic: SemanticLayer | None = None

    @property
    def name(self) -> str:
        """The asked source's name."""
        return self.source.name

    def table(self, name: str) -> TableInfo | None:
        """The table called ``name`` (any case), or None."""
        lowered = name.lower()
        return next((t for t in self.schema.tables if t.name.lower() == lowered), None)

    def ranges_of(self, table: str) -> list[DateRange]:
        """The date ranges of one table's columns."""
        lowered = table.lower()
        return [item for item in self.dates if item.table.lower() == lowered]


def source_label(data: str | os.PathLike[str] | None) -> str:
    """What ``data`` is, safe to show (a URL with its password masked)."""
    if data is None:
        return "the bundled shop data"
    text = os.fspath(data)
    return mask_password(text) if urlsplit(text).scheme in URL_SCHEMES else text


def _name_for(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme in URL_SCHEMES:
        stem = parts.path.strip("/") or parts.hostname or "postgres"
    else:
        stem = Path(text.removeprefix("sqlite://")).stem
    return _NAME.sub("_", stem).strip("_") or "data"


def _register(sources: DataSources, data: str | os.PathLike[str] | None, name: str | None) -> DataSource:
    if data is None:
        target: str | os.PathLike[str] = shop_db_path()
        name = name or "shop"
    else:
        target = data
    text = os.fspath(target)
    if name is None and isinstance(data, str) and data in sources:
        return sources.get(data)
    chosen = name or _name_for(text)
    if chosen in sources:
        existing = sources.get(chosen)
        if existing.describe() == source_label(text) or existing.describe() == str(Path(text).expanduser()):
            return existing
        raise ConfigError(
            f"a data source named {chosen!r} is registered already for {existing.describe()}; "
            "give this one another name"
        )
    if urlsplit(text).scheme not in (*URL_SCHEMES, "sqlite") and not Path(text).expanduser().exists():
        known = f" (registered sources: {', '.join(sources.names())})" if len(sources) else ""
        raise ConfigError(
            f"no data at {text!r}: expected a SQLite file, a postgresql:// URL or a source name{known}"
        )
    return sources.register(chosen, target)


def open_scope(
    data: str | os.PathLike[str] | None,
    *,
    sources: DataSources | None = None,
    name: str | None = None,
    limits: QueryLimits | None = None,
    categories: bool = False,
) -> Scope:
    """Open and describe the source ``data`` names.

    Args:
        data: a SQLite file, a ``sqlite:///`` / ``postgresql://`` URL, a name in ``sources``, or None for the
            bundled shop data.
        sources: sources registered already (the new one joins them).
        name: the name to register a file or URL under (default: its stem).
        limits: the limits of every query, the schema's included.
        categories: also read the category columns' values.

    Raises:
        ScopeError: it cannot be opened or described; the message is for a person.
    """
    bounds = limits or QueryLimits()
    registry = sources if sources is not None else DataSources()
    try:
        source = _register(registry, data, name)
        schema = source.schema(bounds)
    except QueryTimeout as exc:
        raise ScopeError(
            f"describing {source_label(data)} took too long ({exc}): the database is too large or too busy",
            "source_timeout",
        ) from None
    except DataSourceError as exc:
        raise ScopeError(f"cannot open {source_label(data)}: {exc}") from None
    except ConfigError as exc:
        raise ScopeError(str(exc)) from None
    if not any(table.kind == "table" or table.columns for table in schema.tables):
        raise ScopeError(f"{source_label(data)} holds no tables: there is nothing to ask about")
    try:
        declared = registry.semantic_of(source.name)
        semantic = load_semantic(declared[0], schema, declared[1]) if declared is not None else None
    except SemanticError as exc:
        raise ScopeError(f"the semantic layer of {source_label(data)} cannot be used: {exc}") from None
    if semantic is not None:
        schema = semantic.applied(schema)
    try:
        dates = date_ranges(source, schema.tables, bounds)
    except DataSourceError:
        dates = []  # without dates, only the no-rows-in-range review is lost
    # The turn's tools see the asked source alone: any other is outside its scope (and its schema unread).
    scoped = DataSources()
    scoped.add(source)
    layers = {source.name: semantic} if semantic is not None else None
    tools = ToolRegistry(data_tools(scoped, bounds, schemas={source.name: schema}, semantics=layers))
    found = category_columns(source, schema.tables, bounds) if categories else []
    return Scope(scoped, source, schema, bounds, dates, tools, found, semantic)


__all__ = ["Scope", "ScopeError", "open_scope", "source_label"]
