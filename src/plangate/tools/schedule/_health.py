"""The week's health: capacity against demand, overlaps, deadline risks, and the next move to make.

For: ``analyze_health``, as pure functions of a :class:`~plangate.tools.schedule.planner.Planner`. The
suggested move is always one the planner would accept right now, written as the call to make. Not for:
applying it (the write tools do, with consent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from plangate.tools.schedule._calendar import day_code, slots_text
from plangate.tools.schedule.models import Task
from plangate.tools.schedule.planner import Capacity, Conflict, Planner, label, where

TIGHT = 2
"""An unplaced task with a deadline and at most this many possible starts left is at risk."""

RiskKind = Literal["late", "cannot_meet", "tight"]


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A write the planner would accept now: the tool, its arguments, and why it helps."""

    tool: str
    arguments: dict[str, JsonValue]
    why: str

    def call(self) -> str:
        """``place {"task": "t3", "day": "tue", "slot": 2}``."""
        return f"{self.tool} {json.dumps(self.arguments, ensure_ascii=False)}"


@dataclass(frozen=True, slots=True)
class Risk:
    """A task whose deadline is missed or in danger."""

    task: Task
    kind: RiskKind
    text: str


@dataclass(frozen=True, slots=True)
class Health:
    """What ``analyze_health`` reports."""

    capacity: Capacity
    conflicts: tuple[Conflict, ...]
    risks: tuple[Risk, ...]
    unfit: tuple[str, ...]
    suggestion: Suggestion | None

    def text(self) -> str:
        """The report as a few lines for the model."""
        spare = self.capacity.free - self.capacity.demand
        if self.capacity.feasible:
            capacity = (
                f"capacity: {self.capacity.free} slots free, unplaced tasks need {self.capacity.demand} "
                f"({spare} to spare)"
            )
        else:
            capacity = (
                f"capacity: INFEASIBLE: unplaced tasks need {self.capacity.demand} slots but only "
                f"{self.capacity.free} are free ({-spare} short); writes are blocked until tasks are removed "
                "or shortened"
            )
        lines = [
            capacity,
            _section("conflicts", [conflict.text() for conflict in self.conflicts]),
            _section("deadline risks", [risk.text for risk in self.risks]),
        ]
        if self.unfit:
            lines.append(_section("fits nowhere", list(self.unfit)))
        lines.append(f"next move: {self._next_move()}")
        return "\n".join(lines)

    def _next_move(self) -> str:
        if self.suggestion is not None:
            return f"{self.suggestion.call()} ({self.suggestion.why})"
        if not self.capacity.feasible:
            return "none while the week is infeasible"
        if self.conflicts or self.risks or self.unfit or self.capacity.demand:
            return "none found: no free window fits what is left; move tasks by hand to make room"
        return "none needed: every task is placed, nothing overlaps and no deadline is at risk"

    def data(self) -> dict[str, JsonValue]:
        """The report for programs."""
        suggestion: JsonValue = None
        if self.suggestion is not None:
            suggestion = {"tool": self.suggestion.tool, "arguments": self.suggestion.arguments}
        return {
            "free": self.capacity.free,
            "demand": self.capacity.demand,
            "feasible": self.capacity.feasible,
            "conflicts": [conflict.text() for conflict in self.conflicts],
            "risks": [{"task": risk.task.id, "kind": risk.kind, "text": risk.text} for risk in self.risks],
            "unfit": list(self.unfit),
            "suggestion": suggestion,
        }


def _section(title: str, items: list[str]) -> str:
    return f"{title} ({len(items)}): " + "; ".join(items) if items else f"{title}: none"


def analyze(planner: Planner) -> Health:
    """Look at the whole week and pick the next move."""
    capacity = planner.capacity()
    conflicts = tuple(planner.conflicts())
    risks: list[Risk] = []
    unfit: list[str] = []
    for task in planner.tasks():
        risk = _risk(planner, task)
        if risk is not None:
            risks.append(risk)
        elif task.placement is None and not planner.spots(task):
            unfit.append(
                f"{task.id} needs {task.duration} consecutive free slots; the longest free run is "
                f"{max((window.length for window in planner.free_windows()), default=0)}"
            )
    suggestion = _suggest(planner, conflicts) if capacity.feasible else None
    return Health(capacity, conflicts, tuple(risks), tuple(unfit), suggestion)


def _risk(planner: Planner, task: Task) -> Risk | None:
    if task.deadline is None:
        return None
    due = day_code(task.deadline)
    if task.placement is not None:
        if task.placement.day > task.deadline:
            return Risk(task, "late", f"{task.id} is on {where(task)}, after its deadline {due}")
        return None
    left = len(planner.spots(task))
    if left == 0:
        text = f"{task.id} ({slots_text(task.duration)}) is due {due} and no free window fits it by then"
        return Risk(task, "cannot_meet", text)
    if left <= TIGHT:
        starts = "start" if left == 1 else "starts"
        text = f"{task.id} ({slots_text(task.duration)}) is due {due}: {left} possible {starts} left"
        return Risk(task, "tight", text)
    return None


def _suggest(planner: Planner, conflicts: tuple[Conflict, ...]) -> Suggestion | None:
    for conflict in conflicts:
        for item in (conflict.second, conflict.first):
            if isinstance(item, Task):
                found = _move(planner, item, f"resolves: {conflict.text()}")
                if found is not None:
                    return found
    for task in planner.tasks():
        if task.placement is not None and task.deadline is not None and task.placement.day > task.deadline:
            why = f"brings {task.id} back before its deadline {day_code(task.deadline)}"
            found = _move(planner, task, why)
            if found is not None:
                return found
    order = {task.id: index for index, task in enumerate(planner.tasks())}
    waiting = sorted(
        (task for task in planner.tasks() if task.placement is None),
        key=lambda task: (task.deadline is None, task.deadline or 0, -task.duration, order[task.id]),
    )
    for task in waiting:
        spots = planner.spots(task)
        if spots:
            due = f", due {day_code(task.deadline)}" if task.deadline is not None else ""
            why = f"earliest free window for {label(task)} ({slots_text(task.duration)}{due})"
            return Suggestion("place", _arguments(task, spots[0].day, spots[0].slot), why)
    return None


def _move(planner: Planner, task: Task, why: str) -> Suggestion | None:
    spots = planner.spots(task)
    if not spots:
        return None
    return Suggestion("move", _arguments(task, spots[0].day, spots[0].slot), why)


def _arguments(task: Task, day: int, slot: int) -> dict[str, JsonValue]:
    return {"task": task.id, "day": day_code(day), "slot": slot}
