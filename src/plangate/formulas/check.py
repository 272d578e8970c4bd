"""Checking a plan before it runs: everything that would make a run fail or hang, reported as issues.

Issue codes (``error`` unless marked):

==========================  ==================================================================================
``unknown-need``            a step needs a step that does not exist
``cycle``                   steps need each other in a loop (a parent also waits for its children)
``condition-syntax``        a gate or ``until`` condition, or an agent's ``done_when``, does not parse (an
                            unknown receipt field among the reasons), or a ``done_when`` reads formula steps
                            or no receipts
``condition-receipts``      a gate or ``until`` condition reads receipts, which only an agent's
                            ``done_when`` has
``done-when-tool``          (warning) an agent's ``done_when`` names a tool the step does not give its agent
``unknown-step``            a condition, ``waits_for`` or ``{{steps.<id>...}}`` names no existing step
``output-not-needed``       (warning) a step reads another's output without needing it, directly or not
``missing-var``             a required var has no value
``var-type`` / ``var-enum`` / ``var-pattern``   a var value breaks its declaration
``unknown-var``             (warning) a var that the formula does not declare
``unknown-tool``            a ``tool`` step, or an ``agent`` step's ``tools``, names a tool that is not
                            registered (only when ``tools`` is given)
``write-without-consent``   (warning) a ``tool`` step calls a write tool and says nothing of consent: each
                            run will stop and ask a person before the call (unless started with ``--yes``);
                            ``consent = "ask"`` says that is meant, ``consent = "auto"`` runs it unasked
                            (only when ``tools`` is a registry, which tells reads from writes)
``llm-schema``              an ``llm`` step's ``schema`` is not a usable JSON schema
``unsupported-executor``    a step needs a runtime that this installation does not have
``duplicate-id``            two steps share an id
``unknown-formula``         a sub-formula or ``on_complete`` formula that cannot be loaded
``schema`` / ``load-error`` / ``cook-error``   (:func:`check_formula`) the formula did not become a plan
==========================  ==================================================================================

For: :func:`check` on a plan and :func:`check_formula`, which also turns load and cook errors into issues.
Not for: running anything.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from plangate.conditions import ConditionSyntaxError, compile_condition, compile_done_when, named_tools
from plangate.conditions.ast import reads_receipts
from plangate.errors import FormulaError
from plangate.formulas._cycles import find_cycles
from plangate.formulas._executors import MAX_NESTING, schema_problem
from plangate.formulas._schema_base import suggest
from plangate.formulas._schema_errors import FormulaSchemaError
from plangate.formulas.cook import cook
from plangate.formulas.loader import FormulaLoader, Loader, SearchPath, load_formula
from plangate.formulas.plan import AgentExecutor, CookedStep, FormulaExecutor, LlmExecutor, Plan, ToolExecutor
from plangate.formulas.schema import Formula, Step
from plangate.formulas.templates import runtime_refs
from plangate.formulas.variables import apply_vars
from plangate.tools import ToolRegistry

Tools = Collection[str] | ToolRegistry
"""What ``check`` knows of the tools: their names, or the registry (which also says which ones write)."""

#: The executor kinds a formula run can execute.
SUPPORTED_EXECUTORS: frozenset[str] = frozenset({"tool", "agent", "llm", "human", "formula", "manual"})


class Issue(BaseModel):
    """One finding: ``level`` error (the run must not start) or warning, a stable ``code``, where, what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: Literal["error", "warning"]
    code: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.level}: {where}{self.message} [{self.code}]"


def check(plan: Plan, *, tools: Tools | None = None) -> list[Issue]:
    """Every issue in ``plan``, errors and warnings, in plan order.

    Args:
        plan: a cooked plan.
        tools: the registered tools (a registry, or their names); when given, executors naming other tools
            are errors, and with a registry a write step that says nothing of consent is a warning.
    """
    names, writes = _tool_names(tools)
    issues = _var_issues(plan)
    known: dict[str, CookedStep] = {}
    for step in plan.steps:
        if step.id in known:
            issues.append(
                Issue(
                    level="error",
                    code="duplicate-id",
                    path=_at(step),
                    message=f"duplicate step id {step.id!r} (also at {_at(known[step.id])})",
                )
            )
        known.setdefault(step.id, step)
    for step in plan.steps:
        issues.extend(_step_issues(step, known, names))
        issues.extend(_consent_issues(step, writes))
    for loop in plan.loops:
        local = _body_ids(plan, loop.id)
        issues.extend(_condition_issues(loop.until, f"{loop.source}.until", known.keys() | local))
    issues.extend(_cycle_issues(plan, known))
    return issues


