"""The formula file format as strict models: every field of a ``.formula.toml`` / ``.formula.json``.

For: what a formula may say and the rules a single file must satisfy on its own (types, one executor per
step, loop shapes, unique ids, var declarations). Not for: reading files (loader.py), ``extends``
(resolve.py) or anything that needs var values (cook.py); text with ``{{placeholders}}`` is checked once
rendered.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, JsonValue, PrivateAttr, field_validator, model_validator

from plangate.formulas._schema_base import (
    FORMULA_NAME,
    IDENTIFIER,
    Duration,
    OneOrMany,
    StepIdText,
    StrictModel,
    StrOrList,
    problem,
)

Scalar = bool | int | float | str
VarType = Literal["string", "int", "float", "bool"]
ExecutorKind = Literal["tool", "agent", "llm", "human", "formula", "manual"]
Consent = Literal["ask", "auto"]
"""How a ``tool`` step whose tool is a write gets consent: ``ask`` a person first, or ``auto`` (run it)."""
EXECUTOR_FIELDS: tuple[ExecutorKind, ...] = ("tool", "agent", "llm", "human", "formula")
#: Template names a var may not take: ``steps`` is how a template reads another step's output at run time.
RESERVED_VAR_NAMES = frozenset({"steps"})
_WAITS_FOR = re.compile(r"all-children|any-children|children-of\(\s*([^()\s]+)\s*\)")


def scalar_type(value: object) -> VarType | None:
    """The var type a TOML scalar has (``bool`` before ``int``: ``True`` is an ``int`` in Python)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return None


def fits_type(value: Scalar, var_type: VarType) -> bool:
    """Whether a typed value is acceptable for ``var_type`` without conversion (an int is a float)."""
    found = scalar_type(value)
    return found == var_type or (var_type == "float" and found == "int")


class Var(StrictModel):
    """A formula variable: its default, whether it must be given, and the rules its value must follow."""

    description: str = ""
    default: Scalar | None = None
    required: bool = False
    enum: list[Scalar] | None = None
    pattern: str | None = None
    type: VarType | None = None

    @field_validator("default", mode="before")
    @classmethod
    def _scalar_default(cls, value: object) -> object:
        if value is not None and scalar_type(value) is None:
            raise problem(f"expected a string, number or boolean, got {type(value).__name__}")
        return value

    @field_validator("enum", mode="before")
    @classmethod
    def _scalar_enum(cls, value: object) -> object:
        if isinstance(value, list):
            for i, item in enumerate(value):
                if scalar_type(item) is None:
                    raise problem(
                        f"expected a string, number or boolean, got {type(item).__name__}", where=f"[{i}]"
                    )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Var:
        if self.required and self.default is not None:
            raise problem("a var cannot be both required and have a default; drop one of them")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise problem(f"invalid regular expression: {exc}", where="pattern") from None
        var_type = self.effective_type
        if self.default is not None and not fits_type(self.default, var_type):
            raise problem(f"expected a default of type {var_type}, got {self.default!r}", where="default")
        for i, item in enumerate(self.enum or []):
            if not fits_type(item, var_type):
                raise problem(f"expected a value of type {var_type}, got {item!r}", where=f"enum[{i}]")
        if self.enum is not None and self.default is not None and self.default not in self.enum:
            raise problem(f"the default {self.default!r} is not one of the enum values", where="default")
        return self

    @property
    def effective_type(self) -> VarType:
        """The declared type, else the type of the default or of the first enum value, else ``string``."""
        if self.type is not None:
            return self.type
        if self.default is not None:
            return scalar_type(self.default) or "string"
        return scalar_type(self.enum[0]) or "string" if self.enum else "string"


class ToolSpec(StrictModel):
    """``tool = {name, args}``: call a registered tool."""

    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)


