"""The grain of a structured query's measures: which joins repeat a table's rows, and the SQL that computes
a measure once per row of its own table whatever the join.

A table's grain is its primary key; a foreign key is a many-to-one link, so following it keeps the rows of
the table it starts from, and following it backwards (from the "one" side to the "many" side) repeats them:
an invoice joined to its lines appears once per line. A ``sum``, ``avg`` or ``count`` over such a repeated
table's column is multiplied by the join (the fan trap). This module finds those measures and computes each
at its own grain, as symmetric aggregates do: the rows of the join are reduced to distinct
``(groups, the measure table's key, the measured value)`` before the measure is taken, so each row of the
measure's table counts once per group it belongs to. ``count(distinct …)``, ``min`` and ``max`` are not
changed by repeats and are computed on the join as it is.

For: ``JoinTree`` (the joins of one query and their directions) and ``fan_safe_select`` (the SQL). Not for:
resolving names or building the parts of the query (``aggregate.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

REPEATABLE = frozenset({"sum", "avg", "count"})
"""The aggregates a repeated row changes."""


@dataclass(frozen=True, slots=True)
class Edge:
    """One join along a foreign key, as a query makes it: from ``table`` (already in the query) to
    ``other``.

    Attributes:
        to_many: following it repeats the rows of ``table`` (``table`` holds the key ``other`` refers
            to: one invoice, many lines).
        back_to_many: following it backwards repeats the rows of ``other``.
    """

    table: str
    column: str
    other: str
    other_column: str
    to_many: bool = False
    back_to_many: bool = False


@dataclass(frozen=True)
class JoinTree:
    """The joins of one query: a tree over its tables, rooted at the base table."""

    base: str
    edges: Sequence[Edge]

    def _steps(self, start: str) -> list[tuple[str, str, bool]]:
        """Every join walked away from ``start``: ``(from, to, whether it repeats the rows of from)``."""
        steps: list[tuple[str, str, bool]] = []
        seen = {start}
        frontier = [start]
        while frontier:
            current = frontier.pop()
            for edge in self.edges:
                if edge.table == current and edge.other not in seen:
                    steps.append((current, edge.other, edge.to_many))
                    seen.add(edge.other)
                    frontier.append(edge.other)
                elif edge.other == current and edge.table not in seen:
                    steps.append((current, edge.table, edge.back_to_many))
                    seen.add(edge.table)
                    frontier.append(edge.table)
        return steps

    def repeats(self, table: str) -> tuple[str, str] | None:
        """The first join that repeats the rows of ``table``, as ``(one side, many side)``, or None when no
        join of the query does (the measure's rows each appear once)."""
        for start, end, many in self._steps(table):
            if many:
                return start, end
        return None

    def reaches_one(self, start: str, goal: str) -> bool:
        """Whether ``goal`` is reached from ``start`` along many-to-one joins only (one ``goal`` row for
        each ``start`` row: an order line's order, its product)."""
        if start == goal:
            return True
        one = {start}
        for origin, end, many in self._steps(start):
            if origin in one and not many:
                one.add(end)
        return goal in one

    def grain(self, tables: Sequence[str]) -> str | None:
        """The table whose rows a value over ``tables`` belongs to: the one from which every other is
        reached many-to-one (an order line for ``price x quantity`` or ``line x its product's cost``), or
        None when there is none (two tables joined one-to-many: the value has no grain)."""
        for table in tables:
            if all(self.reaches_one(table, other) for other in tables):
                return table
        return None


@dataclass(frozen=True)
class MeasurePart:
    """A measure of the query, ready to be assembled.

    Attributes:
        alias: its result column.
        agg: its aggregate.
        value: what is aggregated, per row of the join (None: ``count(*)``); a metric's condition is in it.
        grain: the table whose rows it counts once each, when the join repeats them; None otherwise.
        keys: that table's key columns.
    """

    alias: str
    agg: str
    value: exp.Expr | None
    grain: str | None = None
    keys: tuple[exp.Column, ...] = ()


_FUNCTIONS: dict[str, type[exp.AggFunc]] = {"sum": exp.Sum, "avg": exp.Avg, "min": exp.Min, "max": exp.Max}


def aggregate_node(agg: str, value: exp.Expr | None) -> exp.Expr:
    """``agg`` over ``value`` (``count(*)`` when there is none)."""
    if agg == "count":
        return exp.Count(this=exp.Star() if value is None else value)
    if agg == "count_distinct":
        return exp.Count(this=exp.Distinct(expressions=[value]))
    return _FUNCTIONS[agg](this=value)


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _ref(part: str, name: str) -> exp.Column:
    return exp.Column(this=_ident(name), table=_ident(part))


@dataclass(frozen=True)
class Rows:
    """The part of the query every piece shares: its FROM, joins and WHERE (``select`` of no columns)."""

    select: exp.Select
    groups: Sequence[exp.Expr]
    group_names: Sequence[str]


def _piece(rows: Rows, measures: Sequence[MeasurePart], grain: str | None) -> exp.Select:
    """One aggregated piece: the measures of one grain (or of none), per group, with the groups as
    ``_g0``, ``_g1``… and each measure under its alias."""
    groups = [_ident(f"_g{i}") for i in range(len(rows.groups))]
    if grain is None:
        inner = rows.select.copy()
        projections: list[exp.Expr] = [
            exp.alias_(g.copy(), f"_g{i}", quoted=True) for i, g in enumerate(rows.groups)
        ]
        projections += [exp.alias_(aggregate_node(m.agg, m.value), m.alias, quoted=True) for m in measures]
        piece = inner.select(*projections, copy=False)
        return piece.group_by(*[g.copy() for g in rows.groups], copy=False) if rows.groups else piece
    # Distinct (groups, the grain's key, the values): each row of the grain once per group it is in.
    distinct: list[exp.Expr] = [
        exp.alias_(g.copy(), f"_g{i}", quoted=True) for i, g in enumerate(rows.groups)
    ]
    distinct += [exp.alias_(key.copy(), f"_k{i}", quoted=True) for i, key in enumerate(measures[0].keys)]
    outer: list[exp.Expr] = [exp.Column(this=g.copy()) for g in groups]
    for index, measure in enumerate(measures):
        if measure.value is not None:
            distinct.append(exp.alias_(measure.value.copy(), f"_v{index}", quoted=True))
            value: exp.Expr | None = exp.Column(this=_ident(f"_v{index}"))
        else:
            value = None
        outer.append(exp.alias_(aggregate_node(measure.agg, value), measure.alias, quoted=True))
    inner = rows.select.copy().select(*distinct, copy=False).distinct(copy=False)
    piece = exp.Select(expressions=outer).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=_ident("_d")))
    )
    return piece.group_by(*[exp.Column(this=g.copy()) for g in groups], copy=False) if groups else piece


