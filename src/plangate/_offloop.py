"""Blocking store work run off the event loop.

For: ``off_loop``, which runs a synchronous call (a commit, a lease renewal, a read that may wait on a lock)
in a worker thread, so that a store waiting on another process's write lock (up to its busy timeout) never
stops the loop that serves other runs, their streams and their heartbeats. Not for: making the store
asynchronous (its calls stay synchronous and thread-safe) or running an engine's own work.

A caller cancelled while the call runs still waits for it to end, then raises ``CancelledError``: whoever
cancelled it never sees its effect land afterwards. What the call did is handed to ``undo`` in that case
(a lease taken for a caller that is gone is given back).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


async def off_loop(call: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``call(*args, **kwargs)`` in a worker thread; see the module docstring for cancellation."""
    return await _shielded(_submit(call, *args, **kwargs), None)


async def off_loop_undone(
    undo: Callable[[_T], object], call: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """``off_loop``, and when the caller was cancelled while ``call`` succeeded, ``undo(result)`` before
    ``CancelledError`` is raised."""
    return await _shielded(_submit(call, *args, **kwargs), undo)


def _submit(call: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> asyncio.Future[_T]:
    # An executor's future, not a task (``asyncio.to_thread`` is one): a loop that cancels all its tasks as
    # it stops never cancels a call before its thread started it, so a lease given back is given back.
    context = contextvars.copy_context()
    bound = functools.partial(context.run, call, *args, **kwargs)
    return asyncio.get_running_loop().run_in_executor(None, bound)


async def _shielded(work: asyncio.Future[_T], undo: Callable[[_T], object] | None) -> _T:
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        while not work.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({work})
        if not work.cancelled() and work.exception() is None and undo is not None:
            undo(work.result())
        raise  # the cancellation is what the caller hears (an error of the call was retrieved above)


__all__ = ["off_loop", "off_loop_undone"]
