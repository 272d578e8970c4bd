"""Runs at once, per owner: a run past its owner's ``runs_at_once`` waits, ``queued``, in the order it came,
and starts when a slot frees, on whichever server or worker notices first.

For: ``Admissions``: ``enter`` (a new run of an owner with a limit: admitted at once if a slot is free, else
it waits), ``may_start`` (what every path that would start a queued run asks first: the facade's
``advance``, a worker's message, the reaper), ``hand_out`` (the pass every server and worker makes: the
slots of ended runs freed, the oldest waiting runs admitted, and the admitted runs nobody started yet
claimed for starting by this process) and ``standing`` (an owner's runs going and waiting). Not for:
starting runs (the ``Runs`` facade, the workers' queue).

A run holds its slot from its admission until it ends, waiting on a person included (it goes on the moment
it is answered; DBOS and Temporal count such work too). Slots are handed out under the owner's lock row, by
the runs' statuses as stored, so two processes never hand out one slot twice and an ended run's slot is
free however it ended (a cancel, a crash recovered elsewhere, a prune). The limit a run waits under is the
one in force when it came (kept in its row), so a process whose configuration differs cannot change it.
"""

from __future__ import annotations

from dataclasses import dataclass

from plangate.errors import ConfigError
from plangate.runs.quotas._component import COMPONENT
from plangate.store import Store
from plangate.store.repository import Db, checks, database_of
from plangate.vocab import TERMINAL_STATUSES

STALE_START = 30.0
"""Seconds after which an admitted run still ``queued`` and unleased is started again (its starter died)."""
_ENDED = tuple(sorted(TERMINAL_STATUSES))
_ENDED_MARKS = ", ".join("?" * len(_ENDED))


@dataclass(frozen=True, slots=True)
class Standing:
    """An owner's runs that count against ``runs_at_once``.

    Attributes:
        going: runs admitted and not ended.
        waiting: runs waiting for a slot, oldest first.
    """

    going: int
    waiting: list[str]


