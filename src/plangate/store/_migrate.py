"""Bringing a schema up to date, the core's or a component's, the same way on either backend.

For: ``Component`` (a name and its append-only list of migrations: the position in the list, plus one, is
the version), ``CORE`` (the run core's, ``store/_schema.py``) and ``migrate``: the migrations a schema lacks,
applied in one transaction under the backend's schema lock, a schema written by a newer plangate refused
and left unchanged. A backend provides a ``SchemaConnection`` (its dialect, its schema lock:
``store/_sqlite_schema.py``, ``store/_pg_schema.py``). Not for: describing tables (``store/ddl.py``).

The core's version is the one row of ``schema_version``, where every release looks for it; each other
component's is its row of ``schema_versions`` (core migration 7). A store brings the core and every
component registered so far up to date when it opens (``open_schema``). A component opened on a store for
the first time finds no row: its first migration is then ``FromCore`` (the tables the core made for it
before it kept a list of its own), checked and recorded as its version 1, with nothing written or lost. A
component may hook into runs' transactions (``on_commit``: what it writes there commits with the run's
change), on the stores that have its tables.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from plangate.errors import ConfigError, SchemaVersionError, StoreError
from plangate.store._schema import MIGRATIONS
from plangate.store._sql import Db
from plangate.store.base import RunChange
from plangate.store.ddl import INTEGER, Dialect, FromCore, Migration, statements

CommitHook = Callable[[Db, RunChange], None]
"""Called inside a run's transaction, on its connection, just before it commits, when the transaction set a
terminal status (the run ends, or ended already) or opened an interaction: what a component writes there
commits with the run's change or not at all (an outbox row, a counter). It must be quick; what it raises
rolls the run's transaction back."""


@dataclass(frozen=True, slots=True)
class Component:
    """A part of the store with tables of its own and their migrations.

    Attributes:
        name: how ``schema_versions`` names it (``tokens``).
        migrations: append-only; ``migrations[n - 1]`` brings the component from version ``n - 1`` to ``n``.
    """

    name: str
    migrations: tuple[Migration, ...]
    on_commit: CommitHook | None = None

    @property
    def version(self) -> int:
        """The version this plangate writes."""
        return len(self.migrations)


CORE = Component("core", MIGRATIONS)
"""The run core: runs, events, snapshots, interactions, receipts, write intents, leases."""

_REGISTERED: dict[str, Component] = {}


def register(component: Component) -> Component:
    """Have every store opened from now on bring ``component`` up to date as it opens (after the core), so
    that a repository of it can be made anywhere, inside a run's transaction too; returns it.

    A store opened before the component's module was imported migrates it when the first repository of it
    is made (``store/repository.py``).

    Raises:
        ConfigError: another component has that name.
    """
    known = CORE if component.name == CORE.name else _REGISTERED.setdefault(component.name, component)
    if known is not component:
        raise ConfigError(f"register: a component named {component.name!r} exists already")
    return component


def open_schema(conn: SchemaConnection, where: str) -> set[str]:
    """Bring the core, then each registered component, up to date; the names of the components migrated.

    Raises:
        SchemaVersionError: the store was written by a newer plangate (nothing changed).
    """
    migrate(conn, CORE, where)
    components = list(_REGISTERED.values())
    for component in components:
        migrate(conn, component, where)
    return {component.name for component in components}


def commit_hooks(migrated: Collection[str]) -> tuple[CommitHook, ...]:
    """The ``on_commit`` hooks of the registered components among ``migrated`` (those a store brought up to
    date: a hook writes only to tables its store has)."""
    return tuple(
        component.on_commit
        for name, component in _REGISTERED.items()
        if component.on_commit is not None and name in migrated
    )


class SchemaConnection(Protocol):
    """A connection in autocommit mode that migrations run on, with its backend's schema lock."""

    @property
    def dialect(self) -> Dialect:
        """The SQL dialect it speaks."""
        ...

    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        """Run one statement (``?`` placeholders)."""
        ...

    def number(self, query: str, params: Sequence[object] = ()) -> int | None:
        """The integer in the first column of the first row ``query`` returns, or None without a row."""
        ...

    def has_table(self, name: str) -> bool:
        """Whether the store's schema holds a table of that name."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """A transaction holding the lock that lets one process at a time migrate the schema."""
        ...


def migrate(conn: SchemaConnection, component: Component, where: str, *, upto: int | None = None) -> int:
    """Bring ``component`` up to version ``upto`` (its latest by default); returns the version found before.

    Several processes may open a store at once: the one that takes the schema lock first migrates, the
    others find the work done. ``upto`` is for tests that build an older schema.

    Raises:
        SchemaVersionError: the store was written by a newer plangate (nothing changed).
        StoreError: a ``FromCore`` step found the core's tables missing.
    """
    target = component.version if upto is None else upto
    # A quick look without the lock, so that opening an up-to-date store never waits for a migration.
    found = _version(conn, component)
    _refuse_newer(found, component, where)
    if found >= target:
        return found
    with conn.locked():
        found = _version(conn, component)
        _refuse_newer(found, component, where)
        for migration in component.migrations[found:target]:
            _apply(conn, migration, where)
        if target > found:
            _record(conn, component, found, target)
    return found


def _version(conn: SchemaConnection, component: Component) -> int:
    if component is not CORE:
        found = conn.number("SELECT version FROM schema_versions WHERE component = ?", (component.name,))
    elif conn.has_table("schema_version"):
        found = conn.number("SELECT version FROM schema_version")
    else:
        found = None
    return 0 if found is None else found


def _apply(conn: SchemaConnection, migration: Migration, where: str) -> None:
    for step in migration:
        if isinstance(step, FromCore):
            missing = [table for table in step.tables if not conn.has_table(table)]
            if missing:
                raise StoreError(
                    f"the store at {where} lacks the table(s) {', '.join(missing)} that its core schema "
                    f"holds from version {step.version} on: it was changed outside plangate"
                )
            continue
        for statement in statements((step,), conn.dialect):
            conn.execute(statement)


def _record(conn: SchemaConnection, component: Component, found: int, version: int) -> None:
    if component is not CORE:
        conn.execute(
            "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (component.name, version),
        )
        return
    if found == 0:
        # the first releases' statement, kept to the letter (the frozen schemas hold its text)
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS schema_version (version {INTEGER.spelled(conn.dialect)} NOT NULL)"
        )
    conn.execute("DELETE FROM schema_version")
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))


def _refuse_newer(found: int, component: Component, where: str) -> None:
    if found <= component.version:
        return
    what = (
        f"schema version {found}" if component is CORE else f"version {found} of its {component.name} tables"
    )
    raise SchemaVersionError(
        f"the store at {where} has {what}, written by a newer plangate; this one reads up to "
        f"version {component.version}: upgrade plangate (the store was left unchanged)"
    )


__all__ = [
    "CORE",
    "CommitHook",
    "Component",
    "SchemaConnection",
    "commit_hooks",
    "migrate",
    "open_schema",
    "register",
]
