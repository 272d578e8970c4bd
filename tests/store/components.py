"""The tables of store components that other modules of a test process registered (schedules, limits, …):
what a comparison of a store's schema with the core's frozen one leaves aside, since whether they exist
depends on what else the process imported."""

from __future__ import annotations

import re

from plangate.store._migrate import _REGISTERED
from plangate.store.ddl import Create

KNOWN = frozenset({"conversations", "documents", "tokens"})
"""The components whose tables the core's migrations made (its frozen schemas hold them)."""

_INDEX_ON = re.compile(r" ON (?:ONLY )?([A-Za-z_][A-Za-z0-9_]*)")


def other_tables() -> set[str]:
    """The tables the registered components beyond ``KNOWN`` create."""
    return {
        step.table.name
        for name, component in _REGISTERED.items()
        if name not in KNOWN
        for migration in component.migrations
        for step in migration
        if isinstance(step, Create)
    }


def without_other_tables(dump: str) -> str:
    """A PostgreSQL dump (``pg_schema.dump``) without the tables, constraints and indexes of
    ``other_tables``."""
    others = other_tables()
    kept: list[str] = []
    skipping = False
    for line in dump.splitlines():
        if line.startswith("-- table "):
            skipping = line.removeprefix("-- table ") in others
        elif line.startswith("-- constraint "):
            skipping = line.removeprefix("-- constraint ").split(".", 1)[0] in others
        elif line.startswith("-- index "):
            found = _INDEX_ON.search(line)
            skipping = found is not None and found.group(1) in others
        if not skipping:
            kept.append(line)
    return "\n".join(kept) + "\n"
