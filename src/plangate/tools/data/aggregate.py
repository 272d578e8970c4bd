"""Structured queries: ``db_aggregate``'s arguments, checked against a source's real schema, compiled to SQL.

A structured query names a table, measures (``{agg, column}``), group-by columns, filters, a period, an
order and a limit; nothing else. Every name is resolved against the schema the source reports (an unknown
one is an error that names the closest real one), the tables a query reaches are joined along foreign keys
(the shortest path, found here, never guessed by a model), and the SQL is built node by node with sqlglot's
expression builder in the source's dialect, so it is valid SQL by construction and passes the read-only guard.

For: ``AggregateQuery`` (the arguments), ``compile_aggregate`` and ``aggregate_parameters`` (the JSON schema,
with tables and columns as enums, that a grammar turns into a constraint). Not for: running the SQL (the
sources) or the tool itself (``toolkit.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlglot import exp

from plangate.errors import ConfigError
from plangate.tools.data.periods import BOUND_PATTERN, maybe_date_column, period_between
from plangate.tools.data.results import ColumnInfo, SchemaInfo, TableInfo
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
_FUNCTIONS: dict[str, type[exp.AggFunc]] = {"sum": exp.Sum, "avg": exp.Avg, "min": exp.Min, "max": exp.Max}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Measure(_Args):
    """``{agg, column}``: what to compute; ``times`` multiplies the column by another first (price x qty).

    ``column`` is ``*`` only for ``count``. ``as`` names the result column (default ``<agg>_<column>``, or
    ``count`` for ``count *``).
    """

    agg: Aggregate
    column: str
    times: str | None = None
    as_: str | None = Field(default=None, alias="as")


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
    one measure uses it)."""

    column: str
    desc: bool = False


class AggregateQuery(_Args):
    """The arguments of ``db_aggregate``; without ``table``, the base table is the first one a name says:
    a measure's, else a group-by column's, a filter's, the period's or an ordering's."""

    source: str
    table: str | None = None
    measures: list[Measure] = Field(default_factory=list, max_length=MAX_MEASURES)
    group_by: list[str] = Field(default_factory=list, max_length=MAX_GROUPS)
    filters: list[Filter] = Field(default_factory=list, max_length=MAX_FILTERS)
    period: PeriodSpec | None = None
    order_by: list[OrderBy] = Field(default_factory=list, max_length=MAX_ORDER)
    limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT)


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    """A structured query as SQL.

    Attributes:
        sql: the statement, in the source's dialect.
        tables: every table it reads (the base table first, then the joined ones).
        columns: the result's column names, in order.
        period_column: ``table.column`` of the period filter, when there is one.
    """

    sql: str
    tables: list[str]
    columns: list[str]
    period_column: str | None = None


