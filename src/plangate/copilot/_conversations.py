"""Copilot conversations, their turns and each turn's attempts in the store: their records and repository.

For: ``Conversations`` (start, read and list conversations; store a finished turn with its attempts in the
``ask`` run's transaction; read turns back), the records it returns and the migrations of its tables
(``COMPONENT``), on either backend through the store's database (``plangate.store.repository``). A turn is
written once, whole, with its attempts: there is no update of a turn, so none is ever half-stored. Not for:
what a turn means or decides (``copilot/turn.py``, ``copilot/policy.py``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from pydantic import JsonValue

from plangate.errors import ConfigError, NotFoundError
from plangate.events import JsonObject
from plangate.store import Record, Store, Transaction, retention
from plangate.store.ddl import FromCore
from plangate.store.repository import (
    Component,
    Db,
    Row,
    RowMapper,
    checks,
    connection_of,
    database_of,
    register,
)
from plangate.vocab import TurnStatus

COMPONENT = register(
    Component(
        "conversations",
        (
            # 1: the conversations, turns and attempts tables core migration 6 made (store/_schema.py)
            (FromCore(6, ("conversations", "turns", "attempts")),),
        ),
    )
)


class Conversation(Record):
    """A thread of copilot turns that belong together (later turns see the earlier ones as history).

    Attributes:
        id: ``conv_…``, random.
        title: the first question, clipped; may be empty.
        turns: how many turns it holds.
        updated_at: when its last turn was stored (its creation time before that).
    """

    id: str
    owner: str
    title: str
    turns: int
    created_at: float
    updated_at: float


class ConversationPage(Record):
    """One page of ``list_conversations``, most recently updated first; ``next_cursor`` for the next."""

    items: list[Conversation]
    next_cursor: str | None


class AttemptRecord(Record):
    """One attempt of a turn, as stored: how it ended, why, what the review found, what it built and ran.

    Attributes:
        n: 1 for the first attempt, 2 for the retry.
        review: ``{severity, verdict, signals: [{kind, detail, severity}], note}``.
        formula: the formula it built (its JSON form), or None.
        run_id: the formula run it started, or None.
        result: ``{columns, rows}``: the rows its answer is based on.
        issues: the check's issues left when it was final (``{level, code, path, message}``).
    """

    n: int
    status: TurnStatus
    reason: str
    review: JsonObject
    formula: JsonObject | None
    run_id: str | None
    answer: str
    result: JsonObject
    issues: list[JsonObject]
    started_at: float
    finished_at: float


class TurnRecord(Record):
    """A finished copilot turn with all its attempts; stored whole, in one transaction, or not at all.

    Attributes:
        id: ``turn_…``.
        run_id: the ``ask`` run that carried it (its events are the turn's ops, review and outcome).
        result: ``{columns, rows}``: the rows the answer is based on (empty lists when none).
        formula: the formula of the attempt the turn's answer comes from, or None.
        source: the data source the question was about.
        model: the spec of the model that generated the formula.
    """

    id: str
    conversation_id: str
    run_id: str
    owner: str
    question: str
    status: TurnStatus
    reason: str
    answer: str
    result: JsonObject
    formula: JsonObject | None
    source: str
    model: str
    created_at: float
    finished_at: float
    attempts: list[AttemptRecord]


_CONVERSATION = (
    "SELECT c.pos, c.id, c.owner, c.title, c.created_at, c.updated_at, "
    "(SELECT count(*) FROM turns t WHERE t.conversation_id = c.id) AS turns FROM conversations c"
)
_TURNS = RowMapper(
    TurnRecord, lambda row: f"turn {row['id']!r}", values=("result", "formula"), given=("attempts",)
)
_ATTEMPTS = RowMapper(
    AttemptRecord,
    lambda row: f"attempt {row['n']} of turn {row['turn_id']!r}",
    values=("review", "formula", "result", "issues"),
    also=("turn_id",),
)
_CONVERSATIONS = RowMapper(Conversation, lambda row: f"conversation {row['id']!r}")
_CURSOR = re.compile(r"c([0-9.e+-]+):([0-9]+)")


def new_conversation_id() -> str:
    """A fresh conversation id."""
    return "conv_" + secrets.token_urlsafe(12)


class Conversations:
    """The conversations and turns of a store.

    Args:
        store: a store opened by plangate; its conversations tables are brought up to date the first time
            (make the repository before a transaction's ``with`` block, not inside it).

    Raises:
        ConfigError: ``store`` offers no database.
        SchemaVersionError: a newer plangate wrote the conversations tables.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def create_conversation(
        self, *, owner: str = "local", title: str = "", conversation_id: str | None = None
    ) -> Conversation:
        """Start a conversation; its id is random (``conv_…``) unless ``conversation_id`` is given.

        Raises:
            ConfigError: a bad argument, or a conversation with that id exists already.
        """
        checks.text(owner, "create_conversation: owner", empty=False)
        checks.text(title, "create_conversation: title")
        new_id = (
            new_conversation_id()
            if conversation_id is None
            else checks.text(conversation_id, "create_conversation: conversation_id", empty=False)
        )
        with self._database.writing("create_conversation") as db:
            now = self._database.now()
            inserted = db.run(
                "INSERT INTO conversations (id, owner, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (new_id, owner, title, now, now),
            )
            if inserted != 1:
                raise ConfigError(
                    f"create_conversation: a conversation {new_id!r} exists already in {self._database.where}"
                )
            return self._conversation(db, new_id, None)

    def get_conversation(self, conversation_id: str, *, owner: str | None = None) -> Conversation:
        """The conversation with that id (NotFoundError if none, or if it is not ``owner``'s)."""
        with self._database.reading("get_conversation") as db:
            return self._conversation(db, conversation_id, owner)

    def list_conversations(
        self, *, owner: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ConversationPage:
        """Conversations, most recently updated first, one page of at most ``limit`` (1..1000)."""
        limit = checks.page_limit(limit)
        clauses: list[str] = []
        params: list[object] = []
        if owner is not None:
            clauses.append("c.owner = ?")
            params.append(owner)
        if cursor is not None:
            found = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
            if found is None:
                raise ConfigError(
                    f"cursor: expected a next_cursor returned by list_conversations; found {cursor!r}"
                )
            updated, pos = float(found.group(1)), int(found.group(2))
            clauses.append("(c.updated_at < ? OR (c.updated_at = ? AND c.pos < ?))")
            params.extend([updated, updated, pos])
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._database.reading("list_conversations") as db:
            rows = db.all(
                f"{_CONVERSATION}{where} ORDER BY c.updated_at DESC, c.pos DESC LIMIT ?", (*params, limit + 1)
            )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit:
            last = page[-1]
            next_cursor = f"c{float(last['updated_at'])!r}:{last['pos']}"
        return ConversationPage(items=[_CONVERSATIONS.read(row) for row in page], next_cursor=next_cursor)

    def record_turn(self, tx: Transaction, turn: TurnRecord) -> TurnRecord:
        """Store a finished turn and its attempts in ``tx``, the transaction of its ``ask`` run, with the
        run's other changes (its outcome); the conversation's ``updated_at`` moves on to the turn's
        ``finished_at`` (never back).

        Raises:
            ConfigError: not a ``TurnRecord``, another run's turn, a turn id stored already, or attempts not
                numbered 1, 2, …
            NotFoundError: no such conversation.
        """
        if not isinstance(turn, TurnRecord):
            raise ConfigError(f"record_turn: expected a TurnRecord; found {type(turn).__name__}")
        run_id = tx.run_id
        if turn.run_id != run_id:
            raise ConfigError(
                f"record_turn: the turn belongs to run {turn.run_id!r}; this transaction is on run {run_id!r}"
            )
        numbers = [attempt.n for attempt in turn.attempts]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ConfigError(f"record_turn: attempts: expected them numbered 1, 2, …; found {numbers}")
        _insert_turn(connection_of(tx, "record_turn"), turn)
        connection_of(tx, "record_turn", touch=True)  # stored: the run's updated_at moves with its commit
        return turn

    def get_turn(self, turn_id: str, *, owner: str | None = None) -> TurnRecord:
        """The stored turn with that id, attempts included (NotFoundError if none, or not ``owner``'s)."""
        with self._database.consistent("get_turn") as db:  # the turn and its attempts as of one moment
            row = db.one(f"SELECT {_TURNS.select} FROM turns WHERE id = ?", (turn_id,))
            if row is None or (owner is not None and row["owner"] != owner):
                scope = f" for owner {owner!r}" if owner is not None else ""
                raise NotFoundError(f"no turn {turn_id!r}{scope} in the store at {self._database.where}")
            return _turns(db, [row])[0]

    def find_turn(self, run_id: str) -> TurnRecord | None:
        """The turn the ``ask`` run ``run_id`` stored, or None while it runs (or if it stored none)."""
        with self._database.consistent("find_turn") as db:
            row = db.one(f"SELECT {_TURNS.select} FROM turns WHERE run_id = ?", (run_id,))
            return None if row is None else _turns(db, [row])[0]

    def list_turns(
        self, conversation_id: str, *, owner: str | None = None, last: int | None = None
    ) -> list[TurnRecord]:
        """The conversation's turns, oldest first; only the ``last`` ones when given.

        Raises:
            NotFoundError: no such conversation (for this owner).
        """
        query = f"SELECT {_TURNS.select}, pos FROM turns WHERE conversation_id = ? ORDER BY pos DESC"
        params: tuple[object, ...] = (conversation_id,)
        if last is not None:
            query += " LIMIT ?"
            params = (*params, checks.integer(last, "list_turns: last", minimum=1))
        with self._database.consistent("list_turns") as db:
            self._conversation(db, conversation_id, owner)
            return _turns(db, list(reversed(db.all(query, params))))

    def _conversation(self, db: Db, conversation_id: str, owner: str | None) -> Conversation:
        row = db.one(f"{_CONVERSATION} WHERE c.id = ?", (conversation_id,))
        if row is None or (owner is not None and row["owner"] != owner):
            scope = f" for owner {owner!r}" if owner is not None else ""
            raise NotFoundError(
                f"no conversation {conversation_id!r}{scope} in the store at {self._database.where}"
            )
        return _CONVERSATIONS.read(row)


def _insert_turn(db: Db, turn: TurnRecord) -> None:
    result = checks.json_object(turn.result, "record_turn: result")
    formula = None if turn.formula is None else checks.json_object(turn.formula, "record_turn: formula")
    attempts = [_attempt_values(turn.id, attempt) for attempt in turn.attempts]
    if db.one("SELECT 1 FROM conversations WHERE id = ?", (turn.conversation_id,)) is None:
        raise NotFoundError(f"record_turn: no conversation {turn.conversation_id!r}")
    if db.one("SELECT 1 FROM turns WHERE id = ? OR run_id = ?", (turn.id, turn.run_id)) is not None:
        raise ConfigError(
            f"record_turn: the turn {turn.id!r} (or one of run {turn.run_id!r}) is stored already"
        )
    db.run(
        f"INSERT INTO turns ({_TURNS.select}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            turn.id,
            turn.conversation_id,
            turn.run_id,
            turn.owner,
            turn.question,
            turn.status,
            turn.reason,
            turn.answer,
            result,
            formula,
            turn.source,
            turn.model,
            turn.created_at,
            turn.finished_at,
        ),
    )
    for values in attempts:
        db.run(
            f"INSERT INTO attempts ({_ATTEMPTS.select}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values
        )
    # The conversation's time moves on to the turn's end, never back (CASE: both backends speak it).
    db.run(
        "UPDATE conversations SET updated_at = CASE WHEN updated_at < ? THEN ? ELSE updated_at END "
        "WHERE id = ?",
        (turn.finished_at, turn.finished_at, turn.conversation_id),
    )


def _attempt_values(turn_id: str, attempt: AttemptRecord) -> tuple[object, ...]:
    formula = (
        None if attempt.formula is None else checks.json_object(attempt.formula, "record_turn: attempts")
    )
    return (
        turn_id,
        attempt.n,
        attempt.status,
        attempt.reason,
        checks.json_object(attempt.review, "record_turn: attempts.review"),
        formula,
        attempt.run_id,
        attempt.answer,
        checks.json_object(attempt.result, "record_turn: attempts.result"),
        _json_list(attempt.issues, "record_turn: attempts.issues"),
        attempt.started_at,
        attempt.finished_at,
    )


def _turns(db: Db, rows: list[Row]) -> list[TurnRecord]:
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" * len(ids))
    found = db.all(
        f"SELECT {_ATTEMPTS.select} FROM attempts WHERE turn_id IN ({marks}) ORDER BY turn_id, n", ids
    )
    attempts: dict[str, list[AttemptRecord]] = {}
    for row in found:
        attempts.setdefault(row["turn_id"], []).append(_ATTEMPTS.read(row))
    return [_TURNS.read(row, attempts=attempts.get(row["id"], [])) for row in rows]


def _prune_turns(db: Db, run_ids: Sequence[str]) -> int:
    """Remove the turns of the runs ``run_ids`` (a prune's, ``store/retention.py``) with their attempts, and
    the conversations left without a turn by it; how many rows went."""
    marks = ", ".join("?" * len(run_ids))
    turns = db.all(f"SELECT id, conversation_id FROM turns WHERE run_id IN ({marks})", run_ids)
    removed = db.run(
        f"DELETE FROM attempts WHERE run_id IN ({marks}) OR turn_id IN "
        f"(SELECT id FROM turns WHERE run_id IN ({marks}))",
        (*run_ids, *run_ids),
    )
    removed += db.run(f"DELETE FROM turns WHERE run_id IN ({marks})", run_ids)
    for conversation in sorted({row["conversation_id"] for row in turns}):
        removed += db.run(
            "DELETE FROM conversations WHERE id = ? AND NOT EXISTS "
            "(SELECT 1 FROM turns WHERE conversation_id = ?)",
            (conversation, conversation),
        )
    return removed


retention.run_rows("turns", _prune_turns, ("attempts", "turns", "conversations"))


def _json_list(items: list[dict[str, JsonValue]], where: str) -> str:
    return "[" + ",".join(checks.json_object(item, where) for item in items) + "]"


__all__ = [
    "COMPONENT",
    "AttemptRecord",
    "Conversation",
    "ConversationPage",
    "Conversations",
    "TurnRecord",
    "TurnStatus",
    "new_conversation_id",
]
