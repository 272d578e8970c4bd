"""Structured queries: ``db_aggregate``'s arguments, checked against a source's real schema, compiled to SQL.

A structured query names a table, measures (``{agg, column}``, or a semantic layer's ``{metric}``), group-by
columns (or dimensions), filters, a period, an order and a limit; nothing else. Every name is resolved
against the schema the source reports (an unknown one is an error that names the closest real one), the
tables a query reaches are joined along foreign keys and the semantic layer's relationships (the shortest
path, found here, never guessed by a model), and the SQL is built node by node with sqlglot's expression
builder in the source's dialect, so it is valid SQL by construction and passes the read-only guard.

A measure is computed at its own grain: when the query also crosses a one-to-many join that repeats the rows
of the measure's table (invoices joined to their lines), it is taken over each row of that table once per
group (``_grain``), never multiplied by the join.

For: ``AggregateQuery`` (the arguments) and ``compile_aggregate``; the JSON schema of the arguments is
``aggregate_schema``'s. Not for: running the SQL (the sources) or the tool itself
(``toolkit.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from sqlglot import exp

from plangate.errors import ConfigError
from plangate.tools.data._grain import (
    REPEATABLE,
    Edge,
    JoinTree,
    MeasurePart,
    Rows,
    aggregate_node,
    fan_safe_select,
)
from plangate.tools.data.periods import period_between
from plangate.tools.data.results import ColumnInfo, SchemaInfo, TableInfo
from plangate.tools.data.semantic import Metric, SemanticLayer
from plangate.tools.registry import closest_name

Aggregate = Literal["count", "count_distinct", "sum", "avg", "min", "max"]
AGGREGATES: tuple[Aggregate, ...] = ("count", "count_distinct", "sum", "avg", "min", "max")
NUMERIC_AGGREGATES: tuple[Aggregate, ...] = ("sum", "avg")
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "not in", "like", "is null", "is not null"]
FILTER_OPS: tuple[FilterOp, ...] = (
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not in",
    "like",
    "is null",
    "is not null",
)
MAX_LIMIT = 1_000
"""The most rows a structured query may ask for (the data sources' row limit)."""
MAX_MEASURES = 4
MAX_GROUPS = 3
MAX_FILTERS = 4
MAX_ORDER = 2

_NUMERIC_WORDS = ("int", "real", "num", "dec", "float", "double", "money", "serial")
_COMPARISONS: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
    "like": exp.Like,
}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Measure(_Args):
    """``{agg, column}``: what to compute; ``times`` multiplies the column by another first (price x qty);
    or ``{metric}``: a metric of the source's semantic layer, by name.

    ``column`` is ``*`` only for ``count``. ``as`` names the result column (default ``<agg>_<column>``, or
    ``count`` for ``count *``, or the metric's name).
    """

    agg: Aggregate | None = None
    column: str | None = None
    times: str | None = None
    metric: str | None = None
    as_: str | None = Field(default=None, alias="as")

    @model_validator(mode="after")
    def _one_kind(self) -> Measure:
        if self.metric is not None:
            if self.agg is not None or self.column is not None or self.times is not None:
                raise ValueError("a metric measure is {metric} alone: leave out agg, column and times")
        elif self.agg is None or self.column is None:
            raise ValueError("a measure needs agg and column (or a metric of the semantic layer)")
        return self


class Filter(_Args):
    """``{column, op, value}``: keep the rows where ``column op value`` holds (``in`` takes a list)."""

    column: str
    op: FilterOp = "="
    value: JsonValue = None


class PeriodSpec(_Args):
    """``{column, from, to}``: keep the rows whose date ``column`` lies from the start of ``from`` to the end
    of ``to``; each bound is a year (``2025``), a month (``2025-03``) or a day (``2025-03-14``) and may be
    left out."""

    column: str
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None


class OrderBy(_Args):
    """``{column, desc}``: sort by a group-by column or a measure (its ``as`` name, or its ``agg`` when only
    one measure uses it, or its metric's name)."""

    column: str
    desc: bool = False


