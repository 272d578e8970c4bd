"""Schedules: a formula run on a cron expression or an interval, and the slots each one claimed, stored.

For: ``Schedules`` (add, list, pause, resume and delete schedules; ``claim`` a slot, which succeeds in
exactly one process per ``(schedule, slot)``, whatever races it), the records, ``due_slots`` (the slots of a
schedule between two times, with ``croniter`` for cron), ``next_slot`` and the migrations of the tables
(``COMPONENT``).
Not for: firing them (``runs/scheduler.py``), which every server and worker on a store does.

A slot is a time a schedule fires at (seconds since the epoch). ``last_slot`` is the latest slot decided
(fired, skipped, or passed over as missed): a slot is claimed by inserting its row, keyed by ``(schedule,
slot)``, in the same transaction that moves ``last_slot`` on, so of two schedulers that race exactly one
fires it. A slot later than the grace of the scheduler was missed (nothing ran then): its schedule's
``missed`` policy says whether the latest missed slot still runs (``catch_up``, one run for all of them) or
not (``skip``). ``overlap`` says what a slot does while the run of an earlier slot is still going: ``skip``
(the slot is recorded as skipped), ``queue`` (it runs once that run ended; one slot waits at most) or
``allow``.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Mapping
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import JsonValue

from plangate.errors import ConfigError, NotFoundError, StoreError
from plangate.store import Record, Store
from plangate.store.ddl import BOOLEAN, JSON, POSITION, REAL, TEXT, Column, Create, Index, Table
from plangate.store.repository import Component, Db, RowMapper, checks, database_of, register

Missed = Literal["skip", "catch_up"]
Overlap = Literal["skip", "queue", "allow"]
SlotState = Literal["fired", "skipped", "queued", "failed"]
_MISSED: tuple[Missed, ...] = ("skip", "catch_up")
_OVERLAP: tuple[Overlap, ...] = ("skip", "queue", "allow")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_EVERY = re.compile(r"^(?:([0-9]+)([dhms]))+$")
_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
MAX_EVERY = 3_650 * 86_400.0
"""The longest interval a schedule may have, ten years (its slots stay dates a calendar can show)."""
MAX_SLOTS = 10_000
"""The most slots ``due_slots`` walks through (a cron of every minute missed for a week)."""

SCHEDULES = Table(
    "schedules",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("name", TEXT),
        Column("formula", TEXT),
        Column("vars", JSON),
        Column("cron", TEXT, nullable=True),
        Column("every", REAL, nullable=True),
        Column("timezone", TEXT),
        Column("missed", TEXT, choices=_MISSED),
        Column("overlap", TEXT, choices=_OVERLAP),
        Column("paused", BOOLEAN),
        Column("last_slot", REAL),
        Column("created_at", REAL),
        Column("updated_at", REAL),
    ),
    indexes=(Index("schedules_by_owner", ("owner", "name")),),
)
SLOTS = Table(
    "schedule_slots",
    (
        Column("schedule_id", TEXT, references=("schedules", "id")),
        Column("slot", REAL),
        Column("state", TEXT, choices=("fired", "skipped", "queued", "failed")),
        Column("run_id", TEXT, nullable=True),
        Column("note", TEXT),
        Column("created_at", REAL),
    ),
    primary_key=("schedule_id", "slot"),
)

COMPONENT = register(
    Component(
        "schedules",
        (
            # 1: schedules, and the slots they claimed (one row per fired, skipped or queued slot)
            (Create(SCHEDULES), Create(SLOTS)),
        ),
    )
)


class Schedule(Record):
    """A formula run on a cron expression (in ``timezone``) or every ``every`` seconds.

    Attributes:
        id: ``sch_…``, random.
        name: unique among the owner's schedules.
        cron: a five-field cron expression, or None for an interval.
        every: the interval in seconds (slots at whole multiples of it since the epoch), or None.
        missed: what a slot missed while nothing ran does (``skip``, or ``catch_up``: one run for them).
        overlap: what a slot does while the previous slot's run still goes (``skip``, ``queue``, ``allow``).
        last_slot: the latest slot decided (its creation time before the first).
    """

    id: str
    owner: str
    name: str
    formula: str
    vars: dict[str, JsonValue]
    cron: str | None
    every: float | None
    timezone: str
    missed: Missed
    overlap: Overlap
    paused: bool
    last_slot: float
    created_at: float
    updated_at: float


class Slot(Record):
    """A slot a schedule claimed: the run it started (``fired``), or why none (``skipped``, ``failed``), or
    the run it will start once the previous one ends (``queued``)."""

    schedule_id: str
    slot: float
    state: SlotState
    run_id: str | None
    note: str
    created_at: float


_SCHEDULES = RowMapper(Schedule, lambda row: f"schedule {row['id']!r}", objects=("vars",))
_SLOTS = RowMapper(Slot, lambda row: f"slot {row['slot']!r} of schedule {row['schedule_id']!r}")
_SELECT = f"SELECT {_SCHEDULES.select} FROM schedules"


def parse_every(value: str, where: str = "--every") -> float:
    """An interval such as ``30s``, ``5m`` or ``1h30m`` in seconds.

    Raises:
        ConfigError: not an interval of at least one second.
    """
    text = value.strip()
    parts = re.findall(r"([0-9]+)([dhms])", text)
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if not _EVERY.match(text) or seconds < 1:
        raise ConfigError(f"{where}: expected an interval like '30s', '5m' or '1h30m'; found {value!r}")
    if seconds > MAX_EVERY:
        raise ConfigError(f"{where}: expected an interval of at most 3650d (ten years); found {value!r}")
    return float(seconds)


def due_slots(schedule: Schedule, after: float, until: float) -> list[float]:
    """The slots of ``schedule`` later than ``after`` and no later than ``until``, oldest first (at most
    ``MAX_SLOTS``: the latest ones)."""
    if schedule.every is not None:
        step = schedule.every
        first = (after // step + 1) * step
        count = int((until - first) // step) + 1 if until >= first else 0
        start = max(0, count - MAX_SLOTS)
        return [first + n * step for n in range(start, count)]
    if schedule.cron is None:
        return []  # a schedule has one of the two (checked when it is added)
    zone = ZoneInfo(schedule.timezone)
    walker = croniter(schedule.cron, dt.datetime.fromtimestamp(after, zone))
    found: list[float] = []
    while True:
        try:
            slot = float(walker.get_next(float))
        except CroniterBadDateError:  # no date matches it any more (stored before ``add`` refused such)
            return found[-MAX_SLOTS:]
        if slot > until:
            return found[-MAX_SLOTS:]
        found.append(slot)
        if len(found) > 2 * MAX_SLOTS:
            found = found[-MAX_SLOTS:]


def next_slot(schedule: Schedule, now: float) -> float | None:
    """When ``schedule`` fires next: its first slot after ``now`` (or after its latest slot decided, when
    that is later); None while it is paused."""
    if schedule.paused:
        return None
    after = max(schedule.last_slot, now)
    if schedule.every is not None:
        return (after // schedule.every + 1) * schedule.every
    if schedule.cron is None:
        return None
    return _next_cron(schedule.cron, after, schedule.timezone)


def _next_cron(cron: str, after: float, timezone: str) -> float | None:
    """The first time after ``after`` that ``cron`` names in ``timezone``; None when no date matches it."""
    walker = croniter(cron, dt.datetime.fromtimestamp(after, ZoneInfo(timezone)))
    try:
        return float(walker.get_next(float))
    except CroniterBadDateError:  # '0 9 31 2 *': February has no 31st
        return None


class Schedules:
    """The schedules of a store and the slots they claimed.

    Raises:
        ConfigError: ``store`` offers no database.
        SchemaVersionError: a newer plangate wrote the schedules' tables.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def now(self) -> float:
        """The store's clock."""
        return self._database.now()

    def add(
        self,
        owner: str,
        name: str,
        formula: str,
        *,
        vars: Mapping[str, JsonValue] | None = None,
        cron: str | None = None,
        every: float | None = None,
        timezone: str = "UTC",
        missed: str = "skip",
        overlap: str = "skip",
    ) -> Schedule:
        """Add a schedule; its first slot is the first one after now.

        Raises:
            ConfigError: a bad argument (the message names it), or the owner has a schedule of that name.
        """
        checks.text(owner, "schedule: owner", empty=False)
        _check(name, formula, cron, every, timezone, missed, overlap)
        vars_json = checks.json_object(dict(vars or {}), "schedule: vars")
        now = self._database.now()
        new_id = "sch_" + secrets.token_urlsafe(9)
        with self._database.writing("add_schedule") as db:
            if db.one("SELECT 1 FROM schedules WHERE owner = ? AND name = ?", (owner, name)) is not None:
                raise ConfigError(f"schedule: {owner!r} has a schedule named {name!r} already")
            db.run(
                "INSERT INTO schedules (id, owner, name, formula, vars, cron, every, timezone, missed, "
                "overlap, paused, last_slot, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    new_id,
                    owner,
                    name,
                    formula,
                    vars_json,
                    cron,
                    every,
                    timezone,
                    missed,
                    overlap,
                    False,
                    now,
                    now,
                    now,
                ),
            )
            row = db.one(f"{_SELECT} WHERE id = ?", (new_id,))
        if row is None:
            raise StoreError(f"schedule {name!r} was not stored")  # inserted in this very transaction
        return _SCHEDULES.read(row)

    def define(
        self,
        owner: str,
        name: str,
        formula: str,
        *,
        vars: Mapping[str, JsonValue] | None = None,
        cron: str | None = None,
        every: float | None = None,
        timezone: str = "UTC",
        missed: str = "skip",
        overlap: str = "skip",
    ) -> Schedule:
        """Add the schedule, or bring the stored one of that owner and name up to this definition (its
        slots, its latest slot and whether it is paused are kept): for schedules an operator's file defines.

        Raises:
            ConfigError: a bad argument (the message names it).
        """
        try:
            found = self.get(name, owner=owner)
        except NotFoundError:
            return self.add(
                owner,
                name,
                formula,
                vars=vars,
                cron=cron,
                every=every,
                timezone=timezone,
                missed=missed,
                overlap=overlap,
            )
        _check(name, formula, cron, every, timezone, missed, overlap)
        vars_json = checks.json_object(dict(vars or {}), "schedule: vars")
        with self._database.writing("define_schedule") as db:
            db.run(
                "UPDATE schedules SET formula = ?, vars = ?, cron = ?, every = ?, timezone = ?, missed = ?, "
                "overlap = ?, updated_at = ? WHERE id = ?",
                (formula, vars_json, cron, every, timezone, missed, overlap, self._database.now(), found.id),
            )
            return self._get(db, found.id, None)

    def listed(self, *, owner: str | None = None, active: bool = False) -> list[Schedule]:
        """Every schedule (``owner``'s only when given; not paused only with ``active``), oldest first."""
        clauses: list[str] = []
        params: list[object] = []
        if owner is not None:
            clauses.append("owner = ?")
            params.append(owner)
        if active:
            clauses.append("paused = ?")
            params.append(False)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._database.reading("list_schedules") as db:
            rows = db.all(f"{_SELECT}{where} ORDER BY pos", params)
        return [_SCHEDULES.read(row) for row in rows]

    def get(self, ref: str, *, owner: str | None = None) -> Schedule:
        """The schedule with that id, or that name among ``owner``'s.

        Raises:
            NotFoundError: none (or another owner's).
        """
        with self._database.reading("get_schedule") as db:
            return self._get(db, ref, owner)

    def set_paused(self, ref: str, paused: bool, *, owner: str | None = None) -> Schedule:
        """Pause or resume a schedule; a resumed one goes on from now (the slots while it was paused are
        passed over, never caught up).

        Raises:
            NotFoundError: no such schedule.
        """
        with self._database.writing("pause_schedule") as db:
            found = self._get(db, ref, owner)
            now = self._database.now()
            last = found.last_slot if paused or not found.paused else max(found.last_slot, now)
            db.run(
                "UPDATE schedules SET paused = ?, last_slot = ?, updated_at = ? WHERE id = ?",
                (paused, last, now, found.id),
            )
            return self._get(db, found.id, None)

    def delete(self, ref: str, *, owner: str | None = None) -> Schedule:
        """Delete a schedule and its slots (the runs it started stay).

        Raises:
            NotFoundError: no such schedule.
        """
        with self._database.writing("delete_schedule") as db:
            found = self._get(db, ref, owner)
            db.run("DELETE FROM schedule_slots WHERE schedule_id = ?", (found.id,))
            db.run("DELETE FROM schedules WHERE id = ?", (found.id,))
        return found

    def claim(self, schedule: Schedule, slot: float, state: SlotState, run_id: str | None, note: str) -> bool:
        """Claim ``slot`` of ``schedule``, recording its ``state``, and move ``last_slot`` on to it; whether
        this call claimed it (False: another process did first)."""
        now = self._database.now()
        with self._database.writing("claim_slot") as db:
            claimed = db.run(
                "INSERT INTO schedule_slots (schedule_id, slot, state, run_id, note, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, slot) DO NOTHING",
                (schedule.id, slot, state, run_id, note, now),
            )
            if claimed:
                _pass(db, schedule.id, slot)
        return claimed == 1

    def pass_over(self, schedule: Schedule, slot: float) -> None:
        """Move ``last_slot`` on to ``slot`` without claiming it (slots missed and skipped)."""
        with self._database.writing("pass_over_slots") as db:
            _pass(db, schedule.id, slot)

    def settle(self, schedule_id: str, slot: float, frm: SlotState, to: SlotState, note: str = "") -> bool:
        """Move a slot from state ``frm`` to ``to``, compare-and-set; whether this call did."""
        with self._database.writing("settle_slot") as db:
            changed = db.run(
                "UPDATE schedule_slots SET state = ?, note = ? "
                "WHERE schedule_id = ? AND slot = ? AND state = ?",
                (to, note, schedule_id, slot, frm),
            )
        return changed == 1

    def slots(self, schedule_id: str, *, state: SlotState | None = None, limit: int = 100) -> list[Slot]:
        """The latest slots of a schedule (``state`` only when given), newest first."""
        where, params = ("AND state = ? ", (schedule_id, state)) if state else ("", (schedule_id,))
        with self._database.reading("list_slots") as db:
            rows = db.all(
                f"SELECT {_SLOTS.select} FROM schedule_slots WHERE schedule_id = ? {where}"
                "ORDER BY slot DESC LIMIT ?",
                (*params, limit),
            )
        return [_SLOTS.read(row) for row in rows]

    def _get(self, db: Db, ref: str, owner: str | None) -> Schedule:
        checks.text(ref, "schedule", empty=False)
        rows = db.all(f"{_SELECT} WHERE id = ? OR name = ? ORDER BY pos", (ref, ref))
        for row in rows:
            if owner is None or row["owner"] == owner:
                return _SCHEDULES.read(row)
        scope = f" of owner {owner!r}" if owner is not None else ""
        raise NotFoundError(f"no schedule {ref!r}{scope} in the store at {self._database.where}")


