"""The tools of ``bench/workers.py``: a no-op step and a step that blocks (for the takeover figures)."""

from __future__ import annotations

import time

from plangate.tools import ToolRegistry, tool


@tool
def noop() -> dict[str, bool]:
    """Do nothing."""
    return {"ok": True}


@tool
def block(seconds: float) -> dict[str, float]:
    """Keep the worker busy for a while."""
    time.sleep(seconds)
    return {"worked": seconds}


registry = ToolRegistry([noop, block])
