"""``GET /v1/runs/{id}/events``: a run's events as Server-Sent Events (replay, then live), or as a JSON page.

For: the one stream clients follow a run with. Each SSE message has ``id:`` the event's ``seq``, ``event:``
its type and ``data:`` its JSON. The stream replays the stored events after ``Last-Event-ID`` (or
``?after=``), then follows the run live; every ``heartbeat`` seconds (5 by default) it sends a
``heartbeat`` message (no id; its data is typed, ``{"type": "heartbeat", ...}``, with no ``seq``); once the
run reaches a terminal status it sends ``end`` with that status and its outcome, and closes. A ``waiting``
run keeps its stream open. Not for: producing events (the engines) or fanning commits
out (``broadcast.py``).

Exactly once, in order: the stream subscribes to the run's commits *before* it reads the store, so an event
committed meanwhile is either in the replay or in the queue (or both: the ``seq`` removes the duplicate).
A gap in the live sequence (commits announced out of order by several threads, a backlog dropped for a
slow client, a commit made by another process) is filled from the store, where every event is committed
before it is announced.

Every store read runs in the thread pool (``run_in_threadpool``), never on the event loop: a store waiting on
another process's write lock must not hold up the other streams, their heartbeats, or the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from pydantic import JsonValue
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from plangate.server._deps import OwnerDep, Services, ServicesDep
from plangate.server._problems import Problem
from plangate.server._public import public_event_dict, public_outcome
from plangate.server.broadcast import Notice, Subscription, WireEvent, sse_frame
from plangate.store import TERMINAL_STATUSES, RunRecord, Store

router = APIRouter(prefix="/v1/runs", tags=["events"])

_REPLAY_PAGE = 500


@router.get(
    "/{run_id}/events",
    response_model=None,
    summary="Stream a run's events (SSE), or read a page of them (?format=json)",
)
async def run_events(
    run_id: str,
    services: ServicesDep,
    owner: OwnerDep,
    after: Annotated[str | None, Query(description="Replay the events after this seq.")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    format: Annotated[Literal["sse", "json"], Query(description="`json` for one page, no stream.")] = "sse",
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size of `format=json`.")] = 1000,
) -> EventSourceResponse | JSONResponse:
    """The events with ``seq`` above the cursor (``Last-Event-ID`` wins over ``after``); 400 for a cursor
    that is not a seq of this run."""
    store = services.store
    run = await run_in_threadpool(store.get_run, run_id, owner=owner)
    cursor = _cursor(last_event_id if last_event_id is not None else after, run)
    if format == "json":
        return JSONResponse(await run_in_threadpool(_page, store, run.id, cursor, limit))
    subscription = services.broadcaster.subscribe(run.id)
    return EventSourceResponse(
        _stream(services, run.id, cursor, subscription),
        ping=0,  # the stream sends its own heartbeat messages, which also catch up from the store
        sep="\n",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _page(store: Store, run_id: str, after: int, limit: int) -> dict[str, JsonValue]:
    events = store.events(run_id, after=after, limit=limit)
    return {"items": [public_event_dict(event) for event in events], "last_seq": store.last_seq(run_id)}


def _cursor(value: str | None, run: RunRecord) -> int:
    if value is None or value == "":
        return 0
    text = value.strip()
    if not text.isdigit() or not text.isascii() or len(text) > 18:
        raise Problem(
            400, "invalid-cursor", f"expected the cursor to be an event seq (0 or more); found {value!r}"
        )
    seq = int(text)
    if seq > run.last_seq:
        raise Problem(
            400,
            "invalid-cursor",
            f"the cursor {seq} is past the last event of run {run.id!r} ({run.last_seq})",
        )
    return seq


async def _stream(
    services: Services, run_id: str, after: int, subscription: Subscription
) -> AsyncIterator[bytes]:
    """Replay, then follow, until the run ends or the client leaves."""
    cursor = _Cursor(services.store, run_id, after)
    try:
        while True:
            frames = await run_in_threadpool(cursor.from_store, _REPLAY_PAGE)
            if frames:
                yield b"".join(frames)
            if len(frames) < _REPLAY_PAGE:
                break
        ended = await run_in_threadpool(cursor.ended)
        while not ended:
            notices = await subscription.next()
            if not notices:
                # A heartbeat (or a dropped backlog): catch up from the store, which also brings in commits
                # made by other processes, then say the stream is alive.
                ticked = subscription.ticked
                subscription.ticked = subscription.behind = False
                frames = await run_in_threadpool(cursor.from_store)
                if frames:
                    yield b"".join(frames)
                ended = await run_in_threadpool(cursor.ended)
                if ticked and not ended:
                    yield cursor.heartbeat()
                continue
            frames = []
            for notice in notices:
                # Filling a gap reads the store: only then does the stream leave the event loop.
                live = cursor.live(notice) if not cursor.has_gap(notice) else None
                frames.extend(live if live is not None else await run_in_threadpool(cursor.live, notice))
            if frames:
                yield b"".join(frames)  # one write for everything committed since the last one
            ended = any(notice.status in TERMINAL_STATUSES for notice in notices)
        yield b"".join(await run_in_threadpool(cursor.end))
    finally:
        subscription.close()


class _Cursor:
    """Where a stream stands (``sent``: the last ``seq`` sent to the client), and the frames that move it."""

    def __init__(self, store: Store, run_id: str, sent: int) -> None:
        self.store = store
        self.run_id = run_id
        self.sent = sent

    def from_store(self, limit: int | None = None) -> list[bytes]:
        """The stored events after ``sent`` (at most ``limit``), now counted as sent."""
        events = self.store.events(self.run_id, after=self.sent, limit=limit)
        if events:
            self.sent = events[-1].seq
        return [WireEvent.of(event).frame for event in events]

    def live(self, notice: Notice) -> list[bytes]:
        """A commit's events not sent yet, in order, with any gap before them filled from the store."""
        frames: list[bytes] = []
        for wire in notice.events:
            if wire.seq <= self.sent:
                continue
            if wire.seq > self.sent + 1:
                frames.extend(self.from_store(wire.seq - self.sent - 1))
            frames.append(wire.frame)
            self.sent = wire.seq
        return frames

    def has_gap(self, notice: Notice) -> bool:
        """Whether events before this commit's are still unsent (``live`` then reads them from the store)."""
        unsent = [wire.seq for wire in notice.events if wire.seq > self.sent]
        return bool(unsent) and unsent[0] > self.sent + 1

    def ended(self) -> bool:
        """Whether the run has reached a terminal status."""
        return self.store.get_run(self.run_id).status in TERMINAL_STATUSES

    def end(self) -> list[bytes]:
        """Whatever is still unsent, then the ``end`` message with the run's final status and outcome."""
        frames = self.from_store()
        run = self.store.get_run(self.run_id)
        data = {"type": "end", "run_id": run.id, "status": run.status, "outcome": public_outcome(run.outcome)}
        frames.append(sse_frame("end", json.dumps(data, separators=(",", ":"))))
        return frames

    def heartbeat(self) -> bytes:
        """A ``heartbeat`` message (no id, so a reconnecting client's cursor stays on the last event)."""
        data = {"type": "heartbeat", "run_id": self.run_id, "at": time.time(), "last_seq": self.sent}
        return sse_frame("heartbeat", json.dumps(data, separators=(",", ":")))


__all__ = ["router"]
