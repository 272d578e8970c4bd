"""Turning ``sqlite3`` errors into ``StoreError`` messages a person can act on.

For: every statement the SQLite store runs, so that callers never see a raw ``sqlite3`` exception. Not for:
argument checks (``store/_checks.py``), which raise ``ConfigError`` before any SQL runs.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType

from plangate.errors import StoreError


class Translated:
    """A reusable ``with`` block that re-raises ``sqlite3.Error`` as ``StoreError`` naming what failed where.

    A class rather than a generator context manager: it wraps every statement of the hot path.
    """

    __slots__ = ("busy_timeout", "what", "where")

    def __init__(self, what: str, where: str, busy_timeout: float) -> None:
        self.what = what
        self.where = where
        self.busy_timeout = busy_timeout

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, sqlite3.Error):
            raise StoreError(explain(self.what, self.where, exc, self.busy_timeout)) from None


def explain(what: str, where: str, exc: sqlite3.Error, busy_timeout: float) -> str:
    """A one-line message for a sqlite error: what we tried, on which store, and what to look at."""
    detail = str(exc) or type(exc).__name__
    lowered = detail.lower()
    if "locked" in lowered or "busy" in lowered:
        hint = (
            f"; another process held the store's write lock for more than {busy_timeout:g} s "
            "(a long transaction, or a process stuck inside one)"
        )
    elif "not a database" in lowered:
        hint = "; the file exists but is not a plangate store (a SQLite database)"
    elif "unable to open" in lowered:
        hint = "; check that the folder exists, is writable, and that the path is not a directory"
    elif "readonly" in lowered or "read-only" in lowered:
        hint = "; the file or its folder is read-only"
    elif "disk" in lowered and "full" in lowered:
        hint = "; the disk is full"
    else:
        hint = ""
    return f"{what} failed on the store at {where}: {detail}{hint}"
