"""Retention: finished runs past a horizon removed from the store, whole, with everything that hangs on them.

For: ``prune`` (the ``plangate prune`` command and the server's periodic pass), ``parse_age`` (``"30d"``),
``PruneReport`` (what was, or would be, removed) and ``run_rows`` (how a repository above the store, such as
the copilot's turns, has its rows that reference runs removed with them). Not for: deciding when to prune
(the command line, ``server/_retention.py``).

A run is pruned with its tree (its sub-runs, recursively), in one transaction per tree: the rows of every
repository that registered ``run_rows`` first, then write intents, receipts, interactions, snapshots and
events, then the runs. A tree is pruned only when every run in it has ended (a run waiting on a person, a
queued or running one, keeps its whole tree), none holds a live lease, and none moved since the horizon;
the check is made again inside the transaction, on rows it holds, so a run that moves on meanwhile is kept.
``compact`` gives the space back: SQLite's ``VACUUM`` (the file shrinks), PostgreSQL's ``VACUUM`` (the space
is reused by later rows; the tables stop growing).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from plangate.errors import ConfigError, Signal, StoreError
from plangate.store._sql import Db
from plangate.store.repository import Database as _Database
from plangate.store.repository import HasDatabase
from plangate.vocab import TERMINAL_STATUSES

RunRows = Callable[[Db, Sequence[str]], int]
"""Deletes a repository's rows that reference any of the run ids given (inside the prune's transaction);
returns how many it removed."""

_HOOKS: dict[str, tuple[RunRows, tuple[str, ...]]] = {}
_CORE_TABLES = ("write_intents", "receipts", "interactions", "snapshots", "events")
_ENDED = tuple(sorted(TERMINAL_STATUSES))
_AGE = re.compile(r"([0-9]+)([dhms])")
_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_TREE = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? "
    "UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
)


def run_rows(name: str, delete: RunRows, tables: Sequence[str] = ()) -> None:
    """Have every prune remove, through ``delete``, the rows of repository ``name`` that reference a pruned
    run; ``tables`` are the tables it deletes from (compacted with the core's). Registering a name again
    replaces its hook."""
    _HOOKS[name] = (delete, tuple(tables))


def parse_age(value: object, where: str = "older_than") -> float:
    """An age such as ``"30d"``, ``"12h"``, ``"1d12h"`` or ``"90s"`` (or a number of seconds) in seconds.

    Raises:
        ConfigError: not an age of more than 0 seconds; the message says what was found and where.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value > 0:
            return float(value)
        raise ConfigError(f"{where}: expected an age of more than 0 seconds; found {value!r}")
    text = value.strip() if isinstance(value, str) else ""
    parts = _AGE.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ConfigError(
            f"{where}: expected an age like '30d', '12h', '1d12h', '15m' or '90s'; found {value!r}"
        )
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ConfigError(f"{where}: expected an age of more than 0 seconds; found {value!r}")
    return float(seconds)


@dataclass
class PruneReport:
    """What a prune removed (or, for a dry run, would remove).

    Attributes:
        dry_run: nothing was removed; the counts are those of the deletions, rolled back.
        trees: runs that were pruned with their sub-runs (top-level runs).
        runs: runs removed, sub-runs included.
        rows: rows removed from each other table (``events``, ``receipts``, ``turns``, …).
        kept: top-level runs past the horizon kept because a run of their tree has not ended, holds a lease
            or moved since the horizon.
        compacted: the store gave the freed space back (``compact``).
    """

    dry_run: bool
    trees: int = 0
    runs: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    compacted: bool = False

    def add(self, table: str, count: int) -> None:
        """Count ``count`` more rows removed from ``table``."""
        self.rows[table] = self.rows.get(table, 0) + count


class _DryRun(Signal):
    """Raised inside a dry run's transaction to roll it back once its counts are taken."""


def prune(
    store: object,
    older_than: float,
    *,
    owner: str | None = None,
    dry_run: bool = False,
    batch: int = 500,
) -> PruneReport:
    """Remove the ended run trees of ``store`` (of ``owner``, or everyone's) that nothing touched for
    ``older_than`` seconds, one transaction per tree; a dry run makes the same deletions and rolls each back.

    Raises:
        ConfigError: a bad argument, or a store that offers no database.
        StoreError: the store failed (the tree being removed is left whole).
    """
    if isinstance(older_than, bool) or not isinstance(older_than, int | float) or older_than <= 0:
        raise ConfigError(f"prune: older_than: expected seconds > 0; found {older_than!r}")
    database = _database(store)
    cutoff = database.now() - older_than
    report = PruneReport(dry_run=dry_run)
    after = 0
    while True:
        candidates = _candidates(database, cutoff, owner, after, batch)
        for pos, run_id in candidates:
            after = pos
            _prune_tree(database, run_id, cutoff, report)
        if len(candidates) < batch:
            return report


def compact(store: object) -> None:
    """Give the space freed by ``prune`` back: SQLite rewrites its file (``VACUUM``: it shrinks; writers
    wait meanwhile), PostgreSQL vacuums the tables prune writes to (their space is reused)."""
    database = _database(store)
    tables = ("runs", *_CORE_TABLES, *(table for _, tables in _HOOKS.values() for table in tables))
    database.compact("compacting the store", tables)


def _database(store: object) -> _Database:
    if not isinstance(store, HasDatabase):
        raise ConfigError(
            f"prune: expected a store opened by plangate (open_store); found {type(store).__name__}"
        )
    return store.database


def _candidates(
    database: _Database, cutoff: float, owner: str | None, after: int, batch: int
) -> list[tuple[int, str]]:
    marks = ", ".join("?" for _ in _ENDED)
    query = (
        f"SELECT pos, id FROM runs WHERE parent_run_id IS NULL AND status IN ({marks}) AND updated_at < ? "
        "AND pos > ?"
    )
    params: list[object] = [*_ENDED, cutoff, after]
    if owner is not None:
        query += " AND owner = ?"
        params.append(owner)
    with database.reading("prune: finding runs past the horizon") as db:
        rows = db.all(query + " ORDER BY pos LIMIT ?", (*params, batch))
    return [(int(row["pos"]), str(row["id"])) for row in rows]


def _prune_tree(database: _Database, run_id: str, cutoff: float, report: PruneReport) -> None:
    counts = PruneReport(dry_run=report.dry_run)
    try:
        with database.writing(f"prune: removing run {run_id!r}") as db:
            ids = _removable(db, run_id, cutoff, database.now())
            if ids is None:
                report.kept += 1
                return
            _delete(db, ids, counts)
            if report.dry_run:
                raise _DryRun
    except _DryRun:
        pass
    report.trees += 1
    report.runs += counts.runs
    for table, count in counts.rows.items():
        report.add(table, count)


def _removable(db: Db, run_id: str, cutoff: float, now: float) -> list[str] | None:
    """The ids of ``run_id``'s tree, locked, when all of it may go; None when any of it must stay."""
    lock = " FOR UPDATE" if db.dialect == "postgresql" else ""
    rows = db.all(
        _TREE + "SELECT id, status, updated_at, lease_owner, lease_expires_at FROM runs "
        f"WHERE id IN (SELECT id FROM tree){lock}",
        (run_id,),
    )
    if not rows:
        return None
    for row in rows:
        leased = row["lease_owner"] is not None and (row["lease_expires_at"] or 0) > now
        if row["status"] not in TERMINAL_STATUSES or row["updated_at"] >= cutoff or leased:
            return None
    return [str(row["id"]) for row in rows]


def _delete(db: Db, ids: list[str], counts: PruneReport) -> None:
    marks = ", ".join("?" for _ in ids)
    for name, (delete, _) in sorted(_HOOKS.items()):
        counts.add(name, delete(db, ids))
    if db.dialect == "postgresql":
        _delete_at_once(db, ids, marks, counts)
        return
    for table in _CORE_TABLES:
        counts.add(table, db.run(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids))
    # sub-runs and their parents in one statement: the parent reference is checked at its end
    counts.runs += db.run(f"DELETE FROM runs WHERE id IN ({marks})", ids)


def _delete_at_once(db: Db, ids: list[str], marks: str, counts: PruneReport) -> None:
    """PostgreSQL: the core's deletions as one statement (one round trip; references checked at its end)."""
    parts = [
        f"{table} AS (DELETE FROM {table} WHERE run_id IN ({marks}) RETURNING 1)" for table in _CORE_TABLES
    ]
    parts.append(f"runs AS (DELETE FROM runs WHERE id IN ({marks}) RETURNING 1)")
    counted = ", ".join(f"(SELECT COUNT(*) FROM {table}) AS {table}" for table in (*_CORE_TABLES, "runs"))
    row = db.one(f"WITH {', '.join(parts)} SELECT {counted}", ids * (len(_CORE_TABLES) + 1))
    if row is None:  # a SELECT of counts always returns its row
        raise StoreError(f"prune: the deletion of runs {ids!r} returned no counts")
    for table in _CORE_TABLES:
        counts.add(table, int(row[table]))
    counts.runs += int(row["runs"])


__all__ = ["PruneReport", "RunRows", "compact", "parse_age", "prune", "run_rows"]