class AggregateQuery(_Args):
    """The arguments of ``db_aggregate``; without ``table``, the base table is the first one a name says:
    a measure's, else a group-by column's, a filter's, the period's or an ordering's. ``metric`` is short for
    a first measure ``{"metric": …}``."""

    source: str
    table: str | None = None
    measures: list[Measure] = Field(default_factory=list, max_length=MAX_MEASURES)
    group_by: list[str] = Field(default_factory=list, max_length=MAX_GROUPS)
    filters: list[Filter] = Field(default_factory=list, max_length=MAX_FILTERS)
    period: PeriodSpec | None = None
    order_by: list[OrderBy] = Field(default_factory=list, max_length=MAX_ORDER)
    limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT)

    @model_validator(mode="before")
    @classmethod
    def _metric_shorthand(cls, data: object) -> object:
        if isinstance(data, dict) and "metric" in data:
            data = dict(data)
            metric = data.pop("metric")
            if metric is not None:
                measures = data.get("measures") or []
                data["measures"] = [{"metric": metric}, *(measures if isinstance(measures, list) else [])]
        return data


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    """A structured query as SQL.

    Attributes:
        sql: the statement, in the source's dialect.
        tables: every table it reads (the base table first, then the joined ones).
        columns: the result's column names, in order.
        period_column: ``table.column`` of the period filter, when there is one.
        definitions: the semantic layer's metrics it used, each with its definition as a person reads it.
        grains: the measures computed at their own grain, each with why (``Invoice: its join to
            InvoiceLine repeats its rows``).
    """

    sql: str
    tables: list[str]
    columns: list[str]
    period_column: str | None = None
    definitions: dict[str, str] = field(default_factory=dict)
    grains: dict[str, str] = field(default_factory=dict)


class AggregateError(ConfigError):
    """A structured query that does not fit the source's schema; the message names the closest real name.

    Attributes:
        path: where in the arguments (``measures[0].column``).
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def _unique_key(table: TableInfo, column: str | None) -> bool:
    """Whether ``column`` of ``table`` is its whole primary key (what one row of it is found by)."""
    keys = [c.name for c in table.columns if c.primary_key]
    return column is not None and keys == [column]


@dataclass
class _Schema:
    """Name lookups over one source's schema, case-insensitive (SQL identifiers mostly are)."""

    info: SchemaInfo
    tables: dict[str, TableInfo] = field(default_factory=dict)
    edges: dict[str, list[Edge]] = field(default_factory=dict)

    @classmethod
    def of(cls, info: SchemaInfo) -> _Schema:
        schema = cls(info)
        for table in info.tables:
            schema.tables[table.name.lower()] = table
        for table in info.tables:
            for key in table.foreign_keys:
                other = schema.tables.get(key.references_table.lower())
                if other is None or other.name == table.name:
                    continue  # a key to a missing table, or to itself: no join to make
                target = key.references_column or _primary_key(other)
                if target is None:
                    continue
                # A key that refers to the other table's primary key is many-to-one; one that refers to any
                # other column may match several rows, so both ways are taken to repeat rows.
                many_to_one = _unique_key(other, target)
                one_to_one = many_to_one and _unique_key(table, key.column)
                schema.edges.setdefault(table.name, []).append(
                    Edge(table.name, key.column, other.name, target, not many_to_one, not one_to_one)
                )
                schema.edges.setdefault(other.name, []).append(
                    Edge(other.name, target, table.name, key.column, not one_to_one, not many_to_one)
                )
        return schema

    def table(self, name: str, path: str) -> TableInfo:
        found = self.tables.get(name.lower())
        if found is None:
            names = [table.name for table in self.info.tables]
            raise AggregateError(path, f"unknown table {name!r}{_hint(name, names)}")
        return found

    def qualified(self) -> list[str]:
        return [f"{table.name}.{column.name}" for table in self.info.tables for column in table.columns]

    def column(self, ref: str, base: TableInfo, path: str) -> tuple[TableInfo, ColumnInfo]:
        """Resolve ``table.column`` or ``column`` (the base table first, then any unique match)."""
        text = ref.strip()
        table_part, dot, column_part = text.rpartition(".")
        if dot:
            table = self.table(table_part, path)
            column = _find_column(table, column_part)
            if column is None:
                names = [f"{table.name}.{c.name}" for c in table.columns]
                raise AggregateError(path, f"unknown column {text!r}{_hint(text, names + self.qualified())}")
            return table, column
        own = _find_column(base, text)
        if own is not None:
            return base, own
        matches = [(t, c) for t in self.info.tables if (c := _find_column(t, text)) is not None]
        if len(matches) == 1:
            return matches[0]
        if matches:
            options = " or ".join(f"{t.name}.{c.name}" for t, c in matches)
            raise AggregateError(path, f"column {text!r} is in several tables: write {options}")
        names = [c.name for c in base.columns] + self.qualified()
        raise AggregateError(path, f"unknown column {text!r}{_hint(text, names)}")

    def path_to(self, start: str, goal: str) -> list[Edge] | None:
        """The shortest chain of foreign keys from ``start`` to ``goal`` (ties: by table name)."""
        if start == goal:
            return []
        previous: dict[str, Edge] = {}
        queue = deque([start])
        seen = {start}
        while queue:
            current = queue.popleft()
            for edge in sorted(self.edges.get(current, []), key=lambda e: (e.other, e.column)):
                if edge.other in seen:
                    continue
                seen.add(edge.other)
                previous[edge.other] = edge
                if edge.other == goal:
                    chain = [edge]
                    while chain[0].table != start:
                        chain.insert(0, previous[chain[0].table])
                    return chain
                queue.append(edge.other)
        return None


