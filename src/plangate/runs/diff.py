"""Two runs side by side, aligned by round (agent runs) or by step (formulas), the first divergence marked.

For: ``diff_runs``, what ``plangate diff`` and the console's compare view show when a person compares a
fork with its origin, or a retry with the run it retried (or any two runs of theirs), and ``diff_tree``,
what a replay compares: a run and the runs under it (sub-runs, agent steps' agents) against their replay,
row by row in the order the record reached them. Each round is read from its events: the decision the model
declared, the tool call and its arguments, what the call returned, and the run's outcome last; a formula's
step is its last state (with its attempt, past the first) and output. The first row whose parts differ is
the divergence, and ``why`` names the part (``decision``, ``tool call``, ``arguments``, ``result``,
``status``, ``output``, ``outcome``). Not for: changing anything (it only reads).
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
    """One round (or step) of a run, by its parts, and as one line; ``at``: when its last event was
    recorded (the order a tree's rows are read in); ``note``: why a step stands where it does (its last
    state's reason), said with a divergence but never compared (it may hold times)."""

    parts: dict[str, str] = field(default_factory=dict)
    at: float = 0.0
    note: str = ""

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
    return diff_events(
        unit_of(first.kind, second.kind),
        (first.id, store.events(first.id)),
        (second.id, store.events(second.id)),
    )


def unit_of(*kinds: str) -> str:
    """How runs of these kinds are aligned: by ``round`` when all are agent runs, else by ``step``."""
    return "round" if all(kind == "agent" for kind in kinds) else "step"


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
        row, said = _row(key, points_a.get(key), points_b.get(key), first, second)
        rows.append(row)
        if row.differs and found is None:
            found, why = key, said
    return Diff(first, second, unit, rows, found, why)


@dataclass(frozen=True, slots=True)
class Log:
    """One run of a tree being compared.

    Attributes:
        place: where it is in the tree: ``""`` for the root, else its id past the root's (``fan.fan1.0``).
        unit: how it is aligned (``round`` or ``step``).
        a: its events in the first tree (the record); empty where it has none.
        b: its events in the second (the replay); empty where it has none.
    """

    place: str
    unit: str
    a: Sequence[Event]
    b: Sequence[Event]


def diff_tree(run_a: str, run_b: str, logs: Sequence[Log]) -> Diff:
    """Align two trees of runs (a root and the runs under it), run by run, and find their first
    divergence in the order the first tree reached each point (a sub-run's step before the step of its
    parent that waited for it); the root's outcome comes last. A row of a run under the root is keyed
    ``<place> › <key>``.
    """
    timed: list[tuple[tuple[int, float, int], Row, str]] = []
    for log in logs:
        read = _rounds if log.unit == "round" else _steps
        points_a, points_b = read(log.a), read(log.b)
        start = log.a[0].at if log.a else 0.0
        when = 0.0
        for key in _keys(points_a, points_b):
            point_a, point_b = points_a.get(key), points_b.get(key)
            if point_a is not None:
                when = point_a.at - start
            root_outcome = log.place == "" and key == "outcome"
            label = key if log.place == "" else f"{log.place} › {key}"
            row, why = _row(label, point_a, point_b, run_a, run_b)
            timed.append(((1 if root_outcome else 0, when, len(timed)), row, why))
    timed.sort(key=lambda item: item[0])
    rows = [row for _, row, _ in timed]
    first = next(((row.key, why) for _, row, why in timed if row.differs), None)
    unit = logs[0].unit if logs else "step"
    return Diff(run_a, run_b, unit, rows, first[0] if first else None, first[1] if first else "")


def _row(key: str, a: Point | None, b: Point | None, run_a: str, run_b: str) -> tuple[Row, str]:
    differs = a is None or b is None or a.parts != b.parts
    row = Row(key, None if a is None else a.line(), None if b is None else b.line(), differs)
    return row, _why(a, b, run_a, run_b) if differs else ""


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
            why = f"{part}: {a.parts.get(part) or '—'} vs {b.parts.get(part) or '—'}"
            return f"{why} ({b.note})" if b.note and b.note != a.note else why
    return "the points differ"


def _rounds(events: Sequence[Event]) -> dict[str, Point]:
    points: dict[str, Point] = {}
    current: Point | None = None
    calls: dict[str, Point] = {}
    for event in events:
        if isinstance(event, RoundEvent):
            current = Point({"decision": str(event.decision.get("action", "?"))}, event.at)
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
                owner.at = event.at
        elif isinstance(event, OutcomeEvent):
            points["outcome"] = Point({"outcome": f"{event.status} ({event.code})"}, event.at)
    return points


def _steps(events: Sequence[Event]) -> dict[str, Point]:
    points: dict[str, Point] = {}
    for event in events:
        if isinstance(event, StepStateEvent):
            output = "" if event.output is None else _compact(event.output)
            # a step that needed a second attempt behaved otherwise than one that did not
            status = event.status if event.attempt <= 1 else f"{event.status} (attempt {event.attempt})"
            points[event.step_id] = Point({"status": status, "output": output}, event.at, event.reason)
        elif isinstance(event, OutcomeEvent):
            points["outcome"] = Point({"outcome": f"{event.status} ({event.code})"}, event.at)
    return points


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


__all__ = ["Diff", "Log", "Row", "diff_events", "diff_runs", "diff_tree", "unit_of"]
