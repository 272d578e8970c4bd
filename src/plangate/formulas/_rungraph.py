"""The shape of a plan as the executor walks it: who needs whom, who is whose child, whose gate reads whom.

For: incremental readiness (a step becomes a candidate when its last need completes, never by rescanning
the whole plan), failure propagation, and the gates a step's transition concerns (``gates_reading``: only
those whose condition reads it, so a transition costs the gates it matters to, not every gate of the plan).
Not for: statuses (``_runstate.py``), evaluating conditions (``_gates.py``) or running anything.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from plangate.conditions import ConditionSyntaxError, ast, compile_condition
from plangate.formulas.plan import CookedStep, Plan


class PlanGraph:
    """Adjacency of a plan's steps, grown in place when an until-loop adds an iteration."""

    def __init__(self, plan: Plan) -> None:
        self.steps: dict[str, CookedStep] = {}
        self.position: dict[str, int] = {}  # a step's place in the plan, what its receipts are bound to
        self.dependents: dict[str, list[str]] = defaultdict(list)
        self.children: dict[str, list[str]] = defaultdict(list)
        self.parent: dict[str, str] = {}
        self.watchers: dict[str, list[str]] = defaultdict(list)
        self.gated: list[str] = []  # steps with a condition gate, in plan order
        # whose gate reads a step: by name (``build.status``), over its subtree (``children(tests)``,
        # ``descendants(tests)``: any step below it), or every step (``steps.complete``, ``steps.all(...)``)
        self._named: dict[str, list[str]] = defaultdict(list)
        self._below: dict[str, list[str]] = defaultdict(list)
        self._every: list[str] = []
        self.reads_outside: set[str] = set()  # gated steps whose condition reads files or the environment
        self.add(plan.steps)

    def add(self, steps: Iterable[CookedStep]) -> None:
        """Take in new steps (and re-take updated ones: a loop step gains children)."""
        for step in steps:
            if step.id not in self.steps:
                self.position[step.id] = len(self.steps)
                if step.gate is not None and step.gate.condition:
                    self._add_gate(step.id, step.gate.condition)
            self.steps[step.id] = step
            for need in step.needs:
                if step.id not in self.dependents[need]:
                    self.dependents[need].append(step.id)
            for child in step.children:
                if child not in self.children[step.id]:
                    self.children[step.id].append(child)
                self.parent.setdefault(child, step.id)
            if step.parent is not None:
                self.parent[step.id] = step.parent
                if step.id not in self.children[step.parent]:
                    self.children[step.parent].append(step.id)
            if step.waits_for is not None and step.waits_for.step is not None:
                if step.id not in self.watchers[step.waits_for.step]:
                    self.watchers[step.waits_for.step].append(step.id)

    def _add_gate(self, step_id: str, condition: str) -> None:
        self.gated.append(step_id)
        try:
            reads = gate_reads(condition, step_id)
        except ConditionSyntaxError:
            return  # its first evaluation fails the step; nothing else can change that
        for other in reads.named:
            self._named[other].append(step_id)
        for other in reads.below:
            self._below[other].append(step_id)
        if reads.every:
            self._every.append(step_id)
        if reads.outside:
            self.reads_outside.add(step_id)

    def gates_reading(self, step_id: str) -> list[str]:
        """The gated steps (other than ``step_id``) whose condition reads ``step_id``: by name, through an
        aggregate over a step above it, or through one over every step."""
        if not self.gated:
            return []
        found = [*self._named.get(step_id, ()), *self._every]
        current: str | None = step_id
        while current is not None:
            found.extend(self._below.get(current, ()))
            current = self.parent.get(current)
        return [gated for gated in dict.fromkeys(found) if gated != step_id]

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


@dataclass(frozen=True)
class GateReads:
    """What a gate's condition reads.

    Attributes:
        named: the steps it names (``build.status``, ``children(tests)``): ``Condition.references``.
        below: the steps whose subtree an aggregate ranges over (``children(x)``, ``descendants(x)``).
        every: it reads every step (``steps.complete``, ``steps.all(...)``).
        outside: it reads what no step changes (``file.exists(...)``, ``env.X``).
    """

    named: tuple[str, ...]
    below: tuple[str, ...]
    every: bool
    outside: bool


def gate_reads(condition: str, step_id: str) -> GateReads:
    """What the gate ``condition`` of step ``step_id`` reads.

    ``children(x)`` / ``descendants(x)`` read every step below ``x`` (a predicate may look at the children of
    each child); ``children(step)`` reads the subtree of the step in focus: ``step_id`` at the top, or,
    inside another aggregate, one of its elements, which lie in that aggregate's range already. A bare
    ``status`` reads ``step_id`` itself, whose transitions its own gate decides.

    Raises:
        ConditionSyntaxError: the condition does not parse.
    """
    compiled = compile_condition(condition)
    below: dict[str, None] = {}
    every = outside = False
    for node in ast.walk(compiled.ast):
        if isinstance(node, ast.StatusCount) or (isinstance(node, ast.Aggregate) and node.scope == "steps"):
            every = True
        elif isinstance(node, ast.Aggregate):
            below.setdefault(node.step if node.step is not None else step_id, None)
        elif isinstance(node, ast.FileExists | ast.EnvRef):
            outside = True
    return GateReads(compiled.references, tuple(below), every, outside)


__all__ = ["GateReads", "PlanGraph", "gate_reads"]