class AggregateError(ConfigError):
    """A structured query that does not fit the source's schema; the message names the closest real name.

    Attributes:
        path: where in the arguments (``measures[0].column``).
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True, slots=True)
class _Edge:
    table: str
    column: str
    other: str
    other_column: str


@dataclass
class _Schema:
    """Name lookups over one source's schema, case-insensitive (SQL identifiers mostly are)."""

    info: SchemaInfo
    tables: dict[str, TableInfo] = field(default_factory=dict)
    edges: dict[str, list[_Edge]] = field(default_factory=dict)

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
                schema.edges.setdefault(table.name, []).append(
                    _Edge(table.name, key.column, other.name, target)
                )
                schema.edges.setdefault(other.name, []).append(
                    _Edge(other.name, target, table.name, key.column)
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

    def path_to(self, start: str, goal: str) -> list[_Edge] | None:
        """The shortest chain of foreign keys from ``start`` to ``goal`` (ties: by table name)."""
        if start == goal:
            return []
        previous: dict[str, _Edge] = {}
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


class _Compiler:
    """Builds the SQL of one query; each name is resolved once and every table it reaches is joined."""

    def __init__(self, query: AggregateQuery, schema: SchemaInfo) -> None:
        self.query = query
        self.schema = _Schema.of(schema)
        self.base = self.schema.table(query.table, "table") if query.table else self._implied_base()
        self.joined: list[str] = [self.base.name]
        self.joins: list[_Edge] = []

    def _implied_base(self) -> TableInfo:
        # The first name that says its table: a measure's, else a group's, a filter's, the period's or an
        # ordering's (``count(*)`` of the orders in a period names its table only in the period).
        query = self.query
        refs = [(f"measures[{i}].column", m.column) for i, m in enumerate(query.measures)]
        refs += [(f"group_by[{i}]", ref) for i, ref in enumerate(query.group_by)]
        refs += [(f"filters[{i}].column", f.column) for i, f in enumerate(query.filters)]
        refs += [("period.column", query.period.column)] if query.period is not None else []
        refs += [(f"order_by[{i}].column", o.column) for i, o in enumerate(query.order_by)]
        for path, ref in refs:
            if ref.strip() == "*":
                continue
            table, _, _ = ref.strip().rpartition(".")
            if table:
                return self.schema.table(table, path)
            matches = [t for t in self.schema.info.tables if _find_column(t, ref.strip()) is not None]
            if len(matches) == 1:
                return matches[0]
        raise AggregateError("table", "name the table (or use table.column names in the measures)")

    def column(self, ref: str, path: str) -> exp.Column:
        table, column = self.schema.column(ref, self.base, path)
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

    def measure(self, index: int, measure: Measure) -> tuple[exp.Expr, str]:
        path = f"measures[{index}]"
        if measure.column.strip() == "*":
            if measure.agg != "count":
                raise AggregateError(
                    f"{path}.column", f"'*' counts rows: it needs agg 'count', not {measure.agg!r}"
                )
            return exp.Count(this=exp.Star()), measure.as_ or "count"
        table, column = self.schema.column(measure.column, self.base, f"{path}.column")
        self._reach(table.name, f"{path}.column")
        value: exp.Expr = _column(table.name, column.name)
        if measure.agg in NUMERIC_AGGREGATES and not is_numeric(column):
            raise AggregateError(
                f"{path}.column",
                f"{measure.agg} needs a number column; "
                f"{table.name}.{column.name} is {column.type or 'untyped'}",
            )
        name = f"{measure.agg}_{column.name}"
        if measure.times is not None:
            other_table, other = self.schema.column(measure.times, self.base, f"{path}.times")
            if not is_numeric(other) or not is_numeric(column):
                raise AggregateError(f"{path}.times", "times multiplies two number columns")
            self._reach(other_table.name, f"{path}.times")
            value = exp.Paren(this=exp.Mul(this=value, expression=_column(other_table.name, other.name)))
            name = f"{name}_x_{other.name}"
        if measure.agg == "count":
            node: exp.Expr = exp.Count(this=value)
        elif measure.agg == "count_distinct":
            node = exp.Count(this=exp.Distinct(expressions=[value]))
        else:
            node = _FUNCTIONS[measure.agg](this=value)
        return node, measure.as_ or name

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

    def order(self, index: int, item: OrderBy, aliases: Mapping[str, str]) -> exp.Ordered:
        path = f"order_by[{index}].column"
        named = aliases.get(item.column) or aliases.get(item.column.lower())
        node: exp.Expr
        if named is None and item.column.lower() in AGGREGATES:
            measures = ", ".join(sorted(set(aliases.values()))) or "none"
            message = f"no measure uses {item.column!r}; order by a measure ({measures}) or a column"
            raise AggregateError(path, message)
        if named is not None:
            node = exp.to_identifier(named, quoted=True)
        else:
            try:
                node = self.column(item.column, path)
            except AggregateError as exc:
                raise AggregateError(
                    path,
                    f"{exc.args[0].split(': ', 1)[1]}; or name a measure "
                    f"({', '.join(sorted(set(aliases.values()))) or 'none'})",
                ) from None
        return exp.Ordered(this=node, desc=item.desc)

    def build(self, dialect: str) -> CompiledQuery:
        query = self.query
        if not query.measures and not query.group_by:
            raise AggregateError("measures", "give at least one measure (or group_by columns to list)")
        projections: list[exp.Expr] = []
        names: list[str] = []
        groups: list[exp.Expr] = []
        for index, ref in enumerate(query.group_by):
            column = self.column(ref, f"group_by[{index}]")
            groups.append(column)
            projections.append(column.copy())
            names.append(column.name)
        aliases: dict[str, str] = {}
        used_aggs: dict[str, int] = {}
        for index, measure in enumerate(query.measures):
            node, alias = self.measure(index, measure)
            if alias in names:
                raise AggregateError(
                    f"measures[{index}]", f"two result columns are called {alias!r}: set 'as'"
                )
            projections.append(exp.alias_(node, alias, quoted=True))
            names.append(alias)
            aliases[alias] = aliases[alias.lower()] = alias
            used_aggs[measure.agg] = used_aggs.get(measure.agg, 0) + 1
            aliases.setdefault(measure.agg, alias)
        for agg, count in used_aggs.items():
            if count > 1 and aliases.get(agg) is not None and agg not in names:
                del aliases[agg]  # ambiguous: two measures share the agg
        conditions = [self.condition(index, item) for index, item in enumerate(query.filters)]
        period_column = None
        if query.period is not None:
            bounds, period_column = self.period(query.period)
            conditions.extend(bounds)
        ordering = [self.order(index, item, aliases) for index, item in enumerate(query.order_by)]
        select = exp.Select(expressions=projections).from_(_table(self.base.name), copy=False)
        for edge in self.joins:
            on = exp.EQ(
                this=_column(edge.table, edge.column), expression=_column(edge.other, edge.other_column)
            )
            select = select.join(_table(edge.other), on=on, copy=False)
        if conditions:
            select = select.where(exp.and_(*conditions), copy=False)
        if groups and query.measures:
            select = select.group_by(*groups, copy=False)
        elif groups:
            select = select.distinct(copy=False)
        if ordering:
            select = select.order_by(*ordering, copy=False)
        if query.limit is not None:
            select = select.limit(query.limit, copy=False)
        return CompiledQuery(select.sql(dialect=dialect), list(self.joined), names, period_column)


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


def compile_aggregate(query: AggregateQuery, schema: SchemaInfo) -> CompiledQuery:
    """The SQL of a structured query on the source ``schema`` describes, in its dialect.

    Raises:
        AggregateError: a table, column or measure that does not fit the schema (with the closest real
            name), tables that no foreign key joins, or a malformed period or filter.
    """
    return _Compiler(query, schema).build(schema.dialect)


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
        raise AggregateError(where, f"{first['msg']} (got {first.get('input')!r})") from None


# -- the JSON schema ----------------------------------------------------------------------------------------


def _columns(info: SchemaInfo, *, grammar: bool) -> tuple[list[str], list[str], list[str], list[str]]:
    """All column names, the number ones, the date ones and the groupable ones.

    Names are qualified, plus (outside a grammar) the bare names no two tables share. In a grammar, keys are
    no numbers to sum and primary keys no groups.
    """
    every: list[str] = []
    numbers: list[str] = []
    dates: list[str] = []
    groups: list[str] = []
    seen: dict[str, int] = {}
    for table in info.tables:
        keys = {key.column for key in table.foreign_keys}
        for column in table.columns:
            name = f"{table.name}.{column.name}"
            every.append(name)
            is_key = column.primary_key or column.name in keys
            if is_numeric(column) and column.type and not (grammar and is_key):
                numbers.append(name)
            if maybe_date_column(column):
                dates.append(name)
            if not (grammar and column.primary_key):
                groups.append(name)
            seen[column.name] = seen.get(column.name, 0) + 1
    if not grammar:
        bare = [name for name, count in seen.items() if count == 1]
        every += bare
        groups += bare
    return every, numbers, dates, groups


def _object(properties: dict[str, JsonValue], required: list[str]) -> dict[str, JsonValue]:
    names: list[JsonValue] = list(required)
    return {"type": "object", "properties": properties, "required": names, "additionalProperties": False}


def _enum(values: Iterable[JsonValue]) -> dict[str, JsonValue]:
    return {"enum": list(values)}


def _array(items: JsonValue, most: int, least: int = 0) -> dict[str, JsonValue]:
    array: dict[str, JsonValue] = {"type": "array", "items": items, "maxItems": most}
    if least:
        array["minItems"] = least
    return array


def source_parameters(info: SchemaInfo, *, grammar: bool = False) -> dict[str, JsonValue]:
    """The JSON schema of ``db_aggregate`` arguments on one source: its tables and columns as enums.

    Args:
        info: the source's schema.
        grammar: the tighter form a grammar enforces on a small model: ``table.column`` names only,
            ``sum``/``avg`` only over number columns, no ``table`` (the first table a name says is the base),
            ordering only by a real column or an aggregate's name, no ``as``, scalar filter values, the
            period's bounds given, and every field written, in the order a question is read.
    """
    return parameters_schema(source_properties(info, grammar=grammar), grammar=grammar)


def parameters_schema(properties: dict[str, JsonValue], *, grammar: bool = False) -> dict[str, JsonValue]:
    """The arguments object of ``properties``: every one required in the grammar form, else ``source`` and
    ``measures``."""
    return _object(properties, list(properties) if grammar else ["source", "measures"])


def source_properties(info: SchemaInfo, *, grammar: bool = False) -> dict[str, JsonValue]:
    """The ``properties`` of :func:`source_parameters`' schema, one per argument of ``db_aggregate``."""
    columns, numbers, dates, groups = _columns(info, grammar=grammar)
    stars: list[JsonValue] = [*columns, "*"]
    if grammar:
        counting = _object(
            {"agg": _enum(["count", "count_distinct", "min", "max"]), "column": _enum(stars)},
            ["agg", "column"],
        )
        summing = _object(
            {"agg": _enum(NUMERIC_AGGREGATES), "column": _enum(numbers), "times": _enum(numbers)},
            ["agg", "column"],
        )
        measure: dict[str, JsonValue] = {"anyOf": [counting, summing]} if numbers else counting
        value: dict[str, JsonValue] = {"type": ["string", "number"], "maxLength": 40}
    else:
        times: JsonValue = {"anyOf": [_enum(numbers), {"type": "null"}]}
        measure = _object(
            {"agg": _enum(AGGREGATES), "column": _enum(stars), "times": times, "as": {"type": "string"}},
            ["agg", "column"],
        )
        value = {"type": ["string", "number", "boolean", "array", "null"]}
    filters = _object(
        {"column": _enum(columns), "op": _enum(FILTER_OPS), "value": value},
        ["column", "op", "value"] if grammar else ["column", "op"],
    )
    bound: JsonValue = {"type": "string", "pattern": BOUND_PATTERN}
    span = _object(
        {"column": _enum(dates), "from": bound, "to": bound},
        ["column", "from", "to"] if grammar else ["column"],
    )
    period: JsonValue = {"anyOf": [span, {"type": "null"}]} if dates else {"type": "null"}
    order = _object(
        {
            "column": _enum([*columns, *AGGREGATES]) if grammar else {"type": "string"},
            "desc": {"type": "boolean"},
        },
        ["column", "desc"] if grammar else ["column"],
    )
    limit: JsonValue = (
        _enum([*range(1, 26), 50, 100, 500, MAX_LIMIT])
        if grammar
        else {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
    )
    properties: dict[str, JsonValue] = {"source": _enum([info.source])}
    if not grammar:
        properties["table"] = _enum(table.name for table in info.tables)
    properties |= {
        "measures": _array(measure, MAX_MEASURES, 1 if grammar else 0),
        "group_by": _array(_enum(groups), MAX_GROUPS),
        "period": period,
        "filters": _array(filters, 2 if grammar else MAX_FILTERS),
        "order_by": _array(order, MAX_ORDER),
        "limit": limit,
    }
    return properties


def aggregate_parameters(schemas: Sequence[SchemaInfo]) -> dict[str, JsonValue]:
    """The JSON schema of ``db_aggregate`` over several sources: one alternative per source."""
    if not schemas:
        return {"type": "object", "properties": {"source": {"enum": []}}, "required": ["source"]}
    if len(schemas) == 1:
        return source_parameters(schemas[0])
    variants: list[JsonValue] = [source_parameters(info) for info in schemas]
    return {"anyOf": variants}


__all__ = [
    "AGGREGATES",
    "FILTER_OPS",
    "MAX_LIMIT",
    "AggregateError",
    "AggregateQuery",
    "CompiledQuery",
    "Filter",
    "Measure",
    "OrderBy",
    "PeriodSpec",
    "aggregate_parameters",
    "compile_aggregate",
    "is_numeric",
    "parameters_schema",
    "parse_aggregate",
    "source_parameters",
    "source_properties",
]