def check_formula(
    name_or_formula: Formula | SearchPath,
    vars: Mapping[str, object] | None = None,
    tools: Tools | None = None,
    *,
    search_paths: Iterable[SearchPath] | None = None,
    loader: Loader | None = None,
) -> tuple[Plan | None, list[Issue]]:
    """Load (when given a name or path), cook and check; load and cook errors become issues too.

    Missing or invalid vars do not stop the check: they are reported, and the rest of the formula is checked
    with stand-in values.

    Returns:
        ``(plan, issues)``; ``plan`` is ``None`` when the formula could not be loaded or cooked.
    """
    try:
        if isinstance(name_or_formula, Formula):
            formula = name_or_formula
        else:
            formula = load_formula(name_or_formula, search_paths)
    except FormulaError as exc:
        return None, _error_issues(exc, "load-error", None)
    loader = loader or FormulaLoader.beside(formula, search_paths)
    try:
        plan = cook(formula, vars, loader=loader, validate_vars=False)
    except FormulaError as exc:
        return None, _error_issues(exc, "cook-error", formula.source)
    return plan, [
        *check(plan, tools=tools),
        *_formula_issues(plan, loader),
        *_recursion_issues(formula, loader),
        *_number_issues(plan),
    ]


def has_errors(issues: Iterable[Issue]) -> bool:
    """Whether any issue is an error (a run must not start)."""
    return any(issue.level == "error" for issue in issues)


def _step_issues(
    step: CookedStep, known: Mapping[str, CookedStep], tools: Collection[str] | None
) -> list[Issue]:
    at = _at(step)
    issues: list[Issue] = []
    for need in step.needs:
        if need not in known:
            issues.append(_unknown("unknown-need", f"{at}.needs", f"step {step.id!r} needs", need, known))
    if step.gate is not None and step.gate.condition is not None:
        issues.extend(_condition_issues(step.gate.condition, f"{at}.gate.condition", known.keys()))
    if step.waits_for is not None and step.waits_for.step is not None and step.waits_for.step not in known:
        issues.append(
            _unknown("unknown-step", f"{at}.waits_for", "waits_for names", step.waits_for.step, known)
        )
    executor = step.executor
    if executor.type not in SUPPORTED_EXECUTORS:
        message = f"{executor.type} steps are not supported"
        issues.append(
            Issue(level="error", code="unsupported-executor", path=f"{at}.{executor.type}", message=message)
        )
    if isinstance(executor, AgentExecutor) and executor.done_when is not None:
        issues.extend(_done_when_issues(executor, f"{at}.agent.done_when"))
    if isinstance(executor, LlmExecutor) and executor.output_schema is not None:
        problem = schema_problem(executor.output_schema)
        if problem is not None:
            issues.append(Issue(level="error", code="llm-schema", path=f"{at}.llm.schema", message=problem))
    if tools is not None:
        named: list[tuple[str, str]] = []
        if isinstance(executor, ToolExecutor):
            named.append((executor.name, f"{at}.tool.name"))
        elif isinstance(executor, AgentExecutor):
            named.extend((tool, f"{at}.agent.tools") for tool in executor.tools)
        for tool, where in named:
            if tool not in tools:
                issues.append(_unknown("unknown-tool", where, "the executor names", tool, tools, noun="tool"))
    issues.extend(_ref_issues(step, known))
    return issues


def _tool_names(tools: Tools | None) -> tuple[Collection[str] | None, frozenset[str]]:
    if isinstance(tools, ToolRegistry):
        return tools.names(), frozenset(tool.name for tool in tools if tool.effect == "write")
    return (None if tools is None else list(tools)), frozenset()


def _consent_issues(step: CookedStep, writes: Collection[str]) -> list[Issue]:
    executor = step.executor
    if not isinstance(executor, ToolExecutor) or executor.name not in writes or executor.consent is not None:
        return []
    message = (
        f"step {step.id!r} calls the write tool {executor.name!r} and says nothing of consent: every run "
        "will stop and ask a person before the call (unless started with --yes); "
        'say consent = "ask" if that is meant, or consent = "auto" to run it without asking'
    )
    return [
        Issue(level="warning", code="write-without-consent", path=f"{_at(step)}.consent", message=message)
    ]


