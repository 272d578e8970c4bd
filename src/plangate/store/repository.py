"""What a repository outside the run core builds on: the store's database, reached through a narrow door.

For: the repositories of records that belong to no run's life (documents: ``store/documents.py``; bearer
tokens: ``server/tokens.py``; copilot conversations and turns: ``copilot/_conversations.py``). Each declares
its tables' migrations as a ``Component`` made of steps (``store/ddl.py``: tables and columns described once
for both backends), ``register``-ed so that every store opened later migrates it as it opens, and reaches
its tables through the ``Database`` its store offers (``database_of``: connections for reads and writes, the
store's clock and location) or through a run's transaction, to write with the run's other changes
(``connection_of``). Statements are the shared ``?`` form both backends accept (``Db``). Not for: the run
core's records, which only the ``Store`` protocol reads and writes.

A repository is cheap to make: its component is up to date once the store opened (or, for a store opened
before the component's module was imported, once the first repository of it is made; that one must not be
made inside a transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from plangate.errors import ConfigError
from plangate.store import _checks as checks
from plangate.store._migrate import Component, register
from plangate.store._rows import Row, RowMapper
from plangate.store._sql import Db
from plangate.store.ddl import Dialect


class Database(Protocol):
    """The store's database as a repository sees it."""

    @property
    def dialect(self) -> Dialect:
        """The SQL the database speaks."""
        ...

    @property
    def where(self) -> str:
        """The store's location as messages name it (never with a password)."""
        ...

    def now(self) -> float:
        """The store's clock (seconds since the epoch)."""
        ...

    def reading(self, what: str) -> AbstractContextManager[Db]:
        """A connection for reads; each statement sees what was committed when it ran."""
        ...

    def consistent(self, what: str) -> AbstractContextManager[Db]:
        """A connection whose reads all see the same moment (a record read from several tables)."""
        ...

    def writing(self, what: str) -> AbstractContextManager[Db]:
        """A connection inside a transaction, committed when the block ends, rolled back if it raises."""
        ...

    def compact(self, what: str, tables: Sequence[str]) -> None:
        """Give the space of deleted rows of ``tables`` back to the database (SQLite: ``VACUUM`` of the
        file; PostgreSQL: ``VACUUM`` of each table)."""
        ...

    def migrate(self, component: Component) -> None:
        """Bring ``component``'s tables up to date (once per store object).

        Raises:
            SchemaVersionError: a newer plangate wrote them.
        """
        ...


@runtime_checkable
class HasDatabase(Protocol):
    """A store that offers its database to repositories (both of plangate's backends)."""

    @property
    def database(self) -> Database:
        """The database behind the store."""
        ...


@runtime_checkable
class HasConnection(Protocol):
    """A run's transaction that lends its connection to repositories (plangate's backends' transactions)."""

    def connection(self, *, touch: bool = False) -> Db:
        """The transaction's connection; ``touch``: the write concerns the run (its ``updated_at`` moves)."""
        ...


def database_of(store: object, component: Component) -> Database:
    """The database of ``store``, with ``component``'s tables brought up to date.

    Raises:
        ConfigError: ``store`` offers no database (a test double, another implementation of ``Store``).
        SchemaVersionError: a newer plangate wrote the component's tables.
    """
    if not isinstance(store, HasDatabase):
        raise ConfigError(
            f"the {component.name} repository: expected a store opened by plangate (open_store), which "
            f"offers its database; found {type(store).__name__}"
        )
    database = store.database
    database.migrate(component)
    return database


def connection_of(tx: object, what: str, *, touch: bool = False) -> Db:
    """The connection of the run's transaction ``tx``, to write with the run's other changes.

    Raises:
        ConfigError: ``tx`` lends no connection.
    """
    if not isinstance(tx, HasConnection):
        raise ConfigError(
            f"{what}: expected a transaction of a store opened by plangate; found {type(tx).__name__}"
        )
    return tx.connection(touch=touch)


__all__ = [
    "Component",
    "Database",
    "Db",
    "HasConnection",
    "HasDatabase",
    "Row",
    "RowMapper",
    "checks",
    "connection_of",
    "database_of",
    "register",
]
