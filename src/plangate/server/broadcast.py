"""Fan-out of the store's commits to the event streams of one process.

For: ``Broadcaster``, which listens to the store (``Store.subscribe``) and hands each committed event, encoded
once, to every subscriber of its run, each through a queue of its own. Not for: replaying stored events or
speaking SSE (``routes/events.py`` does both, using a ``Subscription``).

Nothing is ever dropped because a client is slow: the producer (the committing code) only appends to each
subscriber's queue and never waits. A subscriber that falls more than ``max_pending`` commits behind gives
up its backlog and is marked ``behind``; it then reads what it missed from the store, where every event was
committed before it was announced here. Memory stays bounded and no event is lost.

Commits can be announced out of order when they come from several threads; a subscriber orders them by
``seq`` and fills any gap from the store (``routes/events.py``). The broadcaster also hears the commits other
processes and machines make, where the store can tell (PostgreSQL's ``LISTEN/NOTIFY``: ``subscribe(…,
remote=True)``); elsewhere (SQLite) streams pick those up from the store at each heartbeat.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sse_starlette import ServerSentEvent

from plangate.events import Event
from plangate.server._public import public_event_json
from plangate.store import Commit, RunStatus, Store


@dataclass(frozen=True, slots=True)
class WireEvent:
    """An event as an SSE stream sends it.

    Attributes:
        seq: the event's ``seq``, also its SSE id.
        frame: the whole SSE message (``id``, ``event``, ``data`` lines), encoded once for every stream.
    """

    seq: int
    frame: bytes

    @classmethod
    def of(cls, event: Event) -> WireEvent:
        """Encode a stored event as clients see it (``_public``); its JSON has no raw newline, so it fits
        one ``data:`` line."""
        return cls(event.seq, sse_frame(event.type, public_event_json(event), id=event.seq))


def sse_frame(event: str, data: str, *, id: int | None = None) -> bytes:
    """One SSE message: ``id:`` (when given), ``event:``, ``data:`` lines, each ended by ``\\n``."""
    return ServerSentEvent(data, event=event, id=None if id is None else str(id), sep="\n").encode()


@dataclass(frozen=True, slots=True)
class Notice:
    """One commit of one run, as subscribers receive it."""

    events: tuple[WireEvent, ...]
    status: RunStatus | None


class Subscription:
    """One subscriber's queue of commits of one run.

    Attributes:
        run_id: the run listened to.
        behind: set when the backlog was dropped; the reader must catch up from the store.
        ticked: set by the broadcaster's heartbeat; the reader sends a heartbeat (and catches up).
    """

    def __init__(self, broadcaster: Broadcaster, run_id: str, max_pending: int) -> None:
        self.run_id = run_id
        self.behind = False
        self.ticked = False
        self._broadcaster = broadcaster
        self._pending: deque[Notice] = deque()
        self._max_pending = max_pending
        self._ready = asyncio.Event()
        self._closed = False

    def push(self, notice: Notice) -> None:
        """Queue a commit (called on the event loop's thread)."""
        if self._closed:
            return
        if len(self._pending) >= self._max_pending:
            self._pending.clear()
            self.behind = True
        else:
            self._pending.append(notice)
        self._ready.set()

    def tick(self) -> None:
        """The heartbeat: wake the reader even though nothing was committed."""
        self.ticked = True
        self._ready.set()

    async def next(self) -> list[Notice]:
        """Every queued commit, oldest first, once there is one; empty when ``ticked`` or ``behind`` was set
        with nothing queued.

        Taking all of them at once lets a reader that fell behind a burst (a model streaming its reply,
        one commit per delta) catch up in one write.
        """
        # No timer per wait: one heartbeat task wakes every subscriber, which keeps a delivery cheap.
        while not self._pending and not self.behind and not self.ticked:
            self._ready.clear()
            await self._ready.wait()
        found = list(self._pending)
        self._pending.clear()
        return found

    def close(self) -> None:
        """Stop listening; queued commits are discarded."""
        if not self._closed:
            self._closed = True
            self._pending.clear()
            self._broadcaster.remove(self)


class Broadcaster:
    """Announces each commit of a store to the subscribers of its run, on one event loop, and wakes every
    subscriber once per ``heartbeat``.

    Args:
        store: the store whose commits are announced (those made through this store object, and those of
            other processes where the store can tell).
        heartbeat: seconds between two heartbeats.
        max_pending: how many commits a subscriber may fall behind before it is sent back to the store.
    """

    def __init__(self, store: Store, *, heartbeat: float = 5.0, max_pending: int = 10_000) -> None:
        self._store = store
        self._heartbeat = heartbeat
        self._max_pending = max_pending
        self._subscribers: dict[str, set[Subscription]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start listening to the store and beating; call on the event loop that serves the streams."""
        if self._unsubscribe is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._unsubscribe = self._store.subscribe(self._on_commit, remote=True)
        self._ticker = self._loop.create_task(self._beat())

    async def stop(self) -> None:
        """Stop listening and beating; existing subscriptions hear nothing more."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.wait({self._ticker})
            self._ticker = None

    def subscribe(self, run_id: str) -> Subscription:
        """A new subscription to ``run_id``'s commits, starting with the next one (call on the loop)."""
        subscription = Subscription(self, run_id, self._max_pending)
        self._subscribers.setdefault(run_id, set()).add(subscription)
        return subscription

    def remove(self, subscription: Subscription) -> None:
        """Forget a subscription (``Subscription.close`` calls this)."""
        found = self._subscribers.get(subscription.run_id)
        if found is not None:
            found.discard(subscription)
            if not found:
                del self._subscribers[subscription.run_id]

    def subscribers(self) -> int:
        """Open event streams, of every run."""
        return sum(len(streams) for streams in self._subscribers.values())

    def subscriber_count(self, run_id: str) -> int:
        """How many subscriptions listen to ``run_id``."""
        return len(self._subscribers.get(run_id, ()))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat)
            for listeners in list(self._subscribers.values()):
                for subscription in tuple(listeners):
                    subscription.tick()

    def _on_commit(self, commit: Commit) -> None:
        # Called by the store after the commit (in the committing thread, or the store's listener thread for
        # another process's commit): events are stored before sent.
        if self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._deliver(commit)
        else:
            try:
                self._loop.call_soon_threadsafe(self._deliver, commit)
            except RuntimeError:
                pass  # the loop is closed: the server is shutting down and nobody is listening

    def _deliver(self, commit: Commit) -> None:
        listeners = self._subscribers.get(commit.run_id)
        if not listeners:
            return
        # Encoded once per commit, whatever the number of subscribers.
        notice = Notice(tuple(WireEvent.of(event) for event in commit.events), commit.status)
        for subscription in tuple(listeners):
            subscription.push(notice)


__all__ = ["Broadcaster", "Notice", "Subscription", "WireEvent", "sse_frame"]
