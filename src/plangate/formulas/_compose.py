"""Applying a formula's ``compose`` rules to its drafted steps: branches, gates, expansions and maps.

Order: ``branch`` and ``gate`` first (they only add needs and conditions, which an expansion then hands to the
template's first steps), then ``expand``, then ``map``. A rule that names a step dropped by its condition is
skipped; a rule that names a step that never existed is an error with a did-you-mean.

For: rules that name cook-time step ids. Not for: advice and aspects (_advice.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from pydantic import JsonValue

from plangate.errors import FormulaError
from plangate.formulas._build import Builder, Context, Draft, Scope, merge_gates
from plangate.formulas._schema_base import suggest
from plangate.formulas.plan import MapRecord, PlanGate
from plangate.formulas.schema import Compose


def apply_compose(builder: Builder, compose: Compose, context: Context) -> list[MapRecord]:
    """Apply every compose rule; returns the maps as applied (kept for loop iterations added at run time)."""
    for i, branch in enumerate(compose.branch):
        where = f"compose.branch[{i}]"
        origin = _draft(
            builder, builder_text(builder, branch.from_, context, f"{where}.from"), f"{where}.from"
        )
        source_id = origin.id if origin is not None else branch.from_
        members: list[str] = []
        for j, name in enumerate(branch.steps):
            member = _draft(
                builder, builder_text(builder, name, context, f"{where}.steps[{j}]"), f"{where}.steps"
            )
            if member is not None:
                _add_need(member, source_id)
                members.append(member.id)
        if branch.join is not None:
            join = _draft(
                builder, builder_text(builder, branch.join, context, f"{where}.join"), f"{where}.join"
            )
            if join is not None:
                for member_id in members:
                    _add_need(join, member_id)
    for i, rule in enumerate(compose.gate):
        where = f"compose.gate[{i}]"
        target = _draft(
            builder, builder_text(builder, rule.before, context, f"{where}.before"), f"{where}.before"
        )
        if target is not None:
            condition = builder_text(builder, rule.condition, context, f"{where}.condition")
            target.gate = merge_gates(PlanGate(condition=condition), target.gate)
    for i, expand in enumerate(compose.expand):
        where = f"compose.expand[{i}]"
        target = _draft(
            builder, builder_text(builder, expand.target, context, f"{where}.target"), f"{where}.target"
        )
        if target is not None:
            given = _render_vars(builder, expand.vars, context, f"{where}.vars")
            replace_all(builder, [target], expand.with_, given, context, where)
    maps: list[MapRecord] = []
    for i, mapping in enumerate(compose.map):
        where = f"compose.map[{i}]"
        record = MapRecord(
            select=mapping.select,
            with_=mapping.with_,
            vars=_render_vars(builder, mapping.vars, context, f"{where}.vars"),
            origin=where,
        )
        maps.append(record)
        apply_map(builder, record, context, builder.drafts)
    return maps


def apply_map(builder: Builder, record: MapRecord, context: Context, candidates: Sequence[Draft]) -> None:
    """Expand every candidate leaf step whose id matches the map's glob."""
    targets = [
        d
        for d in candidates
        if not d.children and not d.from_advice and d.id in builder.by_id and fnmatchcase(d.id, record.select)
    ]
    if targets:
        replace_all(builder, targets, record.with_, record.vars, context, record.origin)


def replace_all(
    builder: Builder,
    targets: Sequence[Draft],
    name: str,
    given: dict[str, JsonValue],
    context: Context,
    where: str,
) -> None:
    """Replace each target by expansion ``name``; the template takes the target's place in the plan order."""
    replaced: dict[int, list[Draft]] = {}
    for target in targets:
        if target.children:
            raise FormulaError(
                f"cannot expand {target.id!r}: it has children, and an expansion replaces the whole step",
                path=where,
                source=builder.source,
            )
        del builder.by_id[target.id]
        mark = len(builder.drafts)
        top = builder.expand(
            name,
            target={"id": target.id, "title": target.title, "description": target.description},
            given=given,
            outer=context,
            parent=target.parent,
            needs=target.needs,
            gate=target.gate,
            path=f"{where}.with",
            chain=(),
        )
        replaced[id(target)] = builder.drafts[mark:]
        del builder.drafts[mark:]
        parent = builder.by_id.get(target.parent) if target.parent is not None else None
        if parent is not None:  # a run-time iteration's loop step is not drafted again
            parent.children = [
                c for child in parent.children for c in (top if child == target.id else [child])
            ]
    builder.drafts = [new for d in builder.drafts for new in replaced.get(id(d), [d])]


def builder_text(builder: Builder, text: str, context: Context, path: str) -> str:
    """Render a compose field (an id, a condition) with the formula's vars; no escaping."""
    return builder.text(text, Scope(context=context), path, escape=False)


def _render_vars(
    builder: Builder, values: dict[str, JsonValue], context: Context, path: str
) -> dict[str, JsonValue]:
    rendered = builder.value(values, Scope(context=context), path)
    return rendered if isinstance(rendered, dict) else {}


def _draft(builder: Builder, step_id: str, path: str) -> Draft | None:
    found = builder.by_id.get(step_id)
    if found is not None:
        return found
    if step_id in builder.aliases:
        return None  # dropped by its condition (or already replaced): nothing to apply the rule to
    hint = suggest(step_id, builder.by_id)
    raise FormulaError(f"unknown step {step_id!r}{hint}", path=path, source=builder.source)


def _add_need(draft: Draft, step_id: str) -> None:
    if step_id not in draft.needs:
        draft.needs.append(step_id)


__all__ = ["apply_compose", "apply_map", "builder_text", "replace_all"]