def _pass(db: Db, schedule_id: str, slot: float) -> None:
    db.run(
        "UPDATE schedules SET last_slot = CASE WHEN last_slot < ? THEN ? ELSE last_slot END WHERE id = ?",
        (slot, slot, schedule_id),
    )


def _check(
    name: str, formula: str, cron: str | None, every: float | None, timezone: str, missed: str, overlap: str
) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"schedule: name: expected 1-64 letters, digits, '_', '.' or '-'; found {name!r}")
    checks.text(formula, "schedule: formula", empty=False)
    if (cron is None) == (every is None):
        raise ConfigError(
            "schedule: give one of cron (a cron expression; --cron) and every (an interval; --every)"
        )
    if every is not None and (isinstance(every, bool) or not 1 <= every <= MAX_EVERY):
        raise ConfigError(f"schedule: every: expected 1 second to 3650 days; found {every!r}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"schedule: timezone: unknown time zone {timezone!r} (e.g. 'Europe/Paris')"
        ) from None
    if cron is not None and not croniter.is_valid(cron):
        raise ConfigError(f"schedule: cron: {cron!r} is not a cron expression (five fields: '0 9 * * MON')")
    if cron is not None and _next_cron(cron, dt.datetime.now(dt.UTC).timestamp(), timezone) is None:
        raise ConfigError(f"schedule: cron: {cron!r} never fires: no date matches it")
    if missed not in _MISSED:
        raise ConfigError(f"schedule: missed: expected 'skip' or 'catch_up'; found {missed!r}")
    if overlap not in _OVERLAP:
        raise ConfigError(f"schedule: overlap: expected 'skip', 'queue' or 'allow'; found {overlap!r}")


__all__ = [
    "COMPONENT",
    "MAX_EVERY",
    "MAX_SLOTS",
    "Missed",
    "Overlap",
    "Schedule",
    "Schedules",
    "Slot",
    "SlotState",
    "due_slots",
    "next_slot",
    "parse_every",
]
