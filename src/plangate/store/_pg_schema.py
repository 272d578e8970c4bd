"""The PostgreSQL store's side of migrations: the connection they run on and its schema lock.

For: ``PostgresSchema`` (an advisory lock named after the schema, taken before the transaction begins, so
that of several processes opening a new schema at once exactly one migrates), ``open_schema``, which the
store runs when it opens, and ``migrate`` (one component, up to a version for tests). Not for: the tables
or the migrations themselves (``store/_schema.py``, run by ``store/_migrate.py`` on either backend).

The tables live in the connection's schema (the first of its ``search_path``). PostgreSQL's DDL is
transactional: a failed upgrade leaves the previous version whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from plangate.store._migrate import CORE, Component
from plangate.store._migrate import migrate as _migrate
from plangate.store._migrate import open_schema as _open_schema
from plangate.store._pg_sql import placeholders
from plangate.store.ddl import Dialect

# Who migrates a schema takes this lock (with the schema's name).
_LOCK_KEY = "plangate.schema."


class PostgresSchema:
    """A ``SchemaConnection`` on a psycopg connection in autocommit mode (of any row factory)."""

    dialect: Dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        """Run one statement."""
        self._conn.execute(placeholders(statement), params or None)

    def number(self, query: str, params: Sequence[object] = ()) -> int | None:
        """The integer in the first column of the first row, or None."""
        with self._conn.cursor(row_factory=tuple_row) as cursor:
            row = cursor.execute(placeholders(query), params or None).fetchone()
        return None if row is None else int(row[0])

    def has_table(self, name: str) -> bool:
        """Whether the connection's schema holds that table."""
        query = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
        return self.number(query, (name,)) == 1

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """A transaction, begun once this session holds the schema's advisory lock."""
        # The lock is taken before the transaction begins, not inside it: a transaction's catalog lookups may
        # not yet see tables that another process committed while this one waited for the lock.
        self._conn.execute("SELECT pg_advisory_lock(hashtext(%s || current_schema()))", (_LOCK_KEY,))
        try:
            with self._conn.transaction():
                yield
        finally:
            self._conn.execute("SELECT pg_advisory_unlock(hashtext(%s || current_schema()))", (_LOCK_KEY,))


def open_schema(conn: psycopg.Connection[Any], where: str) -> set[str]:
    """Bring the core and every registered component up to date; the components' names.

    Raises:
        SchemaVersionError: the database was written by a newer plangate.
        psycopg.Error: the database refused a statement (the caller explains it).
    """
    return _open_schema(PostgresSchema(conn), where)


def migrate(
    conn: psycopg.Connection[Any], where: str, *, upto: int | None = None, component: Component = CORE
) -> int:
    """Bring ``component`` (the core by default) up to version ``upto``; the version found before.

    ``conn`` is in autocommit mode; ``upto`` is for tests that build an older schema.

    Raises:
        SchemaVersionError: the database was written by a newer plangate.
        psycopg.Error: the database refused a statement (the caller explains it).
    """
    return _migrate(PostgresSchema(conn), component, where, upto=upto)


__all__ = ["PostgresSchema", "migrate", "open_schema"]
