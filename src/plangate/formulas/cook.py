"""Cooking: a formula and var values in, a :class:`Plan` (a DAG of concrete steps) out.

The pipeline: resolve ``extends`` → apply and validate vars → draft the steps (cook-time conditions, loops,
inline expansions, templates) → compose (branch, gate, expand, map) → advice and aspects → needs: aliases
resolved and each step given its ancestors' needs. ``until`` loops stop at iteration 1; the executor adds the
next with :func:`expand_iteration`, which runs the same drafting, maps and advice for that iteration alone.

For: orchestrating those phases and fetching the formulas a formula uses. Not for: the phases themselves
(_build.py, _compose.py, _advice.py) or running a plan (the executor).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import JsonValue

from plangate.errors import FormulaError, FormulaNotFound
from plangate.formulas._advice import apply_advice
from plangate.formulas._build import Builder, Context, Draft, Scope
from plangate.formulas._compose import apply_compose, apply_map
from plangate.formulas.loader import FormulaLoader, Loader
from plangate.formulas.plan import AdviceRule, CookedStep, MapRecord, Plan
from plangate.formulas.resolve import resolve
from plangate.formulas.schema import Formula, Step, Var
from plangate.formulas.variables import VarProblem, apply_vars


def cook(
    formula: Formula,
    vars: Mapping[str, object] | None = None,
    *,
    loader: Loader | None = None,
    validate_vars: bool = True,
) -> Plan:
    """Cook ``formula`` with ``vars`` into a plan.

    Args:
        formula: a loaded formula (``extends`` is resolved here).
        vars: var values; strings are coerced to each var's declared type (``"3"`` → 3 for an ``int`` var).
        loader: fetches the formulas this one names (parents, expansions, aspects); by default a
            :class:`FormulaLoader` that looks in the formula's folder first.
        validate_vars: when true, a missing required var or a value breaking its type / enum / pattern is a
            :class:`FormulaError`. When false (``check`` does this), such vars get a stand-in value for
            rendering, are left out of ``Plan.vars`` (or kept as given), and ``check`` reports them.

    Raises:
        FormulaError: anything that stops the plan from being built, with the formula path and file.
    """
    loader = loader or FormulaLoader.beside(formula)
    resolved = resolve(formula, loader)
    values, problems = apply_vars(resolved.vars, vars or {})
    errors = [p for p in problems if p.level == "error"]
    if errors and validate_vars:
        raise _var_error(errors, resolved.source)
    context: Context = {**_stand_ins(resolved.vars, errors), **values}
    fetcher = _Fetcher(loader, resolved.source)
    builder = Builder(fetcher.expansion, source=resolved.source)
    builder.build(resolved.steps, Scope(context=context), None, "steps")
    maps = apply_compose(builder, resolved.compose, context)
    rules = _advice_rules(resolved, context, fetcher)
    _settle(builder)
    apply_advice(builder, rules, list(builder.drafts))
    _inherit_needs(builder.drafts, {})
    if builder.loops:
        _preload(fetcher, [loop.body for loop in builder.loops], maps)
    return Plan(
        formula=resolved.formula,
        source=resolved.source,
        vars=values,
        var_specs=resolved.vars,
        steps=[d.to_step() for d in builder.drafts],
        loops=builder.loops,
        advice=rules,
        maps=maps,
        expansions=fetcher.expansions,
    )


def expand_iteration(plan: Plan, loop_id: str, n: int) -> list[CookedStep]:
    """The steps of iteration ``n`` of the ``until`` loop ``loop_id``, to add to a running plan.

    Pure: it reads only ``plan``. The steps are those cooking would have made for that iteration: ids
    ``<loop>.iter<n>.<body id>``, the loop var set to ``n``, the plan's maps and advice applied, the first
    steps needing the last steps of iteration ``n - 1``, every step needing the loop step's own needs.

    Raises:
        FormulaError: no such loop, or ``n`` outside ``1..max``.
    """
    loop = plan.loop(loop_id)
    if not 1 <= n <= loop.max:
        raise FormulaError(
            f"iteration {n} of loop {loop_id!r} is outside 1..{loop.max}",
            path=loop.source,
            source=plan.source,
        )
    container = plan.step(loop_id)

    def fetch(name: str, path: str) -> Formula:
        found = plan.expansions.get(name)
        if found is None:
            raise FormulaError(f"expansion {name!r} is not part of the plan", path=path, source=plan.source)
        return found

    builder = Builder(fetch, source=plan.source)
    scope = Scope(context=dict(loop.context), chain=tuple(loop.chain), outside=loop.outside)
    previous: list[str] = []
    if n > 1:
        # Iteration n - 1 is drafted again so that maps and advice rewire its last steps as cooking did.
        _, previous = builder.roots_and_sinks(
            builder.iteration(loop.body, scope, loop_id, n - 1, n - 1, loop.var, loop.source)
        )
    top = builder.iteration(loop.body, scope, loop_id, n, n, loop.var, loop.source)
    roots, _ = builder.roots_and_sinks(top)
    for root in roots:
        builder.by_id[root].needs.extend(previous)
    for record in plan.maps:
        apply_map(builder, record, dict(loop.context), list(builder.drafts))
    _settle(builder)
    apply_advice(builder, plan.advice, list(builder.drafts))
    _inherit_needs(builder.drafts, {loop_id: container.needs})
    prefix = f"{loop_id}.iter{n}."
    return [d.to_step() for d in builder.drafts if d.id.startswith(prefix)]


class _Fetcher:
    """Loads, resolves and type-checks the expansions and aspects a formula names, each once."""

    def __init__(self, loader: Loader, source: str | None) -> None:
        self._loader = loader
        self._source = source
        self.expansions: dict[str, Formula] = {}
        self._cache: dict[str, Formula] = {}

    def expansion(self, name: str, path: str) -> Formula:
        formula = self._get(name, path, "expansion")
        if not formula.template:
            raise FormulaError(f"expansion {name!r} has no template steps", path=path, source=self._source)
        self.expansions[name] = formula
        return formula

    def aspect(self, name: str, path: str) -> Formula:
        return self._get(name, path, "aspect")

    def _get(self, name: str, path: str, kind: str) -> Formula:
        formula = self._cache.get(name)
        if formula is None:
            try:
                formula = resolve(self._loader(name), self._loader)
            except FormulaNotFound as exc:
                if exc.source is not None:
                    raise
                raise FormulaNotFound(exc.detail, path=path, source=self._source) from None
            self._cache[name] = formula
        if formula.type != kind:
            raise FormulaError(
                f"formula {name!r} is of type {formula.type!r}, expected an {kind}",
                path=path,
                source=self._source,
            )
        return formula


def _advice_rules(formula: Formula, context: Context, fetcher: _Fetcher) -> list[AdviceRule]:
    rules = [
        AdviceRule(advice=advice, pointcuts=formula.pointcuts, context=context, origin=f"advice[{i}]")
        for i, advice in enumerate(formula.advice)
    ]
    for j, name in enumerate(formula.compose.aspects):
        where = f"compose.aspects[{j}]"
        aspect = fetcher.aspect(name, where)
        inherited = {k: context[k] for k in aspect.vars if k in context}
        values, problems = apply_vars(aspect.vars, inherited)
        errors = [p for p in problems if p.level == "error"]
        if errors:
            raise FormulaError(f"aspect {name!r}: {errors[0].message}", path=where, source=formula.source)
        aspect_context: Context = {**context, **values}
        rules.extend(
            AdviceRule(
                advice=advice,
                pointcuts=aspect.pointcuts,
                context=aspect_context,
                origin=f"{where}({name}).advice[{i}]",
            )
            for i, advice in enumerate(aspect.advice)
        )
    return rules


def _settle(builder: Builder) -> None:
    """Replace every alias in needs (dropped and expanded steps) by the ids that stand in for it."""
    for draft in builder.drafts:
        if any(need in builder.aliases for need in draft.needs):
            draft.needs = builder.unalias(draft.needs)


def _inherit_needs(drafts: list[Draft], outside: Mapping[str, list[str]]) -> None:
    """Give each step its ancestors' needs: a child cannot start before its parent could."""
    by_id = {d.id: d for d in drafts}
    done: dict[str, list[str]] = dict(outside)

    def full(draft: Draft) -> list[str]:
        cached = done.get(draft.id)
        if cached is not None:
            return cached
        needs = list(draft.needs)
        if draft.parent is not None:
            parent = by_id.get(draft.parent)
            inherited = full(parent) if parent is not None else done.get(draft.parent, [])
            needs.extend(n for n in inherited if n not in needs and n != draft.id)
        done[draft.id] = needs
        return needs

    for draft in drafts:
        draft.needs = full(draft)


