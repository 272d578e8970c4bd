"""Two runs side by side, aligned by round (agent runs) or by step (formulas), the first divergence marked.

For: ``diff_runs``, what ``plangate diff`` and a console view show when a person compares a fork with its
origin, or a retry with the run it retried. Each round is read from its events: the decision the model
declared, the tool call and its arguments, what the call returned, and the run's outcome last; a formula's
step is its last state and output. The first row whose parts differ is the divergence, and ``why`` names the
part (``decision``, ``tool call``, ``arguments``, ``result``, ``outcome``). Not for: changing anything (it
only reads).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from plangate.events import (
    Event,
    OutcomeEvent,
    RoundEvent,
    StepStateEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.store import Store

_PARTS = ("decision", "tool call", "arguments", "result")


@dataclass(slots=True)
class Point:
    """One round (or step) of a run, by its parts, and as one line."""

    parts: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """The parts, in order, as one line."""
        return " · ".join(value for value in self.parts.values() if value)


@dataclass(frozen=True, slots=True)
class Row:
    """One aligned row: its key (``3``, a step id, ``outcome``), each run's line (None: the run has none)."""

    key: str
    a: str | None
    b: str | None
    differs: bool


@dataclass(frozen=True, slots=True)
class Diff:
    """Two runs aligned.

    Attributes:
        unit: ``round`` or ``step``.
        rows: the aligned rows, in order.
        first: the key of the first row that differs, or None.
        why: what differs there, in words (``arguments: {"slot": 9} vs {"slot": 10}``).
    """

    run_a: str
    run_b: str
    unit: str
    rows: list[Row]
    first: str | None
    why: str

    def as_json(self) -> dict[str, JsonValue]:
        """The diff as ``--json`` prints it."""
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "unit": self.unit,
            "first_divergence": self.first,
            "why": self.why,
            "rows": [{"key": r.key, "a": r.a, "b": r.b, "differs": r.differs} for r in self.rows],
        }


def diff_runs(store: Store, run_a: str, run_b: str, *, owner: str | None = None) -> Diff:
    """Align two runs of ``owner`` (anyone's when None) and find their first divergence.

    Raises:
        NotFoundError: either run does not exist (for ``owner``).
    """
    first, second = store.get_run(run_a, owner=owner), store.get_run(run_b, owner=owner)
    unit = "round" if first.kind == "agent" and second.kind == "agent" else "step"
    return diff_events(unit, (first.id, store.events(first.id)), (second.id, store.events(second.id)))


def diff_events(unit: str, a: tuple[str, Sequence[Event]], b: tuple[str, Sequence[Event]]) -> Diff:
    """Align two event logs (``(run id, events)``) by ``round`` or ``step`` and find their first divergence
    (for runs that are not in one store: a replay's and its record's)."""
    read = _rounds if unit == "round" else _steps
    (first, events_a), (second, events_b) = a, b
    points_a, points_b = read(events_a), read(events_b)
    rows: list[Row] = []
    found: str | None = None
    why = ""
    for key in _keys(points_a, points_b):
        point_a, point_b = points_a.get(key), points_b.get(key)
        differs = point_a is None or point_b is None or point_a.parts != point_b.parts
        line_a = None if point_a is None else point_a.line()
        line_b = None if point_b is None else point_b.line()
        rows.append(Row(key, line_a, line_b, differs))
        if differs and found is None:
            found, why = key, _why(point_a, point_b, first, second)
    return Diff(first, second, unit, rows, found, why)


def _keys(a: dict[str, Point], b: dict[str, Point]) -> list[str]:
    keys = list(a)
    keys.extend(key for key in b if key not in a)
    if "outcome" in keys:
        keys.remove("outcome")
        keys.append("outcome")
    return keys


def _why(a: Point | None, b: Point | None, run_a: str, run_b: str) -> str:
    if a is None or b is None:
        missing = run_a if a is None else run_b
        return f"run {missing} has no such point"
    for part in (*_PARTS, "status", "output", "outcome"):
        if a.parts.get(part) != b.parts.get(part):
            return f"{part}: {a.parts.get(part) or '—'} vs {b.parts.get(part) or '—'}"
    return "the points differ"


def _rounds(events: Sequence[Event]) -> dict[str, Point]:
    points: dict[str, Point] = {}
    current: Point | None = None
    calls: dict[str, Point] = {}
    for event in events:
        if isinstance(event, RoundEvent):
            current = Point({"decision": str(event.decision.get("action", "?"))})
            points[str(event.round)] = current
            call = event.decision.get("tool_call")
            if isinstance(call, dict):
                current.parts["tool call"] = str(call.get("name", ""))
                current.parts["arguments"] = _compact(call.get("arguments"))
        elif isinstance(event, ToolCallEvent) and current is not None:
            calls[event.call_id] = current
        elif isinstance(event, ToolResultEvent):
            owner = calls.pop(event.call_id, current)
            if owner is not None:
                verdict = "ok" if event.success else (event.error_code or event.status)
                owner.parts["result"] = f"{verdict}: {event.summary}"
        elif isinstance(event, OutcomeEvent):
            points["outcome"] = Point({"outcome": f"{event.status} ({event.code})"})
    return points


def _steps(events: Sequence[Event]) -> dict[str, Point]:
    points: dict[str, Point] = {}
    for event in events:
        if isinstance(event, StepStateEvent):
            output = "" if event.output is None else _compact(event.output)
            points[event.step_id] = Point({"status": event.status, "output": output})
        elif isinstance(event, OutcomeEvent):
            points["outcome"] = Point({"outcome": f"{event.status} ({event.code})"})
    return points


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


__all__ = ["Diff", "Row", "diff_events", "diff_runs"]