def _ref_issues(step: CookedStep, known: Mapping[str, CookedStep]) -> list[Issue]:
    texts = {
        "title": step.title,
        "description": step.description,
        "executor": vars(step.executor),  # its fields are all JSON values: nothing to dump
        "gate": step.gate.human if step.gate is not None else None,
        "metadata": step.metadata,
        "on_complete": step.on_complete.vars if step.on_complete is not None else None,
    }
    issues: list[Issue] = []
    for ref, _key in dict.fromkeys(runtime_refs(texts)):
        where = _at(step)
        if ref not in known:
            issues.append(_unknown("unknown-step", where, "{{steps...}} reads", ref, known))
        elif not _depends_on(step.id, ref, known):
            issues.append(
                Issue(
                    level="warning",
                    code="output-not-needed",
                    path=where,
                    message=f"step {step.id!r} reads the output of {ref!r} but does not need it, "
                    "so it may start before that output exists",
                )
            )
    return issues


def _done_when_issues(executor: AgentExecutor, path: str) -> list[Issue]:
    text = executor.done_when or ""
    try:
        condition = compile_done_when(text)
    except ConditionSyntaxError as exc:
        return [
            Issue(level="error", code="condition-syntax", path=path, message=f"{exc.message} in {text!r}")
        ]
    given = ", ".join(executor.tools) or "none"
    return [
        Issue(
            level="warning",
            code="done-when-tool",
            path=path,
            message=f"done_when names the tool {name!r}, which the step does not give its agent (its tools: "
            f"{given}){suggest(name, executor.tools)}: no receipt of it can make the condition hold",
        )
        for name in named_tools(condition)
        if name not in executor.tools and name != "ask_user"
    ]


def _condition_issues(text: str, path: str, known: Collection[str]) -> list[Issue]:
    try:
        condition = compile_condition(text)
    except ConditionSyntaxError as exc:
        return [
            Issue(level="error", code="condition-syntax", path=path, message=f"{exc.message} in {text!r}")
        ]
    if reads_receipts(condition.ast):
        kind = "until" if path.endswith(".until") else "gate"
        message = (
            f"receipts are an agent's evidence, read by its done_when; a formula's {kind} condition has none "
            f"to read, so it could never hold, in {text!r}"
        )
        return [Issue(level="error", code="condition-receipts", path=path, message=message)]
    return [
        _unknown("unknown-step", path, "the condition names", ref, known)
        for ref in condition.references
        if ref not in known
    ]


def _cycle_issues(plan: Plan, known: Mapping[str, CookedStep]) -> list[Issue]:
    edges: dict[str, list[str]] = {}
    for step in plan.steps:
        # A parent completes only after its children: that is an edge too, and needing an ancestor deadlocks.
        edges[step.id] = [n for n in (*step.needs, *step.children) if n in known]
    issues: list[Issue] = []
    for cycle in find_cycles([s.id for s in plan.steps], edges):
        shown = " -> ".join((*cycle, cycle[0]))
        family = any(known[b].parent == a for a, b in zip(cycle, (*cycle[1:], cycle[0]), strict=True))
        note = " (a parent completes only after its children)" if family else ""
        issues.append(
            Issue(
                level="error",
                code="cycle",
                path=f"{_at(known[cycle[0]])}.needs",
                message=f"cycle: {shown}{note}",
            )
        )
    return issues


def _var_issues(plan: Plan) -> list[Issue]:
    _, problems = apply_vars(plan.var_specs, plan.vars)
    return [Issue(level=p.level, code=p.code, path=p.path, message=p.message) for p in problems]


def _formula_issues(plan: Plan, loader: Loader) -> list[Issue]:
    issues: list[Issue] = []
    checked: dict[str, str | None] = {}
    for step in plan.steps:
        names: list[tuple[str, str]] = []
        if isinstance(step.executor, FormulaExecutor):
            names.append((step.executor.name, f"{_at(step)}.formula.name"))
        if step.on_complete is not None:
            names.append((step.on_complete.formula, f"{_at(step)}.on_complete.formula"))
        for name, where in names:
            if name not in checked:
                try:
                    loader(name)
                    checked[name] = None
                except FormulaError as exc:
                    checked[name] = str(exc)
            problem = checked[name]
            if problem is not None:
                issues.append(Issue(level="error", code="unknown-formula", path=where, message=problem))
    return issues


def _recursion_issues(formula: Formula, loader: Loader) -> list[Issue]:
    """A formula that runs itself again through the formulas its steps run: an error when nothing can end
    it, a warning when a condition or a gate stands on the way (the runtime stops it ``MAX_NESTING`` deep)."""
    issues: list[Issue] = []
    for index, step in enumerate(formula.steps):
        for name, conditional in _sub_formulas([step]):
            cycle = _runs_itself(formula.formula, name, loader)
            if cycle is not None:
                issues.append(
                    _cycle_issue(formula.formula, [(name, conditional), *cycle[1:]], f"steps[{index}]")
                )
                break
    return issues


