"""A large plan kept out of the cyclic garbage collector's sight while it runs.

For: ``frozen``, around the run of a plan of many steps. A plan's objects (about ten per step, with the run's
state) live as long as its run and hold no garbage, yet every full collection would walk them again: two
full collections during a 10,000-step run cost more than 10 µs a step. ``gc.freeze`` moves every object alive
at that moment to a generation the collector never looks at, so the full collections that the run's own
garbage brings on walk only what came after. The last large run to end gives them back (``gc.unfreeze``):
a cycle that became garbage meanwhile is collected after all, then. Not for: small plans, whose runs end
before a full collection comes; nor for anything but the collector's work (frozen objects are freed by
their reference counts as ever).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: The fewest steps of a plan whose run freezes what is alive as it starts.
FREEZE_FROM = 1000

_lock = threading.Lock()
_held = 0  # large runs going on, in any thread of the process


@contextlib.contextmanager
def frozen(steps: int) -> Iterator[None]:
    """Keep what is alive now (a run's plan of ``steps`` steps among it) out of the collector's walks
    until the last large run ends; nothing for a plan of fewer than ``FREEZE_FROM`` steps."""
    global _held
    if steps < FREEZE_FROM:
        yield
        return
    with _lock:
        gc.freeze()  # again for every large run: its own plan was made since the last one froze
        _held += 1
    try:
        yield
    finally:
        with _lock:
            _held -= 1
            if _held == 0:
                gc.unfreeze()


__all__ = ["FREEZE_FROM", "frozen"]
