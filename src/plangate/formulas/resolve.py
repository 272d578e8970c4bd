"""Applying ``extends``: a formula built on others, merged into one formula with no ``extends`` left.

For: the merge rules (parents first, in the order listed, then the child; the child wins) and the cycle error
``circular extends: a -> b -> a``. Not for: loading files (loader.py) or expansions and aspects, which are
other formulas used while cooking (cook.py).

Merge rules: vars merge by name, the child's declaration replacing the parent's whole; a child step with the
id of a parent step (at any depth of its children) replaces it in place, other child steps are appended;
``template`` merges like ``steps``; ``advice``, ``pointcuts`` and every ``compose`` list are concatenated,
parents first, without duplicates; ``description``, ``version`` and ``type`` come from the child when it sets
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from plangate.errors import FormulaError
from plangate.formulas.loader import FormulaLoader, Loader
from plangate.formulas.schema import Compose, Formula, Step

_T = TypeVar("_T")


def resolve(formula: Formula, loader: Loader | None = None) -> Formula:
    """Merge every formula ``formula`` extends (recursively) into one formula with an empty ``extends``.

    Args:
        formula: the formula as loaded.
        loader: fetches a formula by name; by default a :class:`FormulaLoader` that looks in the formula's own
            folder first, then the default search path.

    Raises:
        FormulaError: a cycle (``circular extends: a -> b -> a``), or a parent that cannot be loaded.
    """
    if not formula.extends:
        return formula
    return _resolve(formula, loader or FormulaLoader.beside(formula), (formula.formula,))


def _resolve(formula: Formula, loader: Loader, chain: tuple[str, ...]) -> Formula:
    merged: Formula | None = None
    for i, name in enumerate(formula.extends):
        if name in chain:
            cycle = " -> ".join((*chain, name))
            raise FormulaError(f"circular extends: {cycle}", path=f"extends[{i}]", source=formula.source)
        try:
            parent = loader(name)
        except FormulaError as exc:
            if exc.source is not None and exc.source != formula.source:
                raise  # the parent exists but is broken: its own file and path say where
            raise type(exc)(exc.detail, path=f"extends[{i}]", source=formula.source) from None
        parent = _resolve(parent, loader, (*chain, name)) if parent.extends else parent
        merged = parent if merged is None else merge(merged, parent)
    if merged is None:  # the caller resolves only a formula that extends another
        return formula
    return merge(merged, formula)


def merge(parent: Formula, child: Formula) -> Formula:
    """``child`` laid over ``parent`` by the rules in this module's docstring; ``extends`` ends empty."""
    own = child.model_fields_set
    compose = Compose(
        expand=_union(parent.compose.expand, child.compose.expand),
        map=_union(parent.compose.map, child.compose.map),
        branch=_union(parent.compose.branch, child.compose.branch),
        gate=_union(parent.compose.gate, child.compose.gate),
        aspects=_union(parent.compose.aspects, child.compose.aspects),
    )
    merged = child.model_copy(
        update={
            "description": child.description if "description" in own else parent.description,
            "version": child.version if "version" in own else parent.version,
            "type": child.type if "type" in own else parent.type,
            "extends": [],
            "vars": {**parent.vars, **child.vars},
            "steps": merge_steps(parent.steps, child.steps),
            "template": merge_steps(parent.template, child.template),
            "compose": compose,
            "advice": _union(parent.advice, child.advice),
            "pointcuts": _union(parent.pointcuts, child.pointcuts),
        }
    )
    return merged.with_source(child.source)


def merge_steps(parent: Sequence[Step], child: Sequence[Step]) -> list[Step]:
    """Parent steps, each replaced in place by a child step of the same id; other child steps appended."""
    result = list(parent)
    for step in child:
        replaced = _replace(result, step)
        if replaced is None:
            result.append(step)
        else:
            result = replaced
    return result


def _replace(steps: list[Step], new: Step) -> list[Step] | None:
    for i, step in enumerate(steps):
        if step.id == new.id:
            return [*steps[:i], new, *steps[i + 1 :]]
        inner = _replace(step.children, new)
        if inner is not None:
            return [*steps[:i], step.model_copy(update={"children": inner}), *steps[i + 1 :]]
    return None


def _union(first: Sequence[_T], second: Sequence[_T]) -> list[_T]:
    # Models with list fields are not hashable: the lists are short, so compare by equality.
    result: list[_T] = []
    for item in (*first, *second):
        if item not in result:
            result.append(item)
    return result


__all__ = ["merge", "merge_steps", "resolve"]
