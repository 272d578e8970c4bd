"""Log lines as JSON, each naming the run it is about (and its trace, when tracing is on).

For: ``advancing`` (what an engine wraps around advancing a run: the run's id in a context variable for the
lines logged meanwhile, on this task and the threads it hands work to), ``JsonFormatter`` (one JSON object
a line: ``time``, ``level``, ``logger``, ``message``, ``run_id``, ``trace_id``, ``exception``) and
``LOG_FORMATS``. Not for: choosing handlers (``plangate serve`` / ``plangate worker --log-format json``).
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOG_FORMATS = ("text", "json")

_RUN: contextvars.ContextVar[str | None] = contextvars.ContextVar("plangate_run_id", default=None)
_TRACE: contextvars.ContextVar[str | None] = contextvars.ContextVar("plangate_trace_id", default=None)


@contextmanager
def advancing(run_id: str, trace_id: int | None = None) -> Iterator[None]:
    """While the run ``run_id`` is advanced: its id (and its trace's, when traced) on every log line."""
    run_token = _RUN.set(run_id)
    trace_token = _TRACE.set(None if trace_id is None else f"{trace_id:032x}")
    try:
        yield
    finally:
        _TRACE.reset(trace_token)
        _RUN.reset(run_token)


def current_run() -> str | None:
    """The run being advanced by this task, or None."""
    return _RUN.get()


class JsonFormatter(logging.Formatter):
    """One JSON object a line, with the run being advanced (``run_id``: null outside any run)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "run_id": getattr(record, "run_id", None) or _RUN.get(),
        }
        trace = _TRACE.get()
        if trace is not None:
            line["trace_id"] = trace
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


__all__ = ["LOG_FORMATS", "JsonFormatter", "advancing", "current_run"]