def _primary_key(table: TableInfo) -> str | None:
    keys = [column.name for column in table.columns if column.primary_key]
    return keys[0] if len(keys) == 1 else None


def _find_column(table: TableInfo, name: str) -> ColumnInfo | None:
    for column in table.columns:
        if column.name == name:
            return column
    lowered = name.lower()
    return next((column for column in table.columns if column.name.lower() == lowered), None)


def _hint(name: str, candidates: Iterable[str]) -> str:
    options = list(dict.fromkeys(candidates))
    suggestion = closest_name(name, options) or closest_name(name.lower(), [o.lower() for o in options])
    if suggestion is not None:
        real = next((o for o in options if o.lower() == suggestion.lower()), suggestion)
        return f" (did you mean {real!r}?)"
    shown = ", ".join(options[:8]) + (", …" if len(options) > 8 else "")
    return f" (known: {shown})" if options else ""


def is_numeric(column: ColumnInfo) -> bool:
    """Whether the column's declared type is a number type (an undeclared type may hold anything)."""
    kind = column.type.lower()
    return kind == "" or any(word in kind for word in _NUMERIC_WORDS)


@dataclass
class _Measure:
    """One measure, resolved: its aggregate, the value it takes per row of the join, the tables that value
    reads (its grain is one of them), a metric's condition, and where it came from."""

    path: str
    alias: str
    agg: str
    value: exp.Expr | None
    tables: list[str]
    condition: exp.Expr | None = None
    metric: Metric | None = None


