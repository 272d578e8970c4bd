"""Turning formula steps into draft plan steps, one namespace at a time.

A namespace is the formula's own steps, one iteration of a loop body (ids ``<loop>.iter<N>.<id>``) or one use
of an expansion template (ids ``<target>.<id>``). Inside it, ``needs`` and run-time references name local ids,
which map to the namespace's final ids; a name that is not local falls through to the enclosing namespace of a
loop body, and finally stands for itself.

For: cook-time conditions, id rendering, loops (``until`` loops get iteration 1 and a :class:`RuntimeLoop`),
inline expansions with their depth limit, and rendering every text field. Not for: compose rules, advice or
the final wiring of needs (cook.py, _compose.py, _advice.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from pydantic import JsonValue

from plangate.conditions import Condition, ConditionContext, ConditionSyntaxError, compile_condition
from plangate.errors import FormulaError
from plangate.formulas._schema_base import STEP_ID
from plangate.formulas.plan import (
    AgentExecutor,
    CookedStep,
    Executor,
    FormulaExecutor,
    HumanExecutor,
    LlmExecutor,
    ManualExecutor,
    PlanGate,
    RuntimeLoop,
    ToolExecutor,
    WaitsFor,
)
from plangate.formulas.ranges import parse_range
from plangate.formulas.schema import Formula, Gate, Loop, OnComplete, Step
from plangate.formulas.templates import render_text, render_value
from plangate.formulas.variables import apply_vars

MAX_EXPANSION_DEPTH = 5
MAX_ITERATIONS = 1_000
MAX_STEPS = 100_000

#: Fetches an expansion formula by name (``path`` is where it was named, for errors).
Fetch = Callable[[str, str], Formula]
Context = dict[str, JsonValue]


@dataclass(eq=False)  # drafts are compared by identity: two drafts are never "the same step"
class Draft:
    """A plan step while the plan is being assembled (mutable; becomes a :class:`CookedStep`)."""

    id: str
    title: str
    source: str
    needs: list[str] = field(default_factory=list)
    parent: str | None = None
    description: str = ""
    children: list[str] = field(default_factory=list)
    waits_for: WaitsFor | None = None
    gate: PlanGate | None = None
    retries: int = 0
    timeout: int | None = None
    labels: list[str] = field(default_factory=list)
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    on_complete: OnComplete | None = None
    executor: Executor = field(default_factory=ManualExecutor)
    from_advice: bool = False

    def to_step(self) -> CookedStep:
        """The finished, frozen step."""
        waits_for = self.waits_for
        if waits_for is None and self.children:
            waits_for = WaitsFor(mode="all-children")
        return CookedStep(
            id=self.id,
            title=self.title,
            description=self.description,
            needs=self.needs,
            parent=self.parent,
            children=self.children,
            waits_for=waits_for,
            gate=self.gate,
            retries=self.retries,
            timeout=self.timeout,
            labels=self.labels,
            metadata=self.metadata,
            on_complete=self.on_complete,
            executor=self.executor,
            source=self.source,
        )


@dataclass
class Scope:
    """One namespace: its template names, id prefix, local ids and the expansions it is nested in."""

    context: Context
    prefix: str = ""
    chain: tuple[str, ...] = ()
    up: Scope | None = None
    outside: Mapping[str, str] = field(default_factory=dict)
    local: dict[str, str] = field(default_factory=dict)

    def resolve(self, name: str) -> str:
        """The final id a name stands for here."""
        scope: Scope | None = self
        while scope is not None:
            hit = scope.local.get(name) or scope.outside.get(name)
            if hit is not None:
                return hit
            scope = scope.up
        return name

    def visible(self) -> dict[str, str]:
        """Every local name visible here that maps to a different id (what a run-time loop must remember)."""
        chain: list[Scope] = []
        scope: Scope | None = self
        while scope is not None:
            chain.append(scope)
            scope = scope.up
        names: dict[str, str] = {}
        for item in reversed(chain):
            names.update(item.outside)
            names.update(item.local)
        return {k: v for k, v in names.items() if k != v}


def merge_gates(outer: PlanGate | None, inner: PlanGate | None) -> PlanGate | None:
    """Both gates must hold: conditions joined with ``and``; the inner gate's other settings win."""
    if outer is None or inner is None:
        return inner or outer
    condition = inner.condition
    if outer.condition and inner.condition:
        condition = f"({outer.condition}) and ({inner.condition})"
    elif outer.condition:
        condition = outer.condition
    return PlanGate(
        condition=condition,
        timeout=inner.timeout if inner.timeout is not None else outer.timeout,
        timer=inner.timer if inner.timer is not None else outer.timer,
        human=inner.human if inner.human is not None else outer.human,
    )


