"""The plan: what cooking a formula produces, and what a formula run executes and stores in its snapshot.

For: the concrete DAG (steps with resolved ids, needs, gates and executors) plus what the executor needs later
(``until`` loops it grows at run time, the advice and maps to apply to new iterations, the expansion formulas
they use). JSON round trip through :meth:`Plan.to_dict` / :meth:`Plan.from_dict`, with a schema version that
refuses newer plans. Not for: building plans (cook.py) or checking them (check.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from plangate.errors import FormulaError, SchemaVersionError
from plangate.formulas._schema_errors import schema_problems
from plangate.formulas.schema import Advice, Formula, OnComplete, Pointcut, Step, Var

#: Bumped when a stored plan would no longer read the same; older versions keep loading.
PLAN_SCHEMA_VERSION = 1
_CHILDREN_OF = re.compile(r"children-of\(\s*([^()\s]+)\s*\)")


class _PlanModel(BaseModel):
    # NaN and infinities written as such (not as null, pydantic's default): a run's snapshot refuses them
    # (``EncodedObject.of_model``), as JSON has no number for them, instead of storing null for them
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, ser_json_inf_nan="constants"
    )


class ToolExecutor(_PlanModel):
    """Call the registered tool ``name`` with ``args`` (rendered at run time with :func:`render_runtime`)."""

    type: Literal["tool"] = "tool"
    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    consent: Literal["ask", "auto"] | None = Field(default=None, exclude_if=lambda value: value is None)
    """The step's ``consent``: ``auto`` runs a write tool without asking; left out of the stored form when
    unset, so plans stored before the field existed keep their form."""


class AgentExecutor(_PlanModel):
    """Run an agent on ``prompt`` with ``tools``."""

    type: Literal["agent"] = "agent"
    prompt: str
    tools: list[str] = Field(default_factory=list)
    max_rounds: int | None = None
    model: str | None = None
    mode: Literal["auto", "plan", "react"] = Field(default="auto", exclude_if=lambda value: value == "auto")
    """Left out of the stored form when ``auto``, so plans stored before the field existed keep their form."""
    done_when: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The agent's goal as a condition over its receipts (left out of the stored form when there is none)."""


class LlmExecutor(_PlanModel):
    """One model call on ``prompt``; the answer must fit ``schema`` when one is given."""

    type: Literal["llm"] = "llm"
    prompt: str
    output_schema: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    model: str | None = None


class HumanExecutor(_PlanModel):
    """Ask a person: ``approve`` (yes / no) or ``input`` (a typed answer)."""

    type: Literal["human"] = "human"
    prompt: str
    kind: Literal["approve", "input"] = "approve"


class FormulaExecutor(_PlanModel):
    """Run the formula ``name`` as a sub-run with ``vars``."""

    type: Literal["formula"] = "formula"
    name: str
    vars: dict[str, JsonValue] = Field(default_factory=dict)


class ManualExecutor(_PlanModel):
    """No executor: someone completes the step with an output (a step with children completes with them)."""

    type: Literal["manual"] = "manual"


Executor = Annotated[
    ToolExecutor | AgentExecutor | LlmExecutor | HumanExecutor | FormulaExecutor | ManualExecutor,
    Field(discriminator="type"),
]


class WaitsFor(_PlanModel):
    """Which children a step waits for: all of its own, any of its own, or all children of ``step``."""

    mode: Literal["all-children", "any-children", "children-of"]
    step: str | None = None

    @classmethod
    def parse(cls, text: str) -> WaitsFor:
        """``all-children`` | ``any-children`` | ``children-of(<id>)``; the schema has checked the shape."""
        text = text.strip()
        match = _CHILDREN_OF.fullmatch(text)
        if match is not None:
            return cls(mode="children-of", step=match.group(1))
        if text == "any-children":
            return cls(mode="any-children")
        if text == "all-children":
            return cls(mode="all-children")
        raise FormulaError(f"expected all-children, any-children or children-of(<id>), got {text!r}")

    def __str__(self) -> str:
        return f"children-of({self.step})" if self.mode == "children-of" else self.mode


class PlanGate(_PlanModel):
    """A run-time wait: ``condition`` (the condition language), ``timer`` seconds, a ``human`` approval
    prompt; the step fails with ``gate timed out`` after ``timeout`` seconds."""

    condition: str | None = None
    timeout: int | None = None
    timer: int | None = None
    human: str | None = None


class CookedStep(_PlanModel):
    """One concrete step of a cooked plan (``schema.Step`` is a step as the formula file writes it; an agent's
    plan step is ``plangate.decisions.PlanStep``).

    ``needs`` are resolved ids (a step's own needs, those of its ancestors, and the rewiring done by loops,
    expansions and advice). A step with ``children`` completes when they do (per ``waits_for``). ``source``
    says where the step came from in the formula (``steps[2].children[0]``), for messages.
    """

    id: str
    title: str
    description: str = ""
    needs: list[str] = Field(default_factory=list)
    parent: str | None = None
    children: list[str] = Field(default_factory=list)
    waits_for: WaitsFor | None = None
    gate: PlanGate | None = None
    retries: int = 0
    timeout: int | None = None
    labels: list[str] = Field(default_factory=list)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    on_complete: OnComplete | None = None
    executor: Executor = Field(default_factory=ManualExecutor)
    source: str = ""


