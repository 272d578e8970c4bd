"""The store backends the conformance suite runs against, and a clock tests can move by hand.

A backend joins by adding an entry to ``BACKENDS`` (and to ``SHARED`` when two handles opened on it see the
same data). Each entry makes a ``Backend`` from a ``Place``: the test's temporary folder, and a way to get a
fresh PostgreSQL schema (asked for only by the PostgreSQL entry, so that SQLite runs start no server).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from plangate.store import Store, open_store


class FakeClock:
    """A clock that moves only when told to, so that lease expiry needs no sleeping."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Backend:
    """How to open a store of one kind, and to tamper with it the way a newer plangate would."""

    name: str
    url: str
    set_schema_version: Callable[[int], None] | None = None

    def open(self, clock: Callable[[], float] | None = None) -> Store:
        """A new handle on this backend's store (for ``:memory:``, a new, empty store)."""
        return open_store(self.url, clock=clock)


@dataclass
class Place:
    """Where a test's store may live: a temporary folder, or a fresh PostgreSQL schema (made on demand)."""

    tmp_path: Path
    postgres_url: Callable[[], str]


def _sqlite_file(place: Place) -> Backend:
    path = place.tmp_path / "store" / "plangate.db"

    def set_version(version: int) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE schema_version SET version = ?", (version,))
        conn.close()

    return Backend("sqlite-file", f"sqlite:///{path}", set_version)


def _sqlite_memory(place: Place) -> Backend:
    return Backend("sqlite-memory", ":memory:")


def _postgres(place: Place) -> Backend:
    url = place.postgres_url()

    def set_version(version: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (version,))

    return Backend("postgres", url, set_version)


BACKENDS: dict[str, Callable[[Place], Backend]] = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
    "postgres": _postgres,
}
SHARED = ["sqlite-file", "postgres"]
"""Backends where two handles see the same data (needed for reopening, processes, schema tampering)."""
