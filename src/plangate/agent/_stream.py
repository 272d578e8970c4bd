"""``AgentStream``: a run's events, yielded as they are committed, while the run advances.

For: ``Agent.stream``. The stream listens to the store's commits for its run (events are stored before
they are yielded, SPEC §7), drives the run in a task of the caller's event loop, and keeps the final
``AgentResult`` in ``result``. Not for: replaying the events of an older run (``store.events``) or serving
them over HTTP (the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

from plangate.agent.result import AgentResult
from plangate.errors import UsageError
from plangate.events import Event
from plangate.store import Commit, Store


class AgentStream:
    """The events of one run, in ``seq`` order, as the run commits them; iterate with ``async for``.

    Attributes:
        run_id: the run being streamed (known before the first event).
        result: the run's ``AgentResult`` once iteration ended (None before, or if it was left early).
    """

    def __init__(self, store: Store, run_id: str, advance: Callable[[], Awaitable[AgentResult]]) -> None:
        self.run_id = run_id
        self.result: AgentResult | None = None
        self._store = store
        self._advance = advance
        self._used = False

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._used:
            raise UsageError("an AgentStream can be iterated only once; found a second iteration")
        self._used = True
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        home = threading.get_ident()

        def on_commit(commit: Commit) -> None:
            if commit.run_id != self.run_id:
                return
            for event in commit.events:
                if threading.get_ident() == home:
                    queue.put_nowait(event)
                else:
                    loop.call_soon_threadsafe(queue.put_nowait, event)

        unsubscribe = self._store.subscribe(on_commit)
        task = asyncio.ensure_future(self._advance())
        try:
            while True:
                while not queue.empty():
                    yield queue.get_nowait()
                if task.done():
                    break
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            self.result = task.result()
        finally:
            unsubscribe()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


__all__ = ["AgentStream"]