class _Compiler:
    """Builds the SQL of one query; each name is resolved once and every table it reaches is joined."""

    def __init__(self, query: AggregateQuery, schema: SchemaInfo, semantic: SemanticLayer | None) -> None:
        self.query = query
        self.semantic = semantic
        self.schema = _Schema.of(semantic.applied(schema) if semantic is not None else schema)
        self.base = self.schema.table(query.table, "table") if query.table else self._implied_base()
        self.joined: list[str] = [self.base.name]
        self.joins: list[Edge] = []

    def _metric(self, name: str, path: str) -> Metric:
        found = self.semantic.metric(name) if self.semantic is not None else None
        if found is None:
            names = list(self.semantic.metrics) if self.semantic is not None else []
            if not names:
                raise AggregateError(path, f"unknown metric {name!r}: this source has no semantic layer")
            raise AggregateError(path, f"unknown metric {name!r}{_hint(name, names)}")
        return found

    def _dimension_column(self, ref: str) -> str:
        """``ref``, or the column of the dimension it names (``region`` → ``regions.name``)."""
        if self.semantic is not None and "." not in ref:
            dimension = self.semantic.dimension(ref.strip())
            if dimension is not None:
                return dimension.column.name
        return ref

    def _implied_base(self) -> TableInfo:
        # The first name that says its table: a measure's, else a group's, a filter's, the period's or an
        # ordering's (``count(*)`` of the orders in a period names its table only in the period).
        query = self.query
        refs: list[tuple[str, str]] = []
        for i, m in enumerate(query.measures):
            if m.metric is not None:
                metric = self._metric(m.metric, f"measures[{i}].metric")
                refs.append((f"measures[{i}].metric", metric.columns[0].name))
            else:
                refs.append((f"measures[{i}].column", m.column or ""))
        refs += [(f"group_by[{i}]", self._dimension_column(ref)) for i, ref in enumerate(query.group_by)]
        refs += [
            (f"filters[{i}].column", self._dimension_column(f.column)) for i, f in enumerate(query.filters)
        ]
        refs += [("period.column", query.period.column)] if query.period is not None else []
        refs += [(f"order_by[{i}].column", o.column) for i, o in enumerate(query.order_by)]
        for path, ref in refs:
            if ref.strip() in ("*", ""):
                continue
            table, _, _ = ref.strip().rpartition(".")
            if table:
                return self.schema.table(table, path)
            matches = [t for t in self.schema.info.tables if _find_column(t, ref.strip()) is not None]
            if len(matches) == 1:
                return matches[0]
        return self._fail_base()

    @staticmethod
    def _fail_base() -> TableInfo:
        raise AggregateError("table", "name the table (or use table.column names in the measures)")

    def column(self, ref: str, path: str) -> exp.Column:
        table, column = self.schema.column(self._dimension_column(ref), self.base, path)
        self._reach(table.name, path)
        return _column(table.name, column.name)

    def _reach(self, table: str, path: str) -> None:
        if table in self.joined:
            return
        chain = self.schema.path_to(self.base.name, table)
        if chain is None:
            raise AggregateError(
                path,
                f"no foreign key joins {self.base.name!r} to {table!r}: query {table!r} alone, or write the "
                "join with db_query",
            )
        for edge in chain:
            if edge.other not in self.joined:
                self.joined.append(edge.other)
                self.joins.append(edge)

    def _resolved(self, tree: exp.Expr, path: str) -> exp.Expr:
        """A metric's expression with its columns quoted and their tables joined."""
        copy = tree.copy()
        for node in list(copy.find_all(exp.Column)):
            parts = [part.name for part in (node.args.get("db"), node.args.get("table")) if part is not None]
            table = ".".join(parts)
            self._reach(table, path)
            node.replace(_column(table, node.name))
        return copy

    def measure(self, index: int, measure: Measure) -> _Measure:
        path = f"measures[{index}]"
        if measure.metric is not None:
            metric = self._metric(measure.metric, f"{path}.metric")
            argument = self._resolved(metric.argument, f"{path}.metric")
            condition = self._resolved(metric.condition, f"{path}.metric") if metric.condition else None
            tables = list(dict.fromkeys(ref.table for ref in metric.columns))
            return _Measure(path, measure.as_ or metric.name, metric.agg, argument, tables, condition, metric)
        agg, ref = str(measure.agg), str(measure.column)
        if ref.strip() == "*":
            if agg != "count":
                raise AggregateError(f"{path}.column", f"'*' counts rows: it needs agg 'count', not {agg!r}")
            return _Measure(path, measure.as_ or "count", "count", None, [self.base.name])
        table, column = self.schema.column(self._dimension_column(ref), self.base, f"{path}.column")
        self._reach(table.name, f"{path}.column")
        value: exp.Expr = _column(table.name, column.name)
        if agg in NUMERIC_AGGREGATES and not is_numeric(column):
            raise AggregateError(
                f"{path}.column",
                f"{agg} needs a number column; {table.name}.{column.name} is {column.type or 'untyped'}",
            )
        name = f"{agg}_{column.name}"
        tables = [table.name]
        if measure.times is not None:
            other_table, other = self.schema.column(measure.times, self.base, f"{path}.times")
            if not is_numeric(other) or not is_numeric(column):
                raise AggregateError(f"{path}.times", "times multiplies two number columns")
            self._reach(other_table.name, f"{path}.times")
            value = exp.Paren(this=exp.Mul(this=value, expression=_column(other_table.name, other.name)))
            name = f"{name}_x_{other.name}"
            tables.append(other_table.name)
        return _Measure(path, measure.as_ or name, agg, value, list(dict.fromkeys(tables)))

    def condition(self, index: int, item: Filter) -> exp.Expr:
        path = f"filters[{index}]"
        column = self.column(item.column, f"{path}.column")
        if item.op in ("is null", "is not null"):
            test: exp.Expr = exp.Is(this=column, expression=exp.Null())
            return exp.Not(this=test) if item.op == "is not null" else test
        if item.op in ("in", "not in"):
            values = item.value if isinstance(item.value, list) else [item.value]
            if not values or any(isinstance(v, dict | list) or v is None for v in values):
                raise AggregateError(f"{path}.value", f"{item.op!r} needs a list of numbers or texts")
            member = exp.In(this=column, expressions=[exp.convert(v) for v in values])
            return exp.Not(this=member) if item.op == "not in" else member
        if item.value is None or isinstance(item.value, dict | list):
            raise AggregateError(f"{path}.value", f"{item.op!r} needs a number or a text, got {item.value!r}")
        return _COMPARISONS[item.op](this=column, expression=exp.convert(item.value))

    def period(self, spec: PeriodSpec) -> tuple[list[exp.Expr], str]:
        table, column = self.schema.column(spec.column, self.base, "period.column")
        self._reach(table.name, "period.column")
        try:
            period = period_between(spec.from_, spec.to)
        except ConfigError as exc:
            raise AggregateError("period", str(exc)) from None
        node = _column(table.name, column.name)
        conditions: list[exp.Expr] = []
        if period.start is not None:
            conditions.append(exp.GTE(this=node, expression=exp.Literal.string(period.start.isoformat())))
        if period.end is not None:
            conditions.append(exp.LT(this=node.copy(), expression=exp.Literal.string(period.end.isoformat())))
        return conditions, f"{table.name}.{column.name}"

    def order(
        self, index: int, item: OrderBy, aliases: Mapping[str, str], groups: Sequence[exp.Column]
    ) -> tuple[str | None, exp.Expr]:
        """What to order by: ``(a measure's alias, its identifier)``, or ``(None, a column)``."""
        path = f"order_by[{index}].column"
        named = aliases.get(item.column) or aliases.get(item.column.lower())
        if named is None and item.column.lower() in AGGREGATES:
            measures = ", ".join(sorted(set(aliases.values()))) or "none"
            message = f"no measure uses {item.column!r}; order by a measure ({measures}) or a column"
            raise AggregateError(path, message)
        if named is not None:
            return named, exp.to_identifier(named, quoted=True)
        try:
            return None, self.column(item.column, path)
        except AggregateError as exc:
            raise AggregateError(
                path,
                f"{exc.args[0].split(': ', 1)[1]}; or name a measure "
                f"({', '.join(sorted(set(aliases.values()))) or 'none'})",
            ) from None

    def _groups(self) -> tuple[list[exp.Column], list[str]]:
        groups: list[exp.Column] = []
        names: list[str] = []
        for index, ref in enumerate(self.query.group_by):
            groups.append(self.column(ref, f"group_by[{index}]"))
            dimension = self.semantic.dimension(ref) if self.semantic is not None and "." not in ref else None
            names.append(dimension.name if dimension is not None else groups[-1].name)
        return groups, names

    def _measures(self, names: list[str]) -> tuple[list[_Measure], dict[str, str]]:
        measures: list[_Measure] = []
        aliases: dict[str, str] = {}
        used_aggs: dict[str, int] = {}
        for index, item in enumerate(self.query.measures):
            measure = self.measure(index, item)
            if measure.alias in names or measure.alias in aliases.values():
                raise AggregateError(
                    f"measures[{index}]", f"two result columns are called {measure.alias!r}: set 'as'"
                )
            measures.append(measure)
            aliases[measure.alias] = aliases[measure.alias.lower()] = measure.alias
            key = measure.metric.name if measure.metric is not None else str(item.agg)
            used_aggs[key] = used_aggs.get(key, 0) + 1
            aliases.setdefault(key, measure.alias)
        for agg, count in used_aggs.items():
            if count > 1 and aliases.get(agg) is not None and agg not in names:
                del aliases[agg]  # ambiguous: two measures share the agg
        return measures, aliases

    def _fold_conditions(self, measures: list[_Measure], conditions: list[exp.Expr]) -> None:
        """A metric's condition: the query's WHERE when it is the only measure, else inside its value
        (``CASE WHEN condition THEN value END``), so that the other measures keep every row."""
        for measure in measures:
            if measure.condition is None:
                continue
            if len(measures) == 1:
                conditions.append(measure.condition)
                continue
            then = measure.value if measure.value is not None else exp.Literal.number(1)
            measure.value = exp.Case(ifs=[exp.If(this=measure.condition, true=then)])

    def _grain_parts(self, measures: list[_Measure]) -> tuple[list[MeasurePart], dict[str, str]]:
        tree = JoinTree(self.base.name, self.joins)
        parts: list[MeasurePart] = []
        grains: dict[str, str] = {}
        for measure in measures:
            if measure.agg not in REPEATABLE:
                parts.append(MeasurePart(measure.alias, measure.agg, measure.value))
                continue
            grain = tree.grain(measure.tables)
            if grain is None:
                first, second = measure.tables[:2]
                raise AggregateError(
                    measure.path,
                    f"{first} and {second} are joined one-to-many, so their product has no grain: multiply "
                    "columns of one table (or of a table it refers to)",
                )
            repeated = tree.repeats(grain)
            if repeated is None:
                parts.append(MeasurePart(measure.alias, measure.agg, measure.value))
                continue
            table = self.schema.table(grain, measure.path)
            keys = tuple(_column(table.name, c.name) for c in table.columns if c.primary_key)
            if not keys:
                raise AggregateError(
                    measure.path,
                    f"the join to {repeated[1]} repeats the rows of {grain}, which has no primary key to "
                    f"count each once: query {grain} alone, or write the query with db_query",
                )
            parts.append(MeasurePart(measure.alias, measure.agg, measure.value, grain, keys))
            grains[measure.alias] = f"once per {grain} row: the join to {repeated[1]} repeats its rows"
        return parts, grains

    def build(self, dialect: str) -> CompiledQuery:
        query = self.query
        if not query.measures and not query.group_by:
            raise AggregateError("measures", "give at least one measure (or group_by columns to list)")
        groups, names = self._groups()
        measures, aliases = self._measures(names)
        conditions = [self.condition(index, item) for index, item in enumerate(query.filters)]
        period_column = None
        if query.period is not None:
            bounds, period_column = self.period(query.period)
            conditions.extend(bounds)
        self._fold_conditions(measures, conditions)
        ordering = [self.order(index, item, aliases, groups) for index, item in enumerate(query.order_by)]
        parts, grains = self._grain_parts(measures)
        rows = exp.Select().from_(_table(self.base.name), copy=False)
        for edge in self.joins:
            on = exp.EQ(
                this=_column(edge.table, edge.column), expression=_column(edge.other, edge.other_column)
            )
            rows = rows.join(_table(edge.other), on=on, copy=False)
        if conditions:
            rows = rows.where(exp.and_(*conditions), copy=False)
        if grains:
            select = self._fan_safe(Rows(rows, groups, names), parts, ordering)
        else:
            select = self._plain(rows, groups, parts, ordering)
        if query.limit is not None:
            select = select.limit(query.limit, copy=False)
        definitions = {m.metric.name: m.metric.definition for m in measures if m.metric is not None}
        return CompiledQuery(
            select.sql(dialect=dialect),
            list(self.joined),
            [*names, *(m.alias for m in measures)],
            period_column,
            definitions,
            grains,
        )

    def _plain(
        self,
        rows: exp.Select,
        groups: list[exp.Column],
        parts: list[MeasurePart],
        ordering: list[tuple[str | None, exp.Expr]],
    ) -> exp.Select:
        projections: list[exp.Expr] = [column.copy() for column in groups]
        projections += [exp.alias_(aggregate_node(p.agg, p.value), p.alias, quoted=True) for p in parts]
        select = rows.select(*projections, copy=False)
        if groups and parts:
            select = select.group_by(*groups, copy=False)
        elif groups:
            select = select.distinct(copy=False)
        pairs = zip(ordering, self.query.order_by, strict=True)
        terms = [exp.Ordered(this=node, desc=item.desc) for (_, node), item in pairs]
        return select.order_by(*terms, copy=False) if terms else select

    def _fan_safe(
        self, rows: Rows, parts: list[MeasurePart], ordering: list[tuple[str | None, exp.Expr]]
    ) -> exp.Select:
        select, order = fan_safe_select(rows, parts)
        terms: list[exp.Ordered] = []
        for index, ((alias, node), item) in enumerate(zip(ordering, self.query.order_by, strict=True)):
            if alias is not None:
                terms.append(exp.Ordered(this=order[alias], desc=item.desc))
                continue
            position = next((i for i, g in enumerate(rows.groups) if g == node), None)
            if position is None:
                raise AggregateError(
                    f"order_by[{index}].column",
                    f"order by a group_by column or a measure: {item.column!r} is neither, and the measures "
                    "are computed at their own grain",
                )
            terms.append(exp.Ordered(this=order[f"_g{position}"], desc=item.desc))
        return select.order_by(*terms, copy=False) if terms else select


