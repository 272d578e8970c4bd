"""Turning ``sqlite3`` errors into ``StoreError`` messages a person can act on.

For: every statement the SQLite store runs, so that callers never see a raw ``sqlite3`` exception. Not for:
argument checks (``store/_checks.py``), which raise ``ConfigError`` before any SQL runs.
"""

from __future__ import annotations

import sqlite3

from plangate.store._sql import Translated as _Translated


class Translated(_Translated):
    """``Translated`` for ``sqlite3.Error``: re-raised as ``StoreError`` naming what failed where."""

    __slots__ = ()

    error = sqlite3.Error

    def explain(self, exc: Exception) -> str:
        """A one-line message for a sqlite error (``explain``)."""
        return explain(self.what, self.where, exc, self.busy_timeout)


def explain(what: str, where: str, exc: Exception, busy_timeout: float) -> str:
    """A one-line message for a sqlite error (a ``sqlite3.Error``): what we tried, on which store, and what to
    look at."""
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
