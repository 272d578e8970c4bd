"""Advice: steps woven before and after every step that matches a glob, from the formula or its aspects.

Weaving, for a target T matched by an advice's ``target`` glob (and by one of its formula's ``pointcuts``,
when it has any): the ``before`` steps run in a chain that starts with T's needs, and T also needs the last of
them; the ``after`` steps run in a chain after T, and whatever needed T now needs the last of them, so that T
"as advised" completes when its after-advice does. Advice steps are T's siblings with ids ``<T>.<advice id>``;
their templates may use ``{{step.id}}``, ``{{step.title}}`` and ``{{step.description}}``. Steps made by advice
are never themselves advised.

For: choosing targets and weaving. Not for: loading aspect formulas (cook.py fetches them).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from itertools import pairwise

from pydantic import JsonValue

from plangate.formulas._build import Builder, Draft, Scope
from plangate.formulas.plan import AdviceRule
from plangate.formulas.schema import Pointcut, Step


def apply_advice(builder: Builder, rules: Sequence[AdviceRule], candidates: Sequence[Draft]) -> None:
    """Weave every rule, in order, into the candidates it matches."""
    for rule in rules:
        targets = [
            d
            for d in candidates
            if not d.from_advice
            and d.id in builder.by_id
            and fnmatchcase(d.id, rule.advice.target)
            and _in_pointcuts(d, rule.pointcuts)
        ]
        if targets:
            _weave(builder, rule, targets)


def _weave(builder: Builder, rule: AdviceRule, targets: list[Draft]) -> None:
    start = len(builder.drafts)
    before: dict[str, list[str]] = {}
    after: dict[str, list[str]] = {}
    steps_before = rule.advice.before_steps
    steps_after = rule.advice.after_steps
    for target in targets:
        if steps_before:
            top = _chain(builder, rule, target, steps_before, "before")
            first = builder.by_id[top[0]]
            first.needs[:0] = [n for n in target.needs if n not in first.needs]
            target.needs.append(top[-1])
            before[target.id] = top
    # Dependents are collected after every before-chain exists: a before-chain copies its target's needs.
    dependents: dict[str, list[Draft]] = {}
    for draft in builder.drafts:
        for need in draft.needs:
            dependents.setdefault(need, []).append(draft)
    for target in targets:
        if steps_after:
            top = _chain(builder, rule, target, steps_after, "after")
            builder.by_id[top[0]].needs.append(target.id)
            last = top[-1]
            for dependent in dependents.get(target.id, []):
                dependent.needs = [last if n == target.id else n for n in dependent.needs]
            after[target.id] = top
    _place(builder, start, before, after)


def _chain(builder: Builder, rule: AdviceRule, target: Draft, steps: list[Step], side: str) -> list[str]:
    """Draft one side of the advice for ``target``; its top-level steps run one after the other."""
    step_info: JsonValue = {"id": target.id, "title": target.title, "description": target.description}
    scope = Scope(context={**rule.context, "step": step_info}, prefix=f"{target.id}.")
    mark = len(builder.drafts)
    top = builder.build(steps, scope, target.parent, f"{rule.origin}.{side}")
    for draft in builder.drafts[mark:]:
        draft.from_advice = True
    for earlier, later in pairwise(top):
        needs = builder.by_id[later].needs
        if earlier not in needs:
            needs.append(earlier)
    return top


def _place(builder: Builder, start: int, before: dict[str, list[str]], after: dict[str, list[str]]) -> None:
    """Put advice drafts next to their targets, in the plan order and in the parents' children lists."""
    woven = builder.drafts[start:]
    del builder.drafts[start:]
    by_target: dict[str, tuple[list[Draft], list[Draft]]] = {}
    owner: dict[str, tuple[str, int]] = {}
    for target_id, ids in before.items():
        for step_id in ids:
            owner[step_id] = (target_id, 0)
    for target_id, ids in after.items():
        for step_id in ids:
            owner[step_id] = (target_id, 1)
    current: tuple[str, int] | None = None
    for draft in woven:
        # Children of an advice step follow it; they belong to the same target and side.
        current = owner.get(draft.id, current)
        if current is not None:
            by_target.setdefault(current[0], ([], []))[current[1]].append(draft)
    ordered: list[Draft] = []
    for draft in builder.drafts:
        sides = by_target.get(draft.id)
        if sides is None:
            ordered.append(draft)
        else:
            ordered.extend((*sides[0], draft, *sides[1]))
    builder.drafts = ordered
    for draft in builder.drafts:
        if any(child in before or child in after for child in draft.children):
            draft.children = [
                c for child in draft.children for c in (*before.get(child, []), child, *after.get(child, []))
            ]


def _in_pointcuts(draft: Draft, pointcuts: Sequence[Pointcut]) -> bool:
    if not pointcuts:
        return True
    return any(
        fnmatchcase(draft.id, cut.glob)
        and (cut.type is None or draft.executor.type == cut.type)
        and (cut.label is None or cut.label in draft.labels)
        for cut in pointcuts
    )


__all__ = ["apply_advice"]
