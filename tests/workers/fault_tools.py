"""The tools of the worker tests: no-op and slow reads, and a write that counts its own executions.

``record`` is the write whose exactly-once promise the fault tests check (``record_blind`` is the same
write without a ``reconcile`` hook; a label ending in ``-hang`` makes either hang after its effect): each
execution inserts one row into ``fault_writes`` of the test's own PostgreSQL schema (``FAULT_DB``), in one
transaction with nothing else, keyed by the call's idempotency key, with no unique constraint: a write run
twice shows up as two rows. Its ``reconcile(key)`` reads that table, so a worker that takes a run over
after a crash can tell whether the write happened. The table is the tool's own, not the store's.

The table lives in the store's PostgreSQL server only for the tests' convenience: a write to a system of
its own would not see that server restart. So, as a careful client of a database that restarts, an
execution that cannot reach it waits for it (up to a minute), and one cut off after its ``INSERT`` was sent
looks for its own row (by a token of that execution's) before sending it again: one row per execution,
whatever the server does meanwhile.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import psycopg

from plangate.tools import ToolRegistry, ToolResult, current_call, tool

T = TypeVar("T")

_DDL = (
    "CREATE TABLE IF NOT EXISTS fault_writes "
    "(key TEXT NOT NULL, label TEXT NOT NULL, pid INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL, "
    "token TEXT NOT NULL)"
)


def _connect() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(os.environ["FAULT_DB"], autocommit=True)


def prepare_table(url: str) -> None:
    """Make the table (once, before the workers start)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_DDL)


def executions(url: str) -> dict[str, int]:
    """How many times each key's write ran."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT key, count(*) FROM fault_writes GROUP BY key").fetchall()
    return {str(key): int(count) for key, count in rows}


@tool
def noop() -> dict[str, bool]:
    """Do nothing."""
    return {"ok": True}


@tool
async def pause(seconds: float) -> dict[str, float]:
    """Wait a while (a step that takes time)."""
    import asyncio

    await asyncio.sleep(seconds)
    return {"slept": seconds}


@tool
def block(seconds: float) -> dict[str, float]:
    """Work for a while in a thread (a slow step that keeps its worker busy)."""
    time.sleep(seconds)
    return {"worked": seconds}


def _patiently(work: Callable[[psycopg.Connection[tuple[object, ...]]], T]) -> T:
    """``work`` on a new connection, again while the server is restarting (up to a minute)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with _connect() as conn:
                return work(conn)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _reconcile(key: str) -> ToolResult | None:
    query = "SELECT label FROM fault_writes WHERE key = %s LIMIT 1"
    found = _patiently(lambda conn: conn.execute(query, (key,)).fetchone())
    return None if found is None else ToolResult.done(f"recorded {found[0]}")


def _record(label: str) -> str:
    call = current_call()
    key = call.idempotency_key if call is not None and call.idempotency_key else f"nokey:{label}"
    delay = float(os.environ.get("FAULT_WRITE_DELAY", "0"))
    if delay:
        time.sleep(delay)  # a window for a kill between the intent and the receipt
    _insert_once(key, label)
    if label.endswith("-hang"):
        time.sleep(3600)  # done, and never says so: its worker is killed here, between effect and receipt
    return f"recorded {label}"


def _insert_once(key: str, label: str) -> None:
    """One row for this execution, through a server that may be restarting meanwhile."""
    token = uuid.uuid4().hex
    sent = False

    def insert(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        nonlocal sent
        if sent and conn.execute("SELECT 1 FROM fault_writes WHERE token = %s", (token,)).fetchone():
            return  # the cut-off INSERT had committed
        sent = True
        conn.execute(
            "INSERT INTO fault_writes (key, label, pid, at, token) VALUES (%s, %s, %s, %s, %s)",
            (key, label, os.getpid(), time.time(), token),
        )

    _patiently(insert)


@tool(effect="write", reconcile=_reconcile)
def record(label: str) -> str:
    """Record that this write ran (one row per execution)."""
    return _record(label)


@tool(effect="write")
def record_blind(label: str) -> str:
    """Record that this write ran, with no way to tell afterwards whether it did (no reconcile hook)."""
    return _record(label)


registry = ToolRegistry([noop, pause, block, record, record_blind])