def _table(name: str) -> exp.Table:
    parts = name.split(".")
    if len(parts) == 2:
        return exp.Table(
            this=exp.to_identifier(parts[1], quoted=True), db=exp.to_identifier(parts[0], quoted=True)
        )
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _column(table: str, column: str) -> exp.Column:
    parts = table.split(".")
    qualifier = exp.to_identifier(parts[-1], quoted=True)
    db = exp.to_identifier(parts[0], quoted=True) if len(parts) == 2 else None
    return exp.Column(this=exp.to_identifier(column, quoted=True), table=qualifier, db=db)


def compile_aggregate(
    query: AggregateQuery, schema: SchemaInfo, semantic: SemanticLayer | None = None
) -> CompiledQuery:
    """The SQL of a structured query on the source ``schema`` describes, in its dialect.

    Args:
        query: the arguments.
        schema: the source's schema.
        semantic: the source's semantic layer (its metrics, dimensions and relationships), if it has one.

    Raises:
        AggregateError: a table, column, metric or measure that does not fit the schema (with the closest
            real name), tables that no foreign key joins, a measure with no grain, or a malformed period or
            filter.
    """
    return _Compiler(query, schema, semantic).build(schema.dialect)


def parse_aggregate(arguments: Mapping[str, object]) -> AggregateQuery:
    """Read ``db_aggregate`` arguments (a JSON object) into a query.

    Raises:
        AggregateError: the arguments do not have the query's shape (the first problem, with its path).
    """
    from pydantic import ValidationError

    try:
        return AggregateQuery.model_validate(dict(arguments))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise AggregateError(where, f"{message} (got {first.get('input')!r})") from None


__all__ = [
    "AGGREGATES",
    "FILTER_OPS",
    "MAX_LIMIT",
    "NUMERIC_AGGREGATES",
    "AggregateError",
    "AggregateQuery",
    "CompiledQuery",
    "Filter",
    "Measure",
    "OrderBy",
    "PeriodSpec",
    "compile_aggregate",
    "is_numeric",
    "parse_aggregate",
]
