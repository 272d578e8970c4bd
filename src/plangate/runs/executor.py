"""Where runs are advanced: here, one asyncio task per root run, or handed to a queue that workers take.

For: ``Local``, the tasks of the runs this process advances — at most one per root, continued once more
when asked while it ran (so an answer that arrived meanwhile is never missed), stopped on cancel and on
shutdown — and ``Queue``, what the facade needs from a queue of workers (``plangate.workers.RunQueue``
implements it). The facade (``facade.py``) composes them: runs of a kind workers advance go to the queue
when there is one, everything else runs here. Not for: what advancing does (the engines) or the decisions
about which runs to advance (the facade).

A task's failure is logged here, never raised to whoever started it: the run's state is in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from plangate.errors import PlangateError, RunLeased
from plangate.runs.tools import ToolsDiffer

logger = logging.getLogger("plangate.runs")

Work = Callable[[], Coroutine[Any, Any, Any]]
"""Makes the coroutine that advances a run (made only when its task starts)."""


class Queue(Protocol):
    """A queue of "advance run R" messages that workers take."""

    def enqueue(self, run_id: str) -> bool:
        """Send one message; False when the broker could not be reached (the reaper sends it later)."""
        ...

    def close(self) -> None:
        """Close the connection to the broker."""
        ...


class Local:
    """The tasks of the runs this process advances, one per root."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._again: dict[str, Work] = {}
        # continuations asked for while a run's task ran, between that task's end and the next one's start
        self._continuing: dict[str, asyncio.Task[None]] = {}
        self._closing = False

    @property
    def closing(self) -> bool:
        """Whether the process is shutting down (nothing new starts)."""
        return self._closing

    def active(self, root: str) -> bool:
        """Whether the root has a task now."""
        task = self._tasks.get(root)
        return task is not None and not task.done()

    def advance(self, root: str, work: Work) -> None:
        """Advance the root in a task of its own; if it has one already, once more when that one ends."""
        if self._closing:
            return
        if self.active(root):
            self._again[root] = work
            return
        self.adopt(root, asyncio.get_running_loop().create_task(work()))

    def adopt(self, root: str, task: asyncio.Task[Any]) -> None:
        """Make ``task`` the root's task (a turn's job, an advance started elsewhere)."""
        self._tasks[root] = task
        task.add_done_callback(lambda done: self._finished(root, done))

    async def launch(
        self,
        root: str,
        coroutine: Coroutine[Any, Any, Any],
        ready: asyncio.Future[None],
        unready: PlangateError,
    ) -> None:
        """Run ``coroutine`` as the root's task and wait until it says it is ``ready`` (its run stored); the
        task is adopted then, even if the caller stops waiting (a client that disconnects).

        Raises:
            Exception: whatever the coroutine raised before it was ready (nothing was written).
            PlangateError: ``unready``, when it ended before it was ready.
        """
        task = asyncio.get_running_loop().create_task(coroutine)
        ready.add_done_callback(lambda done: None if done.cancelled() else self.adopt(root, task))
        await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done():
            return
        ready.cancel()
        task.result()  # raises what the coroutine raised
        raise unready

    async def stop(self, root: str) -> None:
        """Stop the root's task, if it has one, and forget any continuation asked for."""
        self._again.pop(root, None)
        task = self._tasks.get(root)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    async def wait_idle(self, root: str) -> None:
        """Wait until the root's task (if any) has ended, including any continuation it asked for."""
        while (task := self._tasks.get(root) or self._continuing.get(root)) is not None:
            await asyncio.wait({task})
            await asyncio.sleep(0)  # let the done callback schedule a continuation, if one was asked for

    async def close(self) -> None:
        """Stop every task; the runs stay as the store has them, and a later start recovers them."""
        self._closing = True
        tasks = [*self._tasks.values(), *self._continuing.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def _finished(self, root: str, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(root) is task:
            del self._tasks[root]
        if not task.cancelled() and (error := task.exception()) is not None:
            if isinstance(error, RunLeased | ToolsDiffer):
                logger.warning("run %s is not advanced here: %s", root, error)
            else:
                logger.error("run %s stopped on an error: %s: %s", root, type(error).__name__, error)
        work = self._again.pop(root, None)
        if work is not None and not self._closing:
            again = asyncio.get_running_loop().create_task(self._continue(root, work))
            self._continuing[root] = again
            again.add_done_callback(lambda done: self._continued(root, done))

    async def _continue(self, root: str, work: Work) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            self.advance(root, work)

    def _continued(self, root: str, task: asyncio.Task[None]) -> None:
        if self._continuing.get(root) is task:
            del self._continuing[root]


__all__ = ["Local", "Queue", "Work"]
