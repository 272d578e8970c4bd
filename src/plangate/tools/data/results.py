"""Plain values the data sources and data tools exchange: limits, query results, schema descriptions, errors.

No I/O here; the backends (``sqlite.py``, ``postgres.py``) produce these values, ``toolkit.py`` renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from plangate.errors import ConfigError, RunError, UserError

_MIN_VALUE_BYTES = 65_536

Cell = int | float | str | bytes | bool | None
"""One value of a result row as a database driver returns it (dates arrive as text or are converted)."""


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """Bounds on one query; each one reached is reported in the observation.

    Attributes:
        max_rows: rows returned at most (one more is fetched to know whether there were more).
        max_bytes: size of the rendered result text at most, in bytes (UTF-8).
        timeout_s: seconds a query may run before it is stopped.
    """

    max_rows: int = 1_000
    max_bytes: int = 1_000_000
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for label, value in (("max_rows", self.max_rows), ("max_bytes", self.max_bytes),
                             ("timeout_s", self.timeout_s)):
            if not value > 0:
                raise ConfigError(f"query limits: expected a positive {label}, got {value!r}")

    @property
    def max_value_bytes(self) -> int:
        """The largest single value a database may build, in bytes: ``max_bytes``, but at least 64 KiB (a
        value is capped inside the engine, long before the text it renders to is)."""
        return max(self.max_bytes, _MIN_VALUE_BYTES)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The rows of one query, up to ``max_rows``.

    Attributes:
        columns: the column names, in order.
        rows: the rows, each a tuple of cells in column order.
        more_rows: true when the query had more rows than ``max_rows``.
        clipped_values: values over the byte limit that the database gave as NULL (``printf`` does).
    """

    columns: list[str]
    rows: list[tuple[Cell, ...]]
    more_rows: bool = False
    clipped_values: int = 0


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column of a table or view."""

    name: str
    type: str
    nullable: bool = True
    primary_key: bool = False


@dataclass(frozen=True, slots=True)
class ForeignKey:
    """A column that refers to another table's column."""

    column: str
    references_table: str
    references_column: str


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table or view: its columns, foreign keys and row count (``None`` for views or when not counted)."""

    name: str
    kind: Literal["table", "view"]
    columns: list[ColumnInfo]
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    row_count: int | None = None


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """Everything :func:`db_schema` reports about a source."""

    source: str
    dialect: str
    tables: list[TableInfo]


class DataSourceError(RunError):
    """A data source could not answer: the database rejected the query or could not be read."""


class QueryTimeout(DataSourceError):
    """A query ran past its time limit and was stopped.

    Attributes:
        seconds: the limit that was reached.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"query stopped after {seconds:g} s (limit: time)")


class SourceForbidden(DataSourceError):
    """A source may not be queried at all: it is the server's own store, holds plangate's tables, or its role
    has more rights than reading (a superuser, ``REPLICATION``, ``BYPASSRLS``, or it can write).

    Attributes:
        kind: ``store`` (plangate's own data) or ``privileged`` (the role can do more than read).
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class QueryRefused(UserError):
    """The read-only guard refused a query before it reached the database.

    Attributes:
        reason: the guard's reason.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"query refused: {reason}")


__all__ = [
    "Cell",
    "ColumnInfo",
    "DataSourceError",
    "ForeignKey",
    "QueryLimits",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "SchemaInfo",
    "SourceForbidden",
    "TableInfo",
]
