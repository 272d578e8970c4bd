"""The state of a formula run: each step's status, attempt, output and wait, folded from its events.

For: the executor's bookkeeping and its durable form. The snapshot holds the plan and the step states as of
``Snapshot.seq``; the ``step_state`` events committed after it (each in the same transaction as the
transition it records) are folded on top, so a resumed run sees exactly what was committed and a
transition never rewrites the whole state. ``condition_steps`` is what gates read: a live view that each
transition keeps current, so evaluating a condition costs what it reads, not the size of the plan. Not for:
deciding what runs next (``_scheduler.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from pydantic import JsonValue

from plangate.conditions import StepState
from plangate.config import ModelPrice
from plangate.errors import SchemaVersionError
from plangate.events import Event, StepStateEvent, StepStatus
from plangate.formulas.plan import Plan
from plangate.runs.usage import combined
from plangate.store.encoded import EncodedObject

#: Format of the run snapshot; bumped when an older plangate could no longer read it.
SNAPSHOT_VERSION = 1

TERMINAL: frozenset[str] = frozenset({"complete", "failed", "skipped", "cancelled"})
"""Step statuses a step never leaves (within one run)."""


@dataclass(slots=True)
class StepRun:
    """Where one step stands.

    Attributes:
        wait: what the step waits for while ``waiting`` (``gate``, ``timer``, ``human``, ``manual``,
            ``children``, ``subrun``), with its details (deadline, interaction id, child run ids).
    """

    id: str
    status: StepStatus = "pending"
    attempt: int = 0
    reason: str = ""
    output: dict[str, JsonValue] | None = None
    wait: dict[str, JsonValue] = field(default_factory=dict)
    usage: dict[str, JsonValue] | None = None
    """The model usage of the step's own calls (an ``llm`` step's, every attempt's), as outcomes show it."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_json(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {"status": self.status, "attempt": self.attempt}
        if self.reason:
            data["reason"] = self.reason
        if self.output is not None:
            data["output"] = self.output
        if self.wait:
            data["wait"] = self.wait
        if self.usage is not None:
            data["usage"] = self.usage
        return data

    @classmethod
    def from_json(cls, step_id: str, data: Mapping[str, Any]) -> StepRun:
        return cls(
            id=step_id,
            status=data.get("status", "pending"),
            attempt=int(data.get("attempt", 0)),
            reason=str(data.get("reason", "")),
            output=data.get("output"),
            wait=dict(data.get("wait") or {}),
            usage=data.get("usage"),
        )


class _Outputs(Mapping[str, Mapping[str, JsonValue]]):
    __slots__ = ("_steps",)

    def __init__(self, steps: Mapping[str, StepRun]) -> None:
        self._steps = steps

    def __getitem__(self, step_id: str) -> Mapping[str, JsonValue]:
        step = self._steps[step_id]
        if step.status != "complete":
            raise KeyError(step_id)
        return step.output or {}

    def __iter__(self) -> Iterator[str]:
        return (sid for sid, step in self._steps.items() if step.status == "complete")

    def __len__(self) -> int:
        return sum(1 for step in self._steps.values() if step.status == "complete")


class _Children(Sequence[StepState]):
    """A step's children as its ``StepState`` lists them: looked up when read, so a child's transition never
    makes its parent (and the parent's parent) be built again."""

    __slots__ = ("_ids", "_steps")

    def __init__(self, ids: tuple[str, ...], steps: ConditionSteps) -> None:
        self._ids = ids
        self._steps = steps

    @overload
    def __getitem__(self, index: int) -> StepState: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StepState]: ...

    def __getitem__(self, index: int | slice) -> StepState | Sequence[StepState]:
        if isinstance(index, slice):
            return [self._steps[i] for i in self._ids[index]]
        return self._steps[self._ids[index]]

    def __len__(self) -> int:
        return len(self._ids)


class ConditionSteps(Mapping[str, StepState]):
    """Every step of the plan as conditions see it, children nested (``RunState.condition_steps``).

    Each ``StepState`` is built when first read and kept until its step's next transition (``changed``), so
    a gate's evaluation costs the steps it reads. Iteration follows the order a full build would give
    (within each top-level step, children before their parent), which ``steps.*`` reasons list.
    """

    __slots__ = ("_built", "_children", "_order", "_plan", "_state")

    def __init__(self, state: RunState) -> None:
        self._state = state
        self._plan = state.plan
        self._built: dict[str, StepState] = {}
        self._children: dict[str, tuple[str, ...]] = {}
        self._order: tuple[str, ...] | None = None

    def changed(self, step_id: str) -> None:
        """The step moved on: its state is built again when next read."""
        self._built.pop(step_id, None)

    def _current(self) -> Plan:
        plan = self._state.plan
        if plan is not self._plan:  # an until-loop grew it: new steps, and new children for old ones
            self._plan = plan
            self._built.clear()
            self._children.clear()
            self._order = None
        return plan

    def _kids(self, step_id: str) -> tuple[str, ...]:
        kids = self._children.get(step_id)
        if kids is None:
            index = self._plan.index
            kids = self._children[step_id] = tuple(c for c in index[step_id].children if c in index)
        return kids

    def __getitem__(self, step_id: str) -> StepState:
        plan = self._current()
        found = self._built.get(step_id)
        if found is None:
            if step_id not in plan.index:
                raise KeyError(step_id)
            run = self._state.steps[step_id]
            found = StepState(
                id=step_id,
                status=run.status,
                output=run.output or {},
                children=_Children(self._kids(step_id), self),
            )
            self._built[step_id] = found
        return found

    def __iter__(self) -> Iterator[str]:
        self._current()
        if self._order is None:
            order: dict[str, None] = {}

            def visit(step_id: str) -> None:
                if step_id in order:
                    return
                for child in self._kids(step_id):
                    visit(child)
                order[step_id] = None

            for step in self._plan.steps:
                visit(step.id)
            self._order = tuple(order)
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._current().index)

    def __contains__(self, step_id: object) -> bool:
        return step_id in self._current().index


