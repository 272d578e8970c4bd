"""The spans of a copilot turn's phases (scope, generate, check, run, review, retry), when tracing is on.

For: ``Phases``, which the turn and its attempts open a phase with (``with phases.phase("check", n) as
attributes``); the phase's span, its model calls' ``chat`` spans under it, goes out when the phase ends (a
turn runs in one process, so nothing of it is replayed). Ids derive from the turn's run, the attempt, the
phase and how many of that phase the attempt had; the formula run an attempt's ``run`` phase starts is a
span under that phase's. With tracing off (no trace) a phase costs a ``None`` check. Not for: the turn's
own span (``invoke_agent copilot``, made from its outcome's commit as every run's) or the span names
(``runs/telemetry/_semconv.py``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from plangate.runs.telemetry import RunTrace
from plangate.runs.telemetry import semconv as sc

Attributes = dict[str, str | int | float | bool]


class Phases:
    """The phase spans of one turn (``trace``: its run's spans, None when tracing is off)."""

    def __init__(self, trace: RunTrace | None) -> None:
        self.trace = trace
        self._counts: dict[tuple[int, str], int] = {}

    @contextlib.contextmanager
    def phase(self, name: str, attempt: int) -> Iterator[Attributes]:
        """A phase of attempt ``attempt`` (0: the turn's, before any attempt); what the body puts in the
        mapping it is given becomes the span's attributes."""
        trace = self.trace
        attributes: Attributes = {}
        if trace is None:
            yield attributes
            return
        count = self._counts[attempt, name] = self._counts.get((attempt, name), 0) + 1
        parts = (attempt, name, count)
        started, error = time.time(), None
        try:
            # its model calls, and the formula run it starts, belong under the phase's span
            with trace.scoped(("phase", *parts)):
                yield attributes
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            shown: Attributes = {sc.COPILOT_PHASE: name, sc.COPILOT_ATTEMPT: attempt, **attributes}
            trace.phase(f"{sc.COPILOT_SPAN} {name}", parts, started, time.time(), shown, error)


__all__ = ["Phases"]
