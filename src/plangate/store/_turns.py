"""Copilot conversations, turns and attempts in a store (either backend).

For: the rows of the ``conversations``, ``turns`` and ``attempts`` tables and the SQL that reads and writes
them, on a connection the store (or a transaction, for ``record_turn``) hands in. A turn is written once,
whole, with its attempts: there is no update of a turn, so none is ever half-stored. The statements are the
shared ``?`` form both backends accept. Not for: what a turn means (``plangate.copilot``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import TypeVar, get_args

from pydantic import JsonValue

from plangate.errors import ConfigError, NotFoundError
from plangate.store import _checks as check
from plangate.store._rows import Row, RowMapper
from plangate.store._sql import Db
from plangate.store.base import AttemptRecord, Conversation, ConversationPage, TurnRecord, TurnStatus

TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
_T = TypeVar("_T")

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
TURN_COLUMNS = _TURNS.select
ATTEMPT_COLUMNS = _ATTEMPTS.select
_CURSOR = re.compile(r"c([0-9.e+-]+):([0-9]+)")


def new_conversation_id() -> str:
    """A fresh conversation id."""
    return "conv_" + secrets.token_urlsafe(12)


def create_conversation(
    db: Db,
    clock: Callable[[], float],
    owner: str,
    title: str,
    conversation_id: str | None,
    where: str,
) -> Conversation:
    """Insert a conversation; the caller commits.

    Raises:
        ConfigError: a bad argument, or the id is taken (nothing was written).
    """
    check.text(owner, "create_conversation: owner", empty=False)
    check.text(title, "create_conversation: title")
    new_id = (
        new_conversation_id()
        if conversation_id is None
        else check.text(conversation_id, "create_conversation: conversation_id", empty=False)
    )
    now = clock()
    inserted = db.run(
        "INSERT INTO conversations (id, owner, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (new_id, owner, title, now, now),
    )
    if inserted != 1:
        raise ConfigError(f"create_conversation: a conversation {new_id!r} exists already in {where}")
    return get_conversation(db, new_id, None, where)


def get_conversation(db: Db, conversation_id: str, owner: str | None, where: str) -> Conversation:
    """The conversation with that id.

    Raises:
        NotFoundError: none, or it is not ``owner``'s.
    """
    row = db.one(f"{_CONVERSATION} WHERE c.id = ?", (conversation_id,))
    if row is None or (owner is not None and row["owner"] != owner):
        scope = f" for owner {owner!r}" if owner is not None else ""
        raise NotFoundError(f"no conversation {conversation_id!r}{scope} in the store at {where}")
    return _conversation(row)


def list_conversations(db: Db, owner: str | None, limit: int, cursor: str | None) -> ConversationPage:
    """One page of conversations, most recently updated first."""
    limit = check.page_limit(limit)
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
    rows = db.all(
        f"{_CONVERSATION}{where} ORDER BY c.updated_at DESC, c.pos DESC LIMIT ?", (*params, limit + 1)
    )
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = page[-1]
        next_cursor = f"c{float(last['updated_at'])!r}:{last['pos']}"
    return ConversationPage(items=[_conversation(row) for row in page], next_cursor=next_cursor)


def _attempt_values(turn_id: str, attempt: AttemptRecord) -> tuple[object, ...]:
    formula = None if attempt.formula is None else check.json_object(attempt.formula, "record_turn: attempts")
    return (
        turn_id,
        attempt.n,
        attempt.status,
        attempt.reason,
        check.json_object(attempt.review, "record_turn: attempts.review"),
        formula,
        attempt.run_id,
        attempt.answer,
        check.json_object(attempt.result, "record_turn: attempts.result"),
        _json_list(attempt.issues, "record_turn: attempts.issues"),
        attempt.started_at,
        attempt.finished_at,
    )


def record_turn(db: Db, run_id: str, turn: TurnRecord) -> TurnRecord:
    """Insert a finished turn and its attempts; the caller (a transaction on ``run_id``) commits.

    Raises:
        ConfigError: not a ``TurnRecord``, another run's turn, a taken id, or attempts not numbered 1, 2, …
        NotFoundError: its conversation does not exist.
    """
    if not isinstance(turn, TurnRecord):
        raise ConfigError(f"record_turn: expected a TurnRecord; found {type(turn).__name__}")
    if turn.run_id != run_id:
        raise ConfigError(
            f"record_turn: the turn belongs to run {turn.run_id!r}; this transaction is on run {run_id!r}"
        )
    numbers = [attempt.n for attempt in turn.attempts]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ConfigError(f"record_turn: attempts: expected them numbered 1, 2, …; found {numbers}")
    result = check.json_object(turn.result, "record_turn: result")
    formula = None if turn.formula is None else check.json_object(turn.formula, "record_turn: formula")
    attempts = [_attempt_values(turn.id, attempt) for attempt in turn.attempts]
    if db.one("SELECT 1 FROM conversations WHERE id = ?", (turn.conversation_id,)) is None:
        raise NotFoundError(f"record_turn: no conversation {turn.conversation_id!r}")
    if db.one("SELECT 1 FROM turns WHERE id = ? OR run_id = ?", (turn.id, run_id)) is not None:
        raise ConfigError(f"record_turn: the turn {turn.id!r} (or one of run {run_id!r}) is stored already")
    db.run(
        f"INSERT INTO turns ({TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            turn.id,
            turn.conversation_id,
            run_id,
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
            f"INSERT INTO attempts ({ATTEMPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values
        )
    # The conversation's time moves on to the turn's end, never back (CASE: both backends speak it).
    db.run(
        "UPDATE conversations SET updated_at = CASE WHEN updated_at < ? THEN ? ELSE updated_at END "
        "WHERE id = ?",
        (turn.finished_at, turn.finished_at, turn.conversation_id),
    )
    return turn


def get_turn(db: Db, turn_id: str, owner: str | None, where: str) -> TurnRecord:
    """The stored turn with that id.

    Raises:
        NotFoundError: none, or it is not ``owner``'s.
    """
    row = db.one(f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,))
    if row is None or (owner is not None and row["owner"] != owner):
        scope = f" for owner {owner!r}" if owner is not None else ""
        raise NotFoundError(f"no turn {turn_id!r}{scope} in the store at {where}")
    return _turns(db, [row])[0]


def find_turn(db: Db, run_id: str) -> TurnRecord | None:
    """The turn stored by the ask run ``run_id``, or None."""
    row = db.one(f"SELECT {TURN_COLUMNS} FROM turns WHERE run_id = ?", (run_id,))
    return None if row is None else _turns(db, [row])[0]


def list_turns(
    db: Db, conversation_id: str, owner: str | None, last: int | None, where: str
) -> list[TurnRecord]:
    """The conversation's turns, oldest first (only the ``last`` ones when given).

    Raises:
        NotFoundError: no such conversation (for this owner).
    """
    get_conversation(db, conversation_id, owner, where)
    query = f"SELECT {TURN_COLUMNS}, pos FROM turns WHERE conversation_id = ? ORDER BY pos DESC"
    params: tuple[object, ...] = (conversation_id,)
    if last is not None:
        query += " LIMIT ?"
        params = (*params, check.integer(last, "list_turns: last", minimum=1))
    return _turns(db, list(reversed(db.all(query, params))))


def _turns(db: Db, rows: list[Row]) -> list[TurnRecord]:
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" * len(ids))
    found = db.all(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE turn_id IN ({marks}) ORDER BY turn_id, n", ids
    )
    attempts: dict[str, list[AttemptRecord]] = {}
    for row in found:
        attempts.setdefault(row["turn_id"], []).append(_attempt(row))
    return [_turn(row, attempts.get(row["id"], [])) for row in rows]


def _conversation(row: Row) -> Conversation:
    return _CONVERSATIONS.read(row)


def _turn(row: Row, attempts: list[AttemptRecord]) -> TurnRecord:
    return _TURNS.read(row, attempts=attempts)


def _attempt(row: Row) -> AttemptRecord:
    return _ATTEMPTS.read(row)


def _json_list(items: list[dict[str, JsonValue]], where: str) -> str:
    return "[" + ",".join(check.json_object(item, where) for item in items) + "]"


__all__ = [
    "TURN_STATUSES",
    "create_conversation",
    "find_turn",
    "get_conversation",
    "get_turn",
    "list_conversations",
    "list_turns",
    "new_conversation_id",
    "record_turn",
]
