"""A real ``fork()`` for the tests of a store opened before one: what a call said in the child."""

from __future__ import annotations

import os
from collections.abc import Callable


def said_in_a_child(call: Callable[[], object]) -> tuple[int, str]:
    """Run ``call`` in a child made by ``os.fork()``: the child's pid, and the message of what it raised
    (``returned`` when it raised nothing). The child leaves at once (``os._exit``): nothing of the parent's
    (its stores, its threads' work) is closed or flushed twice."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read)
            try:
                call()
                said = "returned"
            except BaseException as exc:
                said = f"{type(exc).__name__}: {exc}"
            os.write(write, said.encode()[:60000])
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(child, 0)
    return child, b"".join(chunks).decode()
