"""The store backends the conformance suite runs against, and a clock tests can move by hand.

A new backend (PostgreSQL) joins by adding an entry to ``BACKENDS`` (and to ``SHARED`` when two handles
opened on it see the same data).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


def _sqlite_file(tmp_path: Path) -> Backend:
    path = tmp_path / "store" / "plangate.db"

    def set_version(version: int) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE schema_version SET version = ?", (version,))
        conn.close()

    return Backend("sqlite-file", f"sqlite:///{path}", set_version)


def _sqlite_memory(tmp_path: Path) -> Backend:
    return Backend("sqlite-memory", ":memory:")


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
}
SHARED = ["sqlite-file"]
"""Backends where two handles see the same data (needed for reopening, processes, schema tampering)."""
