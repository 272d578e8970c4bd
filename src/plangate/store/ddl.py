"""Tables described once, as data, and rendered to the DDL of each backend (SQLite and PostgreSQL).

For: ``Table``, ``Column`` and ``Index`` (a table's columns, types, keys, checks and indexes, written once
for both backends), the steps a migration is made of (``Create``, ``AddColumn``, ``AddIndex``, ``Fill``,
``FromCore``) and
``statements``, which renders a migration in one dialect: the vocabulary of the core's migrations
(``store/_schema.py``) and of every repository's (``store/repository.py``). Not for: running migrations
(``store/_migrate.py``) or queries, which stay hand-written in the ``?`` form both backends accept
(``store/_sql.py``).

A type names its spelling in each dialect (``JSON`` is ``TEXT`` in SQLite, ``json`` in PostgreSQL, which
checks the text and keeps it as written). The layout is the one the first releases wrote by hand, to the
character: SQLite keeps the text of each ``CREATE TABLE`` as it was given (and splices ``ALTER TABLE … ADD
COLUMN`` into it), and the frozen schemas of ``tests/store/fixtures`` pin that text for every version.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgresql"]
"""The SQL dialects a store speaks."""

# The layout of the statements the first migrations were written with: columns indented by 12, the closing
# parenthesis by 8, a list of allowed values wrapped to stay within 110 columns.
_COLUMN_INDENT = 12
_CLOSE_INDENT = 8
_WIDTH = 110


@dataclass(frozen=True, slots=True)
class Type:
    """A column type, spelled for each dialect.

    Attributes:
        sqlite: its SQLite spelling.
        postgresql: its PostgreSQL spelling.
        key: the type is a table's primary key by itself (a position that orders the rows).
    """

    sqlite: str
    postgresql: str
    key: bool = False

    def spelled(self, dialect: Dialect) -> str:
        """The type as ``dialect`` writes it."""
        return self.sqlite if dialect == "sqlite" else self.postgresql


POSITION = Type(
    "INTEGER PRIMARY KEY AUTOINCREMENT", "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", key=True
)
"""The order rows were inserted in, never handed out twice (a cursor never meets a reused value)."""
TEXT = Type("TEXT", "text")
INTEGER = Type("INTEGER", "integer")
BIGINT = Type("INTEGER", "bigint")
"""An integer that may pass 2**31 (a sequence number, a generation)."""
REAL = Type("REAL", "double precision")
"""A float: every timestamp (seconds since the epoch)."""
BOOLEAN = Type("INTEGER", "boolean")
JSON = Type("TEXT", "json")
"""JSON text, kept as written (key order included)."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table.

    Attributes:
        name: the column's name (also the field of the record it is read into).
        type: its type.
        nullable: it may hold NULL (else ``NOT NULL``, implied by a primary key).
        primary_key: the column alone is the table's key.
        unique: no two rows hold the same value.
        default: the value of a row that names none (for a column added to a table with rows).
        references: ``(table, column)`` the value must be found in.
        choices: the only values allowed.
        at_least: the smallest value allowed.
    """

    name: str
    type: Type
    nullable: bool = False
    primary_key: bool = False
    unique: bool = False
    default: int | None = None
    references: tuple[str, str] | None = None
    choices: tuple[str, ...] = ()
    at_least: int | None = None

    def render(self, dialect: Dialect, start: int) -> str:
        """The column's definition, for a line that begins at column ``start``."""
        parts = [self.name, self.type.spelled(dialect)]
        if not (self.nullable or self.primary_key or self.type.key):
            parts.append("NOT NULL")
        if self.primary_key:
            parts.append("PRIMARY KEY")
        if self.unique:
            parts.append("UNIQUE")
        if self.default is not None:
            parts.append(f"DEFAULT {self.default}")
        if self.references is not None:
            parts.append(f"REFERENCES {self.references[0]} ({self.references[1]})")
        if self.at_least is not None:
            parts.append(f"CHECK ({self.name} >= {self.at_least})")
        head = " ".join(parts)
        if not self.choices:
            return head
        return _choices(f"{head} CHECK ({self.name} IN (", self.choices, "))", start)