def _runs_itself(root: str, name: str, loader: Loader) -> list[tuple[str, bool]] | None:
    """The sub-formulas from ``name`` back to ``root`` when ``name`` runs ``root`` again, each with whether a
    condition or a gate stands before it (a recursion that may end); None when it never does."""
    seen: set[str] = set()
    stack: list[tuple[str, list[tuple[str, bool]]]] = [(name, [(name, False)])]
    while stack:
        current, path = stack.pop()
        if current == root:
            return path
        if current in seen or "{{" in current:
            continue
        seen.add(current)
        try:
            formula = loader(current)
        except FormulaError:
            continue  # reported where it is named
        for sub, conditional in _sub_formulas(formula.steps):
            stack.append((sub, [*path, (sub, conditional)]))
    return None


def _sub_formulas(steps: Iterable[Step]) -> Iterator[tuple[str, bool]]:
    """The formulas ``steps`` run (sub-formula steps, fan-outs), each with whether a condition or a gate
    stands before it; children and loop bodies included."""
    for step in steps:
        conditional = step.condition is not None or step.gate is not None
        if step.formula is not None:
            yield step.formula.name, conditional
        if step.on_complete is not None:
            yield step.on_complete.formula, conditional
        inner = [*step.children, *(step.loop.body if step.loop is not None else [])]
        yield from ((sub, conditional or inner_cond) for sub, inner_cond in _sub_formulas(inner))


def _cycle_issue(root: str, cycle: list[tuple[str, bool]], where: str) -> Issue:
    chain = " -> ".join([root, *(name for name, _ in cycle)])
    if any(conditional for _, conditional in cycle):
        return Issue(
            level="warning",
            code="formula-runs-itself",
            path=where,
            message=f"runs itself ({chain}) under a condition or gate: each run nests inside the last "
            f"until it no longer holds, at most {MAX_NESTING} deep",
        )
    return Issue(
        level="error",
        code="formula-runs-itself",
        path=where,
        message=f"runs itself without end: {chain}; each run would nest inside the last",
    )


def _number_issues(plan: Plan) -> list[Issue]:
    """NaN and infinities, which a TOML file may write and JSON, where a run keeps its plan, cannot (a plan
    built in code with one is refused when its run starts)."""
    found = [
        *((where, value) for where, value in _non_finite(plan.vars, "vars")),
        *(found for step in plan.steps for found in _step_numbers(step)),
        *(found for loop in plan.loops for found in _non_finite(vars(loop), loop.source or loop.id)),
    ]
    return [
        Issue(
            level="error",
            code="non-finite-number",
            path=where,
            message=f"{value} is not a number JSON can hold, and a run keeps its plan as JSON",
        )
        for where, value in found
    ]


def _step_numbers(step: CookedStep) -> Iterator[tuple[str, float]]:
    at = _at(step)
    for name, value in vars(step).items():
        if name != "executor":
            yield from _non_finite(value, f"{at}.{name}")
    yield from _non_finite(vars(step.executor), f"{at}.{step.executor.type}")  # as the file names it


def _non_finite(value: object, path: str) -> Iterator[tuple[str, float]]:
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")
    elif isinstance(value, BaseModel):
        yield from _non_finite(vars(value), path)


def _error_issues(exc: FormulaError, code: str, source: str | None) -> list[Issue]:
    prefix = f"{exc.source}: " if exc.source is not None and exc.source != source else ""
    if isinstance(exc, FormulaSchemaError):
        return [Issue(level="error", code="schema", path=p, message=f"{prefix}{m}") for p, m in exc.problems]
    return [Issue(level="error", code=code, path=exc.path, message=f"{prefix}{exc.detail}")]


def _unknown(
    code: str, path: str, what: str, name: str, known: Iterable[str], *, noun: str = "step"
) -> Issue:
    hint = suggest(name, known)
    return Issue(level="error", code=code, path=path, message=f"{what} unknown {noun} {name!r}{hint}")


def _depends_on(step_id: str, other: str, known: Mapping[str, CookedStep]) -> bool:
    if other in known[step_id].needs:
        return True
    seen = {step_id}
    stack = list(known[step_id].needs)
    while stack:
        current = stack.pop()
        if current == other:
            return True
        if current in seen or current not in known:
            continue
        seen.add(current)
        stack.extend(known[current].needs)
    return False


def _body_ids(plan: Plan, loop_id: str) -> set[str]:
    prefix = f"{loop_id}.iter1."
    return {s.id[len(prefix) :] for s in plan.steps if s.id.startswith(prefix)}


def _at(step: CookedStep) -> str:
    return step.source or step.id


__all__ = ["SUPPORTED_EXECUTORS", "Issue", "check", "check_formula", "has_errors"]
