"""Requests per minute, per owner, counted in the store so that every server on it holds one limit.

For: ``RequestCounts`` (one minute's count per owner, in a table of its own: the
``limits`` component) and ``LimitedOwnerDep``, the owner of a request that counts against its limit
(``POST /v1/runs``, ``POST /v1/ask``, interaction answers): over it, a 429 with ``Retry-After`` (the seconds
to the next minute) and nothing done. The limit is the owner's ``requests_per_minute`` (``[limits]``, its
``[limits.owners.NAME]``, or what ``plangate owner set`` stored: ``plangate.runs.quotas``). Not for: body
sizes (``_limits.py``) or the other limits (runs at once, daily budgets: ``plangate.runs.quotas``).

A minute is a fixed window (``floor(now / 60)``); each request adds one to its owner's count of the minute in
one statement (an insert that adds on a taken key), so of N racing requests exactly ``limit`` pass, whichever
server they reach.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Depends

from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem
from plangate.store import Store
from plangate.store.ddl import INTEGER, REAL, TEXT, Column, Create, Table
from plangate.store.repository import Component, database_of, register

WINDOW = 60.0
"""Seconds in a window: a minute."""
KEPT = 2
"""Earlier minutes kept besides the current one (what an operator can look at), removed after."""

COUNTS = Table(
    "request_counts",
    (Column("owner", TEXT), Column("minute", REAL), Column("count", INTEGER)),
    primary_key=("owner", "minute"),
)
COMPONENT = register(
    Component(
        "limits",
        (
            # 1: each owner's requests in each minute (older minutes removed as new ones start)
            (Create(COUNTS),),
        ),
    )
)


class RequestCounts:
    """Each owner's requests per minute in ``store``."""

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def hit(self, owner: str, limit: int) -> float | None:
        """Count a request of ``owner``; None when it is within ``limit``, else the seconds until the next
        minute, when it would be."""
        now = self._database.now()
        minute = math.floor(now / WINDOW) * WINDOW
        with self._database.writing("count_request") as db:
            db.run(
                "INSERT INTO request_counts (owner, minute, count) VALUES (?, ?, 1) "
                "ON CONFLICT (owner, minute) DO UPDATE SET count = request_counts.count + 1",
                (owner, minute),
            )
            row = db.one("SELECT count FROM request_counts WHERE owner = ? AND minute = ?", (owner, minute))
            count = 0 if row is None else int(row["count"])
            if count == 1:  # the owner's first request of the minute: its minutes before the last two go
                db.run(
                    "DELETE FROM request_counts WHERE owner = ? AND minute < ?",
                    (owner, minute - KEPT * WINDOW),
                )
        if count <= limit:
            return None
        return max(minute + WINDOW - now, 0.001)


def limited_owner(services: ServicesDep, owner: OwnerDep) -> str:
    """The request's owner, once the request is counted against its limit (a thread-pool function: the
    count is a store write).

    Raises:
        Problem: 429 with ``Retry-After`` when the owner made its limit's worth of requests this minute.
    """
    limit = services.limits(owner).requests_per_minute
    if limit is None:
        return owner
    wait = RequestCounts(services.store).hit(owner, limit)
    if wait is None:
        return owner
    seconds = math.ceil(wait)
    raise Problem(
        429,
        "rate-limited",
        f"owner {owner!r} made {limit} request(s) this minute, its limit; try again in {seconds} s",
        headers={"Retry-After": str(seconds)},
    )


LimitedOwnerDep = Annotated[str, Depends(limited_owner)]

__all__ = ["COMPONENT", "WINDOW", "LimitedOwnerDep", "RequestCounts", "limited_owner"]