class Admissions:
    """The slots of owners' runs in a store.

    Raises:
        ConfigError: ``store`` offers no database.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def enter(self, run_id: str, owner: str, limit: int) -> bool:
        """Count a new run of ``owner`` against ``limit`` runs at once: True when it may start now (and the
        caller starts it), False when it waits for a slot (``hand_out`` admits it later)."""
        checks.text(run_id, "run_id", empty=False)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"runs_at_once: expected a whole number of at least 1; found {limit!r}")
        now = self._database.now()
        with self._database.writing("enter_run_slot") as db:
            self._lock(db, owner)
            db.run(
                "INSERT INTO run_slots (run_id, owner, lim, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run_id, owner, limit, now),
            )
            self._admit(db, owner, now)
            row = db.one("SELECT admitted_at, started_at FROM run_slots WHERE run_id = ?", (run_id,))
            if row is None or row["admitted_at"] is None:
                return False
            db.run(
                "UPDATE run_slots SET started_at = ? WHERE run_id = ? AND started_at IS NULL", (now, run_id)
            )
            return True

    def may_start(self, run_id: str) -> bool:
        """Whether a queued run may start: it counts against no limit, or holds a slot."""
        with self._database.reading("run_slot") as db:
            row = db.one("SELECT admitted_at FROM run_slots WHERE run_id = ?", (run_id,))
        return row is None or row["admitted_at"] is not None

    def waiting(self) -> set[str]:
        """The runs waiting for a slot (which nothing may start yet)."""
        with self._database.reading("waiting_runs") as db:
            rows = db.all("SELECT run_id FROM run_slots WHERE admitted_at IS NULL")
        return {row["run_id"] for row in rows}

    def hand_out(self) -> list[str]:
        """Free the slots of ended runs, admit the oldest waiting runs into the free ones, and claim for this
        process the admitted runs that nobody started (or whose starter left them queued and unleased for
        ``STALE_START`` seconds); returns the runs this process must start now."""
        now = self._database.now()
        # Only owners with something to do take their lock: a run waiting, or one admitted and not started.
        with self._database.reading("owners_with_slots") as db:
            rows = db.all(
                "SELECT DISTINCT s.owner FROM run_slots AS s LEFT JOIN runs AS r ON r.id = s.run_id "
                "WHERE s.admitted_at IS NULL OR s.started_at IS NULL OR (s.started_at < ? "
                "AND r.status = 'queued' AND (r.lease_expires_at IS NULL OR r.lease_expires_at < ?))",
                (now - STALE_START, now),
            )
        owners = [row["owner"] for row in rows]
        started: list[str] = []
        for owner in owners:
            with self._database.writing("hand_out_run_slots") as db:
                self._lock(db, owner)
                self._admit(db, owner, now)
                started.extend(self._claim_starts(db, owner, now))
        return started

    def standing(self, owner: str) -> Standing:
        """``owner``'s runs going and waiting, as the slots say now."""
        with self._database.reading("run_slots_of_owner") as db:
            going = db.one(
                f"SELECT count(*) AS n FROM run_slots AS s JOIN runs AS r ON r.id = s.run_id "
                f"WHERE s.owner = ? AND s.admitted_at IS NOT NULL AND r.status NOT IN ({_ENDED_MARKS})",
                (owner, *_ENDED),
            )
            rows = db.all(
                "SELECT run_id FROM run_slots WHERE owner = ? AND admitted_at IS NULL ORDER BY pos", (owner,)
            )
        return Standing(0 if going is None else int(going["n"]), [row["run_id"] for row in rows])

    def position(self, run_id: str) -> int | None:
        """How many of its owner's runs wait ahead of a waiting run (0: it is next); None when it does not
        wait."""
        with self._database.reading("run_slot_position") as db:
            row = db.one("SELECT owner, pos, admitted_at FROM run_slots WHERE run_id = ?", (run_id,))
            if row is None or row["admitted_at"] is not None:
                return None
            ahead = db.one(
                "SELECT count(*) AS n FROM run_slots WHERE owner = ? AND admitted_at IS NULL AND pos < ?",
                (row["owner"], row["pos"]),
            )
        return 0 if ahead is None else int(ahead["n"])

    def _lock(self, db: Db, owner: str) -> None:
        db.run("INSERT INTO owner_locks (owner) VALUES (?) ON CONFLICT (owner) DO NOTHING", (owner,))
        lock = " FOR UPDATE" if self._database.dialect == "postgresql" else ""
        db.one(f"SELECT owner FROM owner_locks WHERE owner = ?{lock}", (owner,))

    def _admit(self, db: Db, owner: str, now: float) -> None:
        """Under the owner's lock: forget the rows of runs that ended (or are gone), then admit the oldest
        waiting runs while slots are free under the limit the oldest of them came with."""
        db.run(
            f"DELETE FROM run_slots WHERE owner = ? AND run_id IN "
            f"(SELECT s.run_id FROM run_slots AS s LEFT JOIN runs AS r ON r.id = s.run_id "
            f"WHERE s.owner = ? AND (r.id IS NULL OR r.status IN ({_ENDED_MARKS})))",
            (owner, owner, *_ENDED),
        )
        waiting = db.all(
            "SELECT run_id, lim FROM run_slots WHERE owner = ? AND admitted_at IS NULL ORDER BY pos", (owner,)
        )
        if not waiting:
            return
        going = db.one(
            "SELECT count(*) AS n FROM run_slots WHERE owner = ? AND admitted_at IS NOT NULL", (owner,)
        )
        free = int(waiting[0]["lim"]) - (0 if going is None else int(going["n"]))
        for row in waiting[: max(free, 0)]:
            db.run("UPDATE run_slots SET admitted_at = ? WHERE run_id = ?", (now, row["run_id"]))

    def _claim_starts(self, db: Db, owner: str, now: float) -> list[str]:
        rows = db.all(
            "SELECT s.run_id FROM run_slots AS s JOIN runs AS r ON r.id = s.run_id "
            "WHERE s.owner = ? AND s.admitted_at IS NOT NULL AND r.status = 'queued' "
            "AND (s.started_at IS NULL OR (s.started_at < ? "
            "AND (r.lease_expires_at IS NULL OR r.lease_expires_at < ?)))",
            (owner, now - STALE_START, now),
        )
        for row in rows:
            db.run("UPDATE run_slots SET started_at = ? WHERE run_id = ?", (now, row["run_id"]))
        return [row["run_id"] for row in rows]


__all__ = ["STALE_START", "Admissions", "Standing"]