def _stand_ins(specs: Mapping[str, Var], errors: Iterable[VarProblem]) -> Context:
    """Values for missing required vars, so that a formula can still be drafted and checked without them."""
    stand_ins: Context = {}
    for problem in errors:
        if problem.code != "missing-var":
            continue
        spec = specs[problem.name]
        if spec.enum:
            stand_ins[problem.name] = spec.enum[0]
        else:
            defaults: dict[str, JsonValue] = {"int": 1, "float": 1.0, "bool": False}
            stand_ins[problem.name] = defaults.get(spec.effective_type, f"<{problem.name}>")
    return stand_ins


def _var_error(errors: list[VarProblem], source: str | None) -> FormulaError:
    first = errors[0]
    more = (
        f" (and {len(errors) - 1} more var problem{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    return FormulaError(f"{first.message}{more}", path=first.path, source=source)


def _preload(fetcher: _Fetcher, bodies: Iterable[Iterable[Step]], maps: Iterable[MapRecord]) -> None:
    """Load every expansion a run-time loop iteration may use: :func:`expand_iteration` has no loader."""
    pending = [record.with_ for record in maps]
    steps = [step for body in bodies for step in body]
    while steps:
        step = steps.pop()
        steps.extend(step.children)
        if step.loop is not None:
            steps.extend(step.loop.body)
        if step.expand is not None and "{" not in step.expand:
            pending.append(step.expand)
    while pending:
        name = pending.pop()
        if name in fetcher.expansions:
            continue
        formula = fetcher.expansion(name, "loop.body")
        pending.extend(s.expand for s in _walk(formula.template) if s.expand is not None)


def _walk(steps: Iterable[Step]) -> Iterable[Step]:
    for step in steps:
        yield step
        yield from _walk(step.children)
        if step.loop is not None:
            yield from _walk(step.loop.body)


__all__ = ["cook", "expand_iteration"]