class Builder:
    """Accumulates drafts in plan order (a parent before its children) with the aliases they leave behind.

    ``aliases`` maps an id that is gone (a step dropped by its condition, a step replaced by an expansion) to
    the ids that stand in for it in ``needs``.
    """

    def __init__(self, fetch: Fetch, *, source: str | None = None) -> None:
        self.fetch = fetch
        self.source = source
        self.drafts: list[Draft] = []
        self.by_id: dict[str, Draft] = {}
        self.aliases: dict[str, list[str]] = {}
        self.loops: list[RuntimeLoop] = []
        self._conditions: dict[str, Condition] = {}

    # -- namespaces ------------------------------------------------------------------------------------------

    def build(self, steps: Sequence[Step], scope: Scope, parent: str | None, path: str) -> list[str]:
        """Draft ``steps`` as one namespace; returns the ids of its top-level drafts in order."""
        decided: dict[int, tuple[str, bool]] = {}
        self._decide(steps, scope, path, decided, dropped_parent=None)
        top: list[str] = []
        for i, step in enumerate(steps):
            top.extend(self._step(step, scope, parent, f"{path}[{i}]", decided))
        return top

    def _decide(
        self,
        steps: Sequence[Step],
        scope: Scope,
        path: str,
        decided: dict[int, tuple[str, bool]],
        dropped_parent: str | None,
    ) -> None:
        """First pass: evaluate conditions and fix every final id, so that needs can name later steps."""
        for i, step in enumerate(steps):
            here = f"{path}[{i}]"
            keep = dropped_parent is None and self._holds(step, scope, here)
            try:
                local = self.text(step.id, scope, f"{here}.id", escape=False)
            except FormulaError:
                if keep:
                    raise
                continue  # a dropped step may name vars its condition guards against
            final = scope.prefix + local
            scope.local[local] = final
            decided[id(step)] = (final, keep)
            if not keep:
                inherited = [dropped_parent] if dropped_parent else []
                self.aliases[final] = [*self._needs(step, scope, here, strict=False), *inherited]
            self._decide(step.children, scope, f"{here}.children", decided, None if keep else final)

    def _step(
        self, step: Step, scope: Scope, parent: str | None, path: str, decided: dict[int, tuple[str, bool]]
    ) -> list[str]:
        final, keep = decided.get(id(step), ("", False))
        if not keep:
            return []
        needs = self._needs(step, scope, path, strict=True)
        if step.loop is not None:
            return [self._loop(step, step.loop, scope, parent, path, final, needs)]
        if step.expand is not None:
            return self._expand_inline(step, step.expand, scope, parent, path, final, needs)
        draft = self._draft(step, scope, parent, path, final, needs)
        for j, child in enumerate(step.children):
            draft.children.extend(self._step(child, scope, final, f"{path}.children[{j}]", decided))
        return [final]

    def _needs(self, step: Step, scope: Scope, path: str, *, strict: bool) -> list[str]:
        needs: list[str] = []
        for j, need in enumerate(step.needs):
            try:
                needs.append(scope.resolve(self.text(need, scope, f"{path}.needs[{j}]", escape=False)))
            except FormulaError:
                if strict:
                    raise
        return needs

    # -- one step --------------------------------------------------------------------------------------------

    def _draft(
        self, step: Step, scope: Scope, parent: str | None, path: str, final: str, needs: list[str]
    ) -> Draft:
        title = self.text(step.title, scope, f"{path}.title") or final
        waits_for = None
        if step.waits_for is not None:
            waits_for = WaitsFor.parse(self.text(step.waits_for, scope, f"{path}.waits_for", escape=False))
            if waits_for.step is not None:
                waits_for = WaitsFor(mode="children-of", step=scope.resolve(waits_for.step))
        on_complete = None
        if step.on_complete is not None:
            rendered = self.value(step.on_complete.vars, scope, f"{path}.on_complete.vars")
            on_complete = step.on_complete.model_copy(update={"vars": rendered})
        draft = Draft(
            id=final,
            title=title,
            source=path,
            needs=needs,
            parent=parent,
            description=self.text(step.description, scope, f"{path}.description"),
            waits_for=waits_for,
            gate=self.gate(step.gate, scope, f"{path}.gate", title),
            retries=step.retries,
            timeout=step.timeout,
            labels=[self.text(label, scope, f"{path}.labels[{i}]") for i, label in enumerate(step.labels)],
            metadata=_as_dict(self.value(step.metadata, scope, f"{path}.metadata")),
            on_complete=on_complete,
            executor=self._executor(step, scope, path, title),
        )
        self.add(draft)
        return draft

    def _executor(self, step: Step, scope: Scope, path: str, title: str) -> Executor:
        if step.tool is not None:
            return ToolExecutor(
                name=self.text(step.tool.name, scope, f"{path}.tool.name", escape=False),
                args=_as_dict(self.value(step.tool.args, scope, f"{path}.tool.args")),
                consent=step.consent,
            )
        if step.agent is not None:
            return AgentExecutor(
                prompt=self.text(step.agent.prompt, scope, f"{path}.agent.prompt"),
                tools=[self.text(t, scope, f"{path}.agent.tools", escape=False) for t in step.agent.tools],
                max_rounds=step.agent.max_rounds,
                model=step.agent.model,
                mode=step.agent.mode,
                done_when=None
                if step.agent.done_when is None
                else self.text(step.agent.done_when, scope, f"{path}.agent.done_when", escape=False),
            )
        if step.llm is not None:
            return LlmExecutor(
                prompt=self.text(step.llm.prompt, scope, f"{path}.llm.prompt"),
                output_schema=step.llm.output_schema,
                model=step.llm.model,
            )
        if step.human is not None:
            prompt = self.text(step.human.prompt, scope, f"{path}.human.prompt")
            return HumanExecutor(prompt=prompt or f"Approve '{title}'?", kind=step.human.kind)
        if step.formula is not None:
            return FormulaExecutor(
                name=self.text(step.formula.name, scope, f"{path}.formula.name", escape=False),
                vars=_as_dict(self.value(step.formula.vars, scope, f"{path}.formula.vars")),
            )
        return ManualExecutor()

    def gate(self, gate: Gate | None, scope: Scope, path: str, title: str) -> PlanGate | None:
        """The plan form of a gate: texts rendered, a bare ``human = true`` given a default prompt."""
        if gate is None:
            return None
        human = None
        if gate.human is not None:
            human = self.text(gate.human, scope, f"{path}.human") or f"Approve '{title}'?"
        condition = None
        if gate.condition is not None:
            condition = self.text(gate.condition, scope, f"{path}.condition", escape=False)
        return PlanGate(condition=condition, timeout=gate.timeout, timer=gate.timer, human=human)

    def add(self, draft: Draft) -> None:
        """Record a draft, refusing a bad or duplicate id."""
        if not STEP_ID.fullmatch(draft.id):
            raise FormulaError(
                f"step ids may contain only letters, digits, '_', '.' and '-', got {draft.id!r}",
                path=f"{draft.source}.id",
                source=self.source,
            )
        other = self.by_id.get(draft.id)
        if other is not None:
            raise FormulaError(
                f"duplicate step id {draft.id!r} (also made by {other.source})",
                path=f"{draft.source}.id",
                source=self.source,
            )
        if len(self.drafts) >= MAX_STEPS:
            raise FormulaError(
                f"the plan has more than {MAX_STEPS} steps", path=draft.source, source=self.source
            )
        self.drafts.append(draft)
        self.by_id[draft.id] = draft

    # -- loops -----------------------------------------------------------------------------------------------

    def _loop(
        self,
        step: Step,
        loop: Loop,
        scope: Scope,
        parent: str | None,
        path: str,
        final: str,
        needs: list[str],
    ) -> str:
        container = self._draft(step, scope, parent, path, final, needs)
        where = f"{path}.loop"
        if loop.until is not None:
            if loop.max is None:  # the schema refuses this; a Loop built in code may not have been validated
                raise FormulaError(
                    "an until loop needs max (the most iterations it may run)",
                    path=f"{where}.max",
                    source=self.source,
                )
            until = self.text(loop.until, scope, f"{where}.until", escape=False)
            self.loops.append(
                RuntimeLoop(
                    id=final,
                    var=loop.var,
                    until=until,
                    max=loop.max,
                    body=loop.body,
                    context=scope.context,
                    outside=scope.visible(),
                    chain=list(scope.chain),
                    source=where,
                )
            )
            values = [1]
        else:
            values = self._values(loop, scope, where)
        previous: list[str] = []
        for n, value in enumerate(values, start=1):
            top = self.iteration(loop.body, scope, final, n, value, loop.var, where)
            roots, sinks = self.roots_and_sinks(top)
            for root in roots:
                self.by_id[root].needs.extend(previous)
            previous = sinks
            container.children.extend(top)
        return final

    def iteration(
        self, body: Sequence[Step], scope: Scope, loop_id: str, n: int, value: int, var: str | None, path: str
    ) -> list[str]:
        """Draft iteration ``n`` of a loop body (the loop var set to ``value``); returns its top-level ids."""
        context = {**scope.context, var: value} if var else scope.context
        inner = Scope(context=context, prefix=f"{loop_id}.iter{n}.", chain=scope.chain, up=scope)
        return self.build(body, inner, loop_id, f"{path}.body")

    def _values(self, loop: Loop, scope: Scope, path: str) -> list[int]:
        if loop.count is not None:
            if loop.count > MAX_ITERATIONS:
                raise FormulaError(
                    f"a loop may run at most {MAX_ITERATIONS} times, got count = {loop.count}",
                    path=f"{path}.count",
                    source=self.source,
                )
            return list(range(1, loop.count + 1))
        if loop.range is None:  # the schema refuses this; a Loop built in code may not have been validated
            raise FormulaError(
                "a loop needs exactly one of count, range or until", path=path, source=self.source
            )
        text = self.text(loop.range, scope, f"{path}.range", escape=False)
        try:
            start, end = parse_range(text, path=f"{path}.range")
        except FormulaError as exc:
            shown = f" (rendered from {loop.range!r})" if text != loop.range else ""
            raise FormulaError(f"{exc.detail}{shown}", path=exc.path, source=self.source) from None
        if end - start + 1 > MAX_ITERATIONS:
            raise FormulaError(
                f"a loop may run at most {MAX_ITERATIONS} times, got the range {start}..{end}",
                path=f"{path}.range",
                source=self.source,
            )
        return list(range(start, end + 1))

    # -- expansions ------------------------------------------------------------------------------------------

    def _expand_inline(
        self, step: Step, name: str, scope: Scope, parent: str | None, path: str, final: str, needs: list[str]
    ) -> list[str]:
        title = self.text(step.title, scope, f"{path}.title") or final
        target: dict[str, JsonValue] = {
            "id": final,
            "title": title,
            "description": self.text(step.description, scope, f"{path}.description"),
        }
        return self.expand(
            self.text(name, scope, f"{path}.expand", escape=False),
            target=target,
            given=_as_dict(self.value(step.expand_vars, scope, f"{path}.expand_vars")),
            outer=scope.context,
            parent=parent,
            needs=needs,
            gate=self.gate(step.gate, scope, f"{path}.gate", title),
            path=f"{path}.expand",
            chain=scope.chain,
        )

    def expand(
        self,
        name: str,
        *,
        target: dict[str, JsonValue],
        given: Mapping[str, JsonValue],
        outer: Context,
        parent: str | None,
        needs: list[str],
        gate: PlanGate | None,
        path: str,
        chain: tuple[str, ...],
    ) -> list[str]:
        """Draft expansion ``name`` in place of step ``target['id']``; returns the template's top-level ids.

        The template's first steps take over the target's needs and gate; whatever needed the target now
        needs the template's last steps (through an alias).
        """
        if len(chain) >= MAX_EXPANSION_DEPTH:
            nested = " -> ".join((*chain, name))
            raise FormulaError(
                f"expansions nest deeper than {MAX_EXPANSION_DEPTH}: {nested}", path=path, source=self.source
            )
        formula = self.fetch(name, path)
        inherited = {k: outer[k] for k in formula.vars if k in outer}
        values, problems = apply_vars(formula.vars, {**inherited, **given})
        errors = [p for p in problems if p.level == "error"]
        if errors:
            raise FormulaError(f"expansion {name!r}: {errors[0].message}", path=path, source=self.source)
        target_id = str(target["id"])
        context = {**outer, **values, "target": target}
        inner = Scope(context=context, prefix=f"{target_id}.", chain=(*chain, name))
        top = self.build(formula.template, inner, parent, f"{path}({name}).template")
        roots, sinks = self.roots_and_sinks(top)
        for root in roots:
            draft = self.by_id[root]
            draft.needs[:0] = [n for n in needs if n not in draft.needs]
            draft.gate = merge_gates(gate, draft.gate)
        self.aliases[target_id] = sinks
        return top

    # -- helpers ---------------------------------------------------------------------------------------------

    def roots_and_sinks(self, top: Sequence[str]) -> tuple[list[str], list[str]]:
        """Among sibling ids: those needing none of the others, and those none of the others need."""
        siblings = set(top)
        needed: set[str] = set()
        roots: list[str] = []
        for step_id in top:
            inside = siblings.intersection(self.unalias(self.by_id[step_id].needs)) - {step_id}
            if not inside:
                roots.append(step_id)
            needed |= inside
        return roots, [s for s in top if s not in needed]

    def unalias(self, needs: Iterable[str]) -> list[str]:
        """``needs`` with every alias replaced, recursively, by the ids that stand in for it (order kept)."""
        result: dict[str, None] = {}
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            stand_ins = self.aliases.get(name)
            if stand_ins is None or name in self.by_id:
                result.setdefault(name, None)
                return
            for other in stand_ins:
                visit(other)

        for need in needs:
            visit(need)
        return list(result)

    def text(self, text: str, scope: Scope, path: str, *, escape: bool = True) -> str:
        """Render one text field in ``scope``."""
        return render_text(
            text, scope.context, path=path, source=self.source, refs=scope.resolve, escape=escape
        )

    def value(self, value: JsonValue, scope: Scope, path: str) -> JsonValue:
        """Render every string inside a JSON value in ``scope``."""
        return render_value(value, scope.context, path=path, source=self.source, refs=scope.resolve)

    def _holds(self, step: Step, scope: Scope, path: str) -> bool:
        if step.condition is None:
            return True
        where = f"{path}.condition"
        text = self.text(step.condition, scope, where, escape=False)
        condition = self._conditions.get(text)
        if condition is None:
            try:
                condition = compile_condition(text)
            except ConditionSyntaxError as exc:
                raise FormulaError(f"{exc.message} in {text!r}", path=where, source=self.source) from None
            self._conditions[text] = condition
        if condition.references:
            named = ", ".join(repr(r) for r in sorted(condition.references))
            raise FormulaError(
                f"a step condition is decided at cook time from vars only, but it names the step {named}; "
                "use a gate to wait on other steps",
                path=where,
                source=self.source,
            )
        typed = {k: v for k, v in scope.context.items() if not isinstance(v, dict | list)}
        # Typed values so that `vars.n > 2` compares numbers; the language compares by the value's own type.
        variables = cast("Mapping[str, str]", typed)
        return condition.evaluate(ConditionContext(vars=variables, env={})).satisfied


def _as_dict(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


__all__ = ["MAX_EXPANSION_DEPTH", "MAX_ITERATIONS", "MAX_STEPS", "Builder", "Draft", "Scope", "merge_gates"]
