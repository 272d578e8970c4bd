"""off_loop: a call handed to its thread runs, even when the loop stops right after."""

from __future__ import annotations

import asyncio
import threading

from plangate._offloop import off_loop


def test_a_call_handed_off_as_the_loop_stops_still_runs() -> None:
    # A lease given back as a server shuts down is the case: the loop cancels every task it still has,
    # and a call that was handed to a thread must not be dropped before the thread started it.
    ran = threading.Event()

    async def main() -> None:
        # The task starts the call in the loop's last pass; then the loop cancels what it still has.
        asyncio.get_running_loop().create_task(off_loop(ran.set))

    asyncio.run(main())

    assert ran.wait(timeout=5)
