"""The quotas' tables: owners' own limits, the runs each owner has going or waiting for a slot, and what each
owner's runs spent each day.

For: the tables (described once for both backends) and ``day_of`` (the UTC day a time falls in, the key of
a day's spending). Not for: reading or writing them (``limits.py``, ``admissions.py``, ``daily.py``).

``run_slots`` holds a row for each run that counts against an owner's ``runs_at_once``: ``admitted_at`` set
once it may start (it holds a slot until it ends), ``started_at`` once a process took it upon itself to
start it. ``owner_locks`` has one row per owner, locked while its slots are handed out, so that two
processes never hand out one slot twice (PostgreSQL: the row ``FOR UPDATE``; SQLite's write lock covers it).
"""

from __future__ import annotations

import datetime as dt

from plangate.store.ddl import BIGINT, INTEGER, JSON, POSITION, REAL, TEXT, Column, Index, Table

OWNER_LIMITS = Table(
    "owner_limits",
    (Column("owner", TEXT, primary_key=True), Column("limits", JSON), Column("updated_at", REAL)),
)
OWNER_LOCKS = Table("owner_locks", (Column("owner", TEXT, primary_key=True),))
RUN_SLOTS = Table(
    "run_slots",
    (
        Column("pos", POSITION),
        Column("run_id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("lim", INTEGER, at_least=1),
        Column("created_at", REAL),
        Column("admitted_at", REAL, nullable=True),
        Column("started_at", REAL, nullable=True),
    ),
    indexes=(Index("run_slots_by_owner", ("owner", "admitted_at", "pos")),),
)
OWNER_USAGE = Table(
    "owner_usage",
    (
        Column("owner", TEXT),
        Column("day", TEXT),
        Column("runs", INTEGER),
        Column("tokens", BIGINT),
        Column("cost", REAL),
    ),
    primary_key=("owner", "day"),
)


def day_of(at: float) -> str:
    """The UTC day ``at`` falls in (``2025-06-01``)."""
    return dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat()


def next_day(at: float) -> float:
    """When the UTC day after ``at``'s begins."""
    day = dt.datetime.fromtimestamp(at, dt.UTC).date() + dt.timedelta(days=1)
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


__all__ = ["OWNER_LIMITS", "OWNER_LOCKS", "OWNER_USAGE", "RUN_SLOTS", "day_of", "next_day"]