def fan_safe_select(rows: Rows, measures: Sequence[MeasurePart]) -> tuple[exp.Select, dict[str, exp.Expr]]:
    """The query that computes each measure at its grain: one piece per grain (and one for the measures the
    join does not repeat), joined on the groups (null-safely: a NULL group is a group too).

    Returns:
        The select (no ORDER BY or LIMIT yet), and how to order by each result column (by its alias, or
        its ``_g`` column for a group).
    """
    grains = list(dict.fromkeys(m.grain for m in measures))
    pieces: list[tuple[str, exp.Select]] = []
    for index, grain in enumerate(grains):
        mine = [m for m in measures if m.grain == grain]
        pieces.append((f"_p{index}", _piece(rows, mine, grain)))
    first = pieces[0][0]
    projections: list[exp.Expr] = [
        exp.alias_(_ref(first, f"_g{i}"), name, quoted=True) for i, name in enumerate(rows.group_names)
    ]
    owner = {m.alias: f"_p{grains.index(m.grain)}" for m in measures}
    projections += [exp.alias_(_ref(owner[m.alias], m.alias), m.alias, quoted=True) for m in measures]
    select = exp.Select(expressions=projections).from_(
        exp.Subquery(this=pieces[0][1], alias=exp.TableAlias(this=_ident(first)))
    )
    for name, piece in pieces[1:]:
        on: list[exp.Expr] = [
            exp.NullSafeEQ(this=_ref(first, f"_g{i}"), expression=_ref(name, f"_g{i}"))
            for i in range(len(rows.groups))
        ]
        target = exp.Subquery(this=piece, alias=exp.TableAlias(this=_ident(name)))
        if on:
            select = select.join(target, on=exp.and_(*on), copy=False)
        else:
            select = select.join(target, join_type="cross", copy=False)
    order: dict[str, exp.Expr] = {f"_g{i}": _ref(first, f"_g{i}") for i in range(len(rows.groups))}
    order |= {m.alias: _ident(m.alias) for m in measures}
    return select, order


__all__ = ["REPEATABLE", "Edge", "JoinTree", "MeasurePart", "Rows", "aggregate_node", "fan_safe_select"]