class AgentSpec(StrictModel):
    """``agent = {prompt, tools, max_rounds, model, mode, done_when}``: an agent run with its own tools.

    ``mode`` is the agent's: ``auto`` (route first: reply, plan or act), ``plan`` (always plan) or ``react``
    (act step by step without a plan). ``done_when`` is the step's goal as a condition over the agent's
    receipts (``receipts.any(tool == 'place' and success)``): the runtime completes the step, with the
    receipt that proves it, as soon as it holds.
    """

    prompt: str
    tools: list[str] = Field(default_factory=list)
    max_rounds: Annotated[int, Field(gt=0)] | None = None
    model: str | None = None
    mode: Literal["auto", "plan", "react"] = "auto"
    done_when: str | None = None


class LlmSpec(StrictModel):
    """``llm = {prompt, schema, model}``: one model call, optionally with a JSON schema for its answer."""

    prompt: str
    output_schema: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    model: str | None = None


class HumanSpec(StrictModel):
    """``human = {prompt, kind}``: ask a person to approve, or to type an input."""

    prompt: str = ""
    kind: Literal["approve", "input"] = "approve"


class FormulaSpec(StrictModel):
    """``formula = {name, vars}``: run another formula as a sub-run."""

    name: str
    vars: dict[str, JsonValue] = Field(default_factory=dict)


class Gate(StrictModel):
    """A runtime wait before a step starts: a condition, a timer, a person, with an optional timeout."""

    condition: str | None = None
    timeout: Duration | None = None
    timer: Duration | None = None
    human: str | None = None

    @field_validator("human", mode="before")
    @classmethod
    def _human_flag(cls, value: object) -> object:
        # `human = true` asks for an approval with the default prompt; `false` means no person.
        if value is True:
            return ""
        if value is False:
            return None
        return value

    @model_validator(mode="after")
    def _waits_on_something(self) -> Gate:
        if self.condition is None and self.timer is None and self.human is None:
            raise problem("a gate needs a condition, a timer or human")
        return self


class Loop(StrictModel):
    """Repeat ``body``: ``count`` times, over a ``range``, or ``until`` a condition holds (``max`` times)."""

    count: Annotated[int, Field(ge=0)] | None = None
    range: str | None = None
    until: str | None = None
    max: Annotated[int, Field(gt=0)] | None = None
    var: str | None = None
    body: list[Step]

    @model_validator(mode="after")
    def _one_kind(self) -> Loop:
        given = [name for name in ("count", "range", "until") if getattr(self, name) is not None]
        if len(given) != 1:
            found = " and ".join(given) if given else "none"
            raise problem(f"a loop needs exactly one of count, range or until; found {found}")
        if self.until is not None and self.max is None:
            raise problem("an until loop needs max (the most iterations it may run)", where="max")
        if self.until is None and self.max is not None:
            raise problem("max applies only to until loops", where="max")
        if self.var is not None and (not IDENTIFIER.fullmatch(self.var) or self.var in RESERVED_VAR_NAMES):
            raise problem(f"a loop var must be a name like 'i' or 'region', got {self.var!r}", where="var")
        if not self.body:
            raise problem("a loop needs at least one step in its body", where="body")
        return self


class OnComplete(StrictModel):
    """``on_complete = {for_each, formula, vars, parallel}``: one sub-run per element of an output list."""

    for_each: str
    formula: str
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    parallel: bool = False


