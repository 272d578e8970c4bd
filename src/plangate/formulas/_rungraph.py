"""The shape of a plan as the executor walks it: who needs whom, who is whose child.

For: incremental readiness (a step becomes a candidate when its last need completes, never by rescanning
the whole plan) and failure propagation. Not for: statuses (``_runstate.py``) or running anything.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable

from plangate.formulas.plan import Plan, PlanStep


class PlanGraph:
    """Adjacency of a plan's steps, grown in place when an until-loop adds an iteration."""

    def __init__(self, plan: Plan) -> None:
        self.steps: dict[str, PlanStep] = {}
        self.dependents: dict[str, list[str]] = defaultdict(list)
        self.children: dict[str, list[str]] = defaultdict(list)
        self.watchers: dict[str, list[str]] = defaultdict(list)
        self.add(plan.steps)

    def add(self, steps: Iterable[PlanStep]) -> None:
        """Take in new steps (and re-take updated ones: a loop step gains children)."""
        for step in steps:
            self.steps[step.id] = step
            for need in step.needs:
                if step.id not in self.dependents[need]:
                    self.dependents[need].append(step.id)
            for child in step.children:
                if child not in self.children[step.id]:
                    self.children[step.id].append(child)
            if step.parent is not None and step.id not in self.children[step.parent]:
                self.children[step.parent].append(step.id)
            if step.waits_for is not None and step.waits_for.step is not None:
                if step.id not in self.watchers[step.waits_for.step]:
                    self.watchers[step.waits_for.step].append(step.id)

    def downstream(self, step_id: str) -> list[str]:
        """Every step that needs ``step_id``, directly or not, and their children (breadth first)."""
        seen: dict[str, None] = {}
        queue = deque(self.dependents.get(step_id, ()))
        while queue:
            current = queue.popleft()
            if current in seen:
                continue
            seen[current] = None
            queue.extend(self.dependents.get(current, ()))
            queue.extend(self.children.get(current, ()))
        return list(seen)


__all__ = ["PlanGraph"]