class RuntimeLoop(_PlanModel):
    """An ``until`` loop, grown by the executor.

    After iteration N, if ``until`` does not hold and N < ``max``, the executor adds
    ``expand_iteration(plan, id, N + 1)``. In ``until``, a body step's own id names that step in the iteration
    just finished (see :meth:`step_id`); the loop step ``id`` completes when the loop ends.
    """

    id: str
    var: str | None
    until: str
    max: int
    body: list[Step]
    context: dict[str, JsonValue] = Field(default_factory=dict)
    outside: dict[str, str] = Field(default_factory=dict)
    chain: list[str] = Field(default_factory=list)
    source: str = ""

    def step_id(self, n: int, body_id: str) -> str:
        """The id of body step ``body_id`` in iteration ``n``: ``<loop>.iter<n>.<body-id>``."""
        return f"{self.id}.iter{n}.{body_id}"


class AdviceRule(_PlanModel):
    """Advice as applied: the rule, the pointcuts of the formula it came from, and its template names."""

    advice: Advice
    pointcuts: list[Pointcut] = Field(default_factory=list)
    context: dict[str, JsonValue] = Field(default_factory=dict)
    origin: str = ""


class MapRecord(_PlanModel):
    """A ``compose.map`` as applied (vars rendered), kept so that new loop iterations get it too."""

    select: str
    with_: str = Field(alias="with")
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    origin: str = ""


class Plan(_PlanModel):
    """A cooked formula. Store it with :meth:`to_dict`; read it back with :meth:`from_dict`."""

    schema_version: int = PLAN_SCHEMA_VERSION
    formula: str
    source: str | None = None
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    var_specs: dict[str, Var] = Field(default_factory=dict)
    steps: list[CookedStep] = Field(default_factory=list)
    loops: list[RuntimeLoop] = Field(default_factory=list)
    advice: list[AdviceRule] = Field(default_factory=list)
    maps: list[MapRecord] = Field(default_factory=list)
    expansions: dict[str, Formula] = Field(default_factory=dict)

    @cached_property
    def index(self) -> dict[str, CookedStep]:
        """Steps by id."""
        return {step.id: step for step in self.steps}

    def starts_runs(self) -> bool:
        """Whether a step of the plan starts runs of its own: an agent, a sub-formula, a fan-out."""
        return any(
            isinstance(step.executor, AgentExecutor | FormulaExecutor) or step.on_complete is not None
            for step in self.steps
        )

    def tool_names(self) -> list[str]:
        """The tools the plan's steps may call (a tool step's, an agent step's; an ``until`` loop's body's
        too), each once, in order."""
        names: dict[str, None] = {}
        for step in self.steps:
            if isinstance(step.executor, ToolExecutor):
                names[step.executor.name] = None
            elif isinstance(step.executor, AgentExecutor):
                names.update(dict.fromkeys(step.executor.tools))
        for loop in self.loops:
            for body in _walk(loop.body):
                if body.tool is not None:
                    names[body.tool.name] = None
                if body.agent is not None:
                    names.update(dict.fromkeys(body.agent.tools or ()))
        return list(names)

    def step(self, step_id: str) -> CookedStep:
        """The step ``step_id``.

        Raises:
            FormulaError: there is no such step.
        """
        found = self.index.get(step_id)
        if found is None:
            raise FormulaError(f"the plan of {self.formula!r} has no step {step_id!r}")
        return found

    def loop(self, loop_id: str) -> RuntimeLoop:
        """The ``until`` loop whose loop step is ``loop_id``.

        Raises:
            FormulaError: there is no such loop.
        """
        for loop in self.loops:
            if loop.id == loop_id:
                return loop
        known = ", ".join(loop.id for loop in self.loops) or "none"
        raise FormulaError(
            f"the plan of {self.formula!r} has no until loop {loop_id!r} (until loops: {known})"
        )

    def to_dict(self) -> dict[str, JsonValue]:
        """A JSON-ready dict; :meth:`from_dict` reads it back to an equal plan."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Plan:
        """Read a stored plan.

        Raises:
            SchemaVersionError: the plan was written by a newer plangate.
            FormulaError: the data is not a plan.
        """
        version = data.get("schema_version", PLAN_SCHEMA_VERSION)
        if not isinstance(version, int) or version > PLAN_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"this plan has schema version {version!r}; this plangate reads up to {PLAN_SCHEMA_VERSION}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            path, message = schema_problems(exc)[0]
            raise FormulaError(f"not a stored plan: {message}", path=path) from None



def _walk(steps: Iterable[Step]) -> Iterator[Step]:
    for step in steps:
        yield step
        yield from _walk(step.children)
        if step.loop is not None:
            yield from _walk(step.loop.body)


__all__ = [
    "PLAN_SCHEMA_VERSION",
    "AdviceRule",
    "AgentExecutor",
    "CookedStep",
    "Executor",
    "FormulaExecutor",
    "HumanExecutor",
    "LlmExecutor",
    "ManualExecutor",
    "MapRecord",
    "Plan",
    "PlanGate",
    "RuntimeLoop",
    "ToolExecutor",
    "WaitsFor",
]