@dataclass
class RunState:
    """A formula run in memory: its plan, its steps' states and its until-loop progress.

    Attributes:
        prices: the price of each model its ``llm`` steps called, recorded when first used (``record_price``)
            and kept in its snapshot, so that every process that advances the run costs the calls the same.
        unsaved_prices: a price was recorded since the last snapshot (the next commit writes one).
    """

    plan: Plan
    steps: dict[str, StepRun]
    iterations: dict[str, int] = field(default_factory=dict)
    seq: int = 0
    prices: dict[str, ModelPrice] = field(default_factory=dict)
    unsaved_prices: bool = False
    _plan_cache: tuple[Plan, EncodedObject] | None = field(default=None, repr=False, compare=False)
    _conditions: ConditionSteps | None = field(default=None, repr=False, compare=False)

    @classmethod
    def new(cls, plan: Plan) -> RunState:
        """A new run's state, its plan encoded for its snapshots already.

        Raises:
            ConfigError: the plan holds what JSON cannot (a NaN, an infinity).
        """
        state = cls(plan=plan, steps={s.id: StepRun(s.id) for s in plan.steps})
        state.iterations = {loop.id: 1 for loop in plan.loops}
        state._plan_cache = (plan, EncodedObject.of_model(plan, "the run's plan"))
        return state

    # -- durable form -------------------------------------------------------------------------------------

    def to_snapshot(self) -> EncodedObject:
        """The run's durable form: its plan, its steps' states and its loops' iterations."""
        # the plan changes only when a loop grows it: encode it once per version, not per snapshot
        if self._plan_cache is None or self._plan_cache[0] is not self.plan:
            self._plan_cache = (self.plan, EncodedObject.of_model(self.plan, "the run's plan"))
        # one step at a time: a dict per step alive at once would cost a full garbage collection
        steps = ((sid, s.to_json()) for sid, s in self.steps.items())
        parts = {
            "plan": self._plan_cache[1],
            "steps": EncodedObject.of_pairs(steps, "the run's step states"),
            "iterations": EncodedObject.of(self.iterations, "the run's loop iterations"),
        }
        if self.prices:  # left out until a priced model is called: older snapshots read the same
            shown = {
                name: price.model_dump(mode="json", exclude_none=True) for name, price in self.prices.items()
            }
            parts["prices"] = EncodedObject.of(shown, "the run's prices")
        self.unsaved_prices = False
        return EncodedObject.joined(parts)

    def record_price(self, model: str, price: ModelPrice) -> None:
        """Keep ``price`` as the run's price of ``model`` (its first use): the next snapshot holds it."""
        if model not in self.prices:
            self.prices[model] = price
            self.unsaved_prices = True

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any], version: int, seq: int) -> RunState:
        if version > SNAPSHOT_VERSION:
            raise SchemaVersionError(
                f"this run's snapshot has format version {version}; this plangate reads up to "
                f"{SNAPSHOT_VERSION}: upgrade plangate to resume it"
            )
        plan = Plan.from_dict(dict(data["plan"]))
        stored = data.get("steps", {})
        steps = {s.id: StepRun.from_json(s.id, stored.get(s.id, {})) for s in plan.steps}
        prices = {name: ModelPrice.model_validate(price) for name, price in data.get("prices", {}).items()}
        return cls(
            plan=plan, steps=steps, iterations=dict(data.get("iterations", {})), seq=seq, prices=prices
        )

    def fold(self, events: Iterable[Event]) -> None:
        """Apply committed ``step_state`` events (those after the snapshot) to the in-memory state."""
        for event in events:
            if isinstance(event, StepStateEvent):
                self.apply(event)
            self.seq = max(self.seq, event.seq)

    def apply(self, event: StepStateEvent) -> None:
        step = self.steps.get(event.step_id)
        if step is None:  # a step added by a loop iteration whose snapshot is newer than this event
            step = self.steps[event.step_id] = StepRun(event.step_id)
        step.status = event.status
        step.reason = event.reason
        step.attempt = event.attempt
        if event.output is not None:
            step.output = dict(event.output)
        if event.wait:
            step.wait = dict(event.wait)
        elif step.wait:  # an empty wait stays the one it has: no new dict per transition
            step.wait = {}
        if event.usage is not None:
            step.usage = combined([step.usage, event.usage])
        if self._conditions is not None:
            self._conditions.changed(event.step_id)

    # -- views --------------------------------------------------------------------------------------------

    def usage(self) -> dict[str, JsonValue] | None:
        """The model usage of the run's own steps (its ``llm`` steps), or None when none called a model."""
        return combined(step.usage for step in self.steps.values() if step.usage is not None)

    def outputs(self) -> Mapping[str, Mapping[str, JsonValue]]:
        """The output of every step that completed, by id (what ``{{steps.<id>.output.<key>}}`` reads).

        A live view, not a copy: rendering one step's arguments must not cost the size of the plan.
        """
        return _Outputs(self.steps)

    def condition_steps(self) -> Mapping[str, StepState]:
        """Every step as the condition language sees it, children nested.

        A live view, not a copy: kept current by ``apply`` (and rebuilt lazily when the plan grows).
        """
        if self._conditions is None:
            self._conditions = ConditionSteps(self)
        return self._conditions


__all__ = ["SNAPSHOT_VERSION", "TERMINAL", "ConditionSteps", "RunState", "StepRun"]
