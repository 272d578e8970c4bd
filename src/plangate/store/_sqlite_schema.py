"""The SQLite store's side of migrations: the connection they run on and its schema lock.

For: ``SQLiteSchema`` (``BEGIN IMMEDIATE``: the file's write lock, so that of several processes opening a
new file at once only one migrates), ``open_schema``, which the store runs when it opens, and ``migrate``
(one component). Not for: the tables or the migrations themselves (``store/_schema.py``, run by
``store/_migrate.py`` on either backend).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence

from plangate.store._migrate import CORE, Component
from plangate.store._migrate import migrate as _migrate
from plangate.store._migrate import open_schema as _open_schema
from plangate.store.ddl import Dialect


class SQLiteSchema:
    """A ``SchemaConnection`` on a ``sqlite3`` connection in autocommit mode."""

    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        """Run one statement."""
        # one statement at a time, never executescript, which commits on its own and would break the
        # all-or-nothing upgrade
        self._conn.execute(statement, params)

    def number(self, query: str, params: Sequence[object] = ()) -> int | None:
        """The integer in the first column of the first row, or None."""
        row = self._conn.execute(query, params).fetchone()
        return None if row is None else int(row[0])

    def has_table(self, name: str) -> bool:
        """Whether the file holds that table."""
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self._conn.execute(query, (name,)).fetchone() is not None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """A transaction holding the file's write lock from its first statement."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise


def open_schema(conn: sqlite3.Connection, where: str) -> set[str]:
    """Bring the core and every registered component up to date; the components' names.

    Raises:
        SchemaVersionError: the file was written by a newer plangate.
    """
    return _open_schema(SQLiteSchema(conn), where)


def migrate(conn: sqlite3.Connection, where: str, component: Component = CORE) -> int:
    """Bring ``component`` (the core by default) up to date in one transaction; the version found before.

    Raises:
        SchemaVersionError: the file was written by a newer plangate.
    """
    return _migrate(SQLiteSchema(conn), component, where)


__all__ = ["SQLiteSchema", "migrate", "open_schema"]