@dataclass(frozen=True, slots=True)
class Index:
    """An index on some columns of a table, in order."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    """A table as it is created: its columns, its key of several columns if any, and its indexes.

    Attributes:
        primary_key: the columns of a key made of several (SQLite then keeps the rows in key order,
            ``WITHOUT ROWID``); empty when one column is the key.
    """

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()


@dataclass(frozen=True, slots=True)
class Create:
    """A migration step: create ``table`` and its indexes."""

    table: Table


@dataclass(frozen=True, slots=True)
class AddColumn:
    """A migration step: add ``column`` to the existing table ``table`` (rows already there get its
    default, or NULL)."""

    table: str
    column: Column


@dataclass(frozen=True, slots=True)
class AddIndex:
    """A migration step: add ``index`` to the existing table ``table``."""

    table: str
    index: Index


@dataclass(frozen=True, slots=True)
class Fill:
    """A migration step: one statement that fills what a column added holds for the rows already there,
    when that is not one constant (it reads another column), spelled for each dialect (their JSON
    functions differ)."""

    sqlite: str
    postgresql: str

    def spelled(self, dialect: Dialect) -> str:
        """The statement as ``dialect`` writes it."""
        return self.sqlite if dialect == "sqlite" else self.postgresql


@dataclass(frozen=True, slots=True)
class FromCore:
    """The first version of a component whose tables the core's migrations made before the component kept
    a list of its own: a store at core schema ``version`` or later holds ``tables`` already, so the step
    writes nothing and only checks they are there."""

    version: int
    tables: tuple[str, ...]


Step = Create | AddColumn | AddIndex | Fill | FromCore
Migration = tuple[Step, ...]
"""The steps that bring a schema from one version to the next, applied in one transaction."""


def statements(migration: Migration, dialect: Dialect) -> list[str]:
    """The statements of ``migration`` in ``dialect``, in order (``FromCore`` has none)."""
    return [statement for step in migration for statement in _step(step, dialect)]


def _step(step: Step, dialect: Dialect) -> Iterator[str]:
    if isinstance(step, Create):
        yield _create(step.table, dialect)
        for index in step.table.indexes:
            yield _index(step.table.name, index)
    elif isinstance(step, AddColumn):
        head = f"ALTER TABLE {step.table} ADD COLUMN "
        yield head + step.column.render(dialect, len(head))
    elif isinstance(step, AddIndex):
        yield _index(step.table, step.index)
    elif isinstance(step, Fill):
        yield step.spelled(dialect)
    # FromCore: nothing to write


def _index(table: str, index: Index) -> str:
    return f"CREATE INDEX {index.name} ON {table} ({', '.join(index.columns)})"


def _create(table: Table, dialect: Dialect) -> str:
    lines = [column.render(dialect, _COLUMN_INDENT) for column in table.columns]
    if table.primary_key:
        lines.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    body = ",\n".join(" " * _COLUMN_INDENT + line for line in lines)
    clustered = " WITHOUT ROWID" if table.primary_key and dialect == "sqlite" else ""
    return f"CREATE TABLE {table.name} (\n{body}\n{' ' * _CLOSE_INDENT}){clustered}"


def _choices(head: str, choices: tuple[str, ...], tail: str, start: int) -> str:
    """``head``, the quoted ``choices`` and ``tail``, wrapped so that no line of choices passes ``_WIDTH``,
    each wrapped line aligned under the first choice (``head`` begins at column ``start``)."""
    margin = start + len(head)
    lines: list[list[str]] = [[]]
    for n, choice in enumerate(choices):
        item = f"'{choice}'" + ("," if n < len(choices) - 1 else tail)
        if lines[-1] and margin + len(" ".join([*lines[-1], item])) > _WIDTH:
            lines.append([])
        lines[-1].append(item)
    return head + f"\n{' ' * margin}".join(" ".join(line) for line in lines)
