"""One turn writes a conversation at a time, in the store: the turn that holds it, and the turns waiting after
it, in order.

For: ``TurnOrder`` (``claim``: a turn becomes its conversation's writer if nobody is, and nobody waits ahead
of it; otherwise it says who holds the conversation, and with ``queue`` takes its place in the line;
``release``: in the turn's last transaction, with its outcome, the conversation is free again) and
``COMPONENT`` (its tables). What a second message does while a turn runs — refused, queued, or the
running turn cancelled first ("double texting") — is decided above (the server's ``[limits]
double_texting``); whatever it is, the store never lets two turns write one conversation at once, whichever
processes run them: ``conversation_writers`` has one row per conversation at most. Not for: conversations
and turns (``_conversations.py``).

A writer whose turn ended without releasing (a process killed after its commit was made some other way),
or whose run was never stored (its process died between the claim and the run's creation), holds nothing:
the next claim clears it.
"""

from __future__ import annotations

from plangate.store import Store, Transaction
from plangate.store.ddl import POSITION, REAL, TEXT, Column, Create, Index, Table
from plangate.store.repository import Component, Db, checks, connection_of, database_of, register
from plangate.vocab import TERMINAL_STATUSES

UNSTORED_AFTER = 60.0
"""Seconds after which a writer whose run was never stored holds nothing."""

WRITERS = Table(
    "conversation_writers",
    (
        Column("conversation_id", TEXT, primary_key=True),
        Column("run_id", TEXT),
        Column("since", REAL),
    ),
)
WAITING = Table(
    "conversation_waiting",
    (
        Column("pos", POSITION),
        Column("run_id", TEXT, unique=True),
        Column("conversation_id", TEXT),
        Column("since", REAL),
    ),
    indexes=(Index("conversation_waiting_by_conversation", ("conversation_id", "pos")),),
)
COMPONENT = register(
    Component(
        "turn_order",
        (
            # 1: each conversation's writing turn (one at most), and the turns waiting after it, in order
            (Create(WRITERS), Create(WAITING)),
        ),
    )
)
_ENDED = tuple(sorted(TERMINAL_STATUSES))


class TurnOrder:
    """The order of the turns of each conversation in a store.

    Raises:
        ConfigError: ``store`` offers no database.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def claim(self, conversation_id: str, run_id: str, *, queue: bool = True) -> str | None:
        """Make the turn of ``run_id`` its conversation's writer; None when it is (now or already), else the
        run of the turn that holds the conversation or waits ahead of it. With ``queue``, a turn that is not
        the writer waits in line (a later claim of it succeeds once the turns ahead ended)."""
        checks.text(conversation_id, "conversation_id", empty=False)
        checks.text(run_id, "run_id", empty=False)
        now = self._database.now()
        lock = " FOR UPDATE" if self._database.dialect == "postgresql" else ""
        with self._database.writing("claim_conversation") as db:
            row = db.one(
                f"SELECT run_id, since FROM conversation_writers WHERE conversation_id = ?{lock}",
                (conversation_id,),
            )
            if row is not None and row["run_id"] == run_id:
                return None
            if row is not None and not _gone(db, row["run_id"], row["since"], now):
                return self._line(db, conversation_id, run_id, now, queue, row["run_id"])
            if row is not None:
                db.run("DELETE FROM conversation_writers WHERE conversation_id = ?", (conversation_id,))
            ahead = self._first_waiting(db, conversation_id, now)
            if ahead is not None and ahead != run_id:
                return self._line(db, conversation_id, run_id, now, queue, ahead)
            taken = db.run(
                "INSERT INTO conversation_writers (conversation_id, run_id, since) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation_id) DO NOTHING",
                (conversation_id, run_id, now),
            )
            if taken != 1:  # another process took it between the look and the insert
                holder = db.one(
                    "SELECT run_id FROM conversation_writers WHERE conversation_id = ?", (conversation_id,)
                )
                return self._line(db, conversation_id, run_id, now, queue, holder["run_id"] if holder else "")
            db.run("DELETE FROM conversation_waiting WHERE run_id = ?", (run_id,))
            return None

    def writer(self, conversation_id: str) -> str | None:
        """The run of the turn writing the conversation now, if any."""
        with self._database.reading("conversation_writer") as db:
            row = db.one(
                "SELECT run_id FROM conversation_writers WHERE conversation_id = ?", (conversation_id,)
            )
        return None if row is None else str(row["run_id"])

    def ahead(self, conversation_id: str, run_id: str) -> list[str]:
        """The runs of the turns before ``run_id``'s in its conversation: the writer, then those waiting
        ahead of it in line."""
        with self._database.reading("turns_ahead") as db:
            writer = db.one(
                "SELECT run_id FROM conversation_writers WHERE conversation_id = ?", (conversation_id,)
            )
            mine = db.one("SELECT pos FROM conversation_waiting WHERE run_id = ?", (run_id,))
            waiting = db.all(
                "SELECT run_id FROM conversation_waiting WHERE conversation_id = ? AND pos < ? ORDER BY pos",
                (conversation_id, mine["pos"] if mine is not None else 2**62),
            )
        found = [] if writer is None or writer["run_id"] == run_id else [str(writer["run_id"])]
        return found + [str(row["run_id"]) for row in waiting if row["run_id"] != run_id]

    def withdraw(self, run_id: str) -> None:
        """Take a turn that will not run (its start failed) out of the line, and free its conversation if
        it held it."""
        with self._database.writing("withdraw_turn") as db:
            _release(db, run_id)

    @staticmethod
    def release(tx: Transaction) -> None:
        """Free the conversation of the turn whose ``ask`` run ``tx`` ends (in that transaction)."""
        _release(connection_of(tx, "release_conversation"), tx.run_id)

    def _line(self, db: Db, conversation_id: str, run_id: str, now: float, queue: bool, holder: str) -> str:
        if queue:
            db.run(
                "INSERT INTO conversation_waiting (run_id, conversation_id, since) VALUES (?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run_id, conversation_id, now),
            )
        return holder

    def _first_waiting(self, db: Db, conversation_id: str, now: float) -> str | None:
        """The turn first in line, once the turns in line that ended or were never stored are gone."""
        while True:
            row = db.one(
                "SELECT run_id, since FROM conversation_waiting WHERE conversation_id = ? "
                "ORDER BY pos LIMIT 1",
                (conversation_id,),
            )
            if row is None or not _gone(db, row["run_id"], row["since"], now):
                return None if row is None else str(row["run_id"])
            db.run("DELETE FROM conversation_waiting WHERE run_id = ?", (row["run_id"],))


def _gone(db: Db, run_id: str, since: float, now: float) -> bool:
    """Whether a turn holds nothing any more: its run ended, or was never stored in ``UNSTORED_AFTER``."""
    row = db.one("SELECT status FROM runs WHERE id = ?", (run_id,))
    if row is None:
        return now - since > UNSTORED_AFTER
    return row["status"] in _ENDED


def _release(db: Db, run_id: str) -> None:
    db.run("DELETE FROM conversation_writers WHERE run_id = ?", (run_id,))
    db.run("DELETE FROM conversation_waiting WHERE run_id = ?", (run_id,))


__all__ = ["COMPONENT", "UNSTORED_AFTER", "TurnOrder"]