class Step(StrictModel):
    """One step of a formula; see SPEC §2 for the meaning of each field."""

    id: StepIdText
    title: str = ""
    description: str = ""
    needs: list[str] = Field(default_factory=list, validation_alias=AliasChoices("needs", "depends_on"))
    children: list[Step] = Field(default_factory=list)
    waits_for: str | None = None
    condition: str | None = None
    gate: Gate | None = None
    loop: Loop | None = None
    on_complete: OnComplete | None = None
    expand: str | None = None
    expand_vars: dict[str, JsonValue] = Field(default_factory=dict)
    retries: Annotated[int, Field(ge=0)] = 0
    timeout: Duration | None = None
    labels: list[str] = Field(default_factory=list)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    tool: ToolSpec | None = None
    agent: AgentSpec | None = None
    llm: LlmSpec | None = None
    human: HumanSpec | None = None
    formula: FormulaSpec | None = None
    # left out of stored plans when unset, so plans stored before the field existed keep their form
    consent: Consent | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="before")
    @classmethod
    def _one_dependency_key(cls, data: object) -> object:
        if isinstance(data, dict) and "needs" in data and "depends_on" in data:
            raise problem("give needs or its alias depends_on, not both", where="depends_on")
        return data

    @field_validator("waits_for")
    @classmethod
    def _waits_for_shape(cls, value: str | None) -> str | None:
        if value is not None and not _WAITS_FOR.fullmatch(value.strip()):
            raise problem(f"expected all-children, any-children or children-of(<id>), got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> Step:
        kinds = [name for name in EXECUTOR_FIELDS if getattr(self, name) is not None]
        if len(kinds) > 1:
            raise problem(f"a step has at most one executor; found {' and '.join(kinds)}")
        if self.consent is not None and self.tool is None:
            found = kinds[0] if kinds else ("a loop" if self.loop is not None else "no executor")
            raise problem(
                "consent applies to tool steps (whether a write tool asks a person first); "
                f"this step has {found}",
                where="consent",
            )
        if self.loop is not None:
            for other in ("children", "expand"):
                if getattr(self, other):
                    raise problem(f"a loop step cannot also have {other} (put steps in loop.body)")
            if kinds:
                raise problem(f"a loop step cannot have an executor; found {kinds[0]} (put it in loop.body)")
        if self.expand is not None:
            if kinds:
                raise problem(f"an expand step is replaced by its expansion, so it cannot have {kinds[0]}")
            if self.children:
                raise problem("an expand step is replaced by its expansion, so it cannot have children")
        elif self.expand_vars:
            raise problem("expand_vars needs expand", where="expand_vars")
        return self

    @property
    def executor_kind(self) -> ExecutorKind:
        """``tool``, ``agent``, ``llm``, ``human``, ``formula``, or ``manual`` when none is given."""
        for name in EXECUTOR_FIELDS:
            if getattr(self, name) is not None:
                return name
        return "manual"


class ExpandRule(StrictModel):
    """``compose.expand``: replace step ``target`` by the template of the expansion formula ``with``."""

    target: str
    with_: str = Field(alias="with")
    vars: dict[str, JsonValue] = Field(default_factory=dict)


class MapRule(StrictModel):
    """``compose.map``: expand every step whose id matches the glob ``select``."""

    select: str
    with_: str = Field(alias="with")
    vars: dict[str, JsonValue] = Field(default_factory=dict)


class BranchRule(StrictModel):
    """``compose.branch``: run ``steps`` in parallel after ``from``; ``join`` waits for all of them."""

    from_: str = Field(alias="from")
    steps: list[str]
    join: str | None = None


class GateRule(StrictModel):
    """``compose.gate``: add a condition gate to the step ``before``."""

    before: str
    condition: str


class Compose(StrictModel):
    """How a formula is assembled from others: expansions, maps, branches, gates and aspects."""

    expand: Annotated[list[ExpandRule], OneOrMany] = Field(default_factory=list)
    map: Annotated[list[MapRule], OneOrMany] = Field(default_factory=list)
    branch: Annotated[list[BranchRule], OneOrMany] = Field(default_factory=list)
    gate: Annotated[list[GateRule], OneOrMany] = Field(default_factory=list)
    aspects: list[str] = Field(default_factory=list)


class Around(StrictModel):
    """Steps put both before and after the advised step."""

    before: Annotated[list[Step], OneOrMany] = Field(default_factory=list)
    after: Annotated[list[Step], OneOrMany] = Field(default_factory=list)


class Advice(StrictModel):
    """Steps added before / after every step whose id matches the glob ``target``."""

    target: str
    before: Annotated[list[Step], OneOrMany] = Field(default_factory=list)
    after: Annotated[list[Step], OneOrMany] = Field(default_factory=list)
    around: Around | None = None

    @property
    def before_steps(self) -> list[Step]:
        """The steps that go before the target, ``around.before`` last (nearest the target)."""
        return [*self.before, *(self.around.before if self.around else [])]

    @property
    def after_steps(self) -> list[Step]:
        """The steps that go after the target, ``around.after`` first (nearest the target)."""
        return [*(self.around.after if self.around else []), *self.after]


class Pointcut(StrictModel):
    """Where a formula's advice may apply: an id glob, an executor kind and/or a label (all must hold)."""

    glob: str = "*"
    type: ExecutorKind | None = None
    label: str | None = None


class Formula(StrictModel):
    """A whole formula file. ``source`` (not a field) is the file it was read from, when there is one."""

    formula: str
    description: str = ""
    version: int = 1
    type: Literal["workflow", "expansion", "aspect"] = "workflow"
    extends: Annotated[list[str], StrOrList] = Field(default_factory=list)
    vars: dict[str, Var] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    template: list[Step] = Field(default_factory=list)
    compose: Compose = Field(default_factory=Compose)
    advice: Annotated[list[Advice], OneOrMany] = Field(default_factory=list)
    pointcuts: Annotated[list[Pointcut], OneOrMany] = Field(default_factory=list)
    _source: str | None = PrivateAttr(default=None)

    @field_validator("formula")
    @classmethod
    def _name(cls, value: str) -> str:
        if not FORMULA_NAME.fullmatch(value):
            raise problem(f"a formula name may contain letters, digits, '_', '.' and '-', got {value!r}")
        return value

    @field_validator("version", mode="after")
    @classmethod
    def _version(cls, value: int) -> int:
        if value < 0:
            raise problem(f"expected a version of 1 or more, got {value}")
        return value or 1  # 0 is what an unset integer looks like in some generators: read it as 1

    @field_validator("vars", mode="before")
    @classmethod
    def _var_shorthand(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        expanded: dict[object, object] = {}
        for name, decl in value.items():
            if not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or name in RESERVED_VAR_NAMES:
                raise problem(
                    "a var name must be a name like 'version' (letters, digits, '_'; not 'steps'), "
                    f"got {name!r}",
                    where=str(name),
                )
            expanded[name] = decl if isinstance(decl, dict | Var) else {"default": decl}
        return expanded

    @model_validator(mode="after")
    def _unique_ids(self) -> Formula:
        _check_unique(self.steps, "steps")
        _check_unique(self.template, "template")
        return self

    @property
    def source(self) -> str | None:
        """The file this formula was read from, or ``None``."""
        return self._source

    def __eq__(self, other: object) -> bool:
        # Where a formula was read from is not part of what it says: a stored copy equals the original.
        if not isinstance(other, Formula):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # equal formulas hold lists: they are not hashable

    def with_source(self, source: str | None) -> Formula:
        """A copy that remembers ``source`` as the file it came from."""
        copy = self.model_copy()
        copy._source = source
        return copy


def _check_unique(steps: list[Step], path: str) -> None:
    """Ids must be unique within one namespace: the formula's tree, a loop body, an expansion template."""
    seen: dict[str, str] = {}

    def walk(items: list[Step], where: str) -> None:
        for i, step in enumerate(items):
            here = f"{where}[{i}]"
            if "{" not in step.id:  # ids with placeholders are checked once rendered
                if step.id in seen:
                    raise problem(
                        f"duplicate step id {step.id!r} (first at {seen[step.id]})", where=f"{here}.id"
                    )
                seen[step.id] = here
            walk(step.children, f"{here}.children")
            if step.loop is not None:
                _check_unique(step.loop.body, f"{here}.loop.body")

    walk(steps, path)


Loop.model_rebuild()
Around.model_rebuild()
Advice.model_rebuild()

__all__ = [
    "EXECUTOR_FIELDS",
    "RESERVED_VAR_NAMES",
    "Advice",
    "AgentSpec",
    "Around",
    "BranchRule",
    "Compose",
    "Consent",
    "ExecutorKind",
    "ExpandRule",
    "Formula",
    "FormulaSpec",
    "Gate",
    "GateRule",
    "HumanSpec",
    "LlmSpec",
    "Loop",
    "MapRule",
    "OnComplete",
    "Pointcut",
    "Scalar",
    "Step",
    "ToolSpec",
    "Var",
    "VarType",
    "fits_type",
    "scalar_type",
]
