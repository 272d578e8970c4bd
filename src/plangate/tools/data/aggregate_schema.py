"""The JSON schema of ``db_aggregate``'s arguments on a source: its tables, columns and metrics as enums.

Two forms. The tool's own schema (what any model reads, and what arguments are validated against) lists
every table and column, plus the semantic layer's metrics and dimensions. The grammar form is what a small
model samples under (``plangate.models._grammar`` turns it into a GBNF grammar), and it is closed: every
stream it allows compiles (``tests/copilot/test_grammar_streams.py`` samples them): ``table.column`` names
only, one measure, ``count`` of a real column (never ``*``, which names no table), ``sum`` / ``avg`` of a
table's number column times another of the same table's, and an ordering that names the measure written
(one variant of the arguments per measure kind, ``grammar_variants``).

For: the schema. Not for: compiling a query (``aggregate.py``) or the copilot's narrowing of the grammar to
what a question says (``plangate.copilot.small._constrained``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from pydantic import JsonValue

from plangate.tools.data.aggregate import (
    AGGREGATES,
    FILTER_OPS,
    MAX_FILTERS,
    MAX_GROUPS,
    MAX_LIMIT,
    MAX_MEASURES,
    MAX_ORDER,
    NUMERIC_AGGREGATES,
    is_numeric,
)
from plangate.tools.data.periods import BOUND_PATTERN, maybe_date_column
from plangate.tools.data.results import SchemaInfo
from plangate.tools.data.semantic import SemanticLayer

COUNTING = ("count", "count_distinct", "min", "max")
"""The aggregates of any column (the others take a number column)."""


def _columns(
    info: SchemaInfo, *, grammar: bool
) -> tuple[list[str], dict[str, list[str]], list[str], list[str]]:
    """All column names, the number ones per table, the date ones and the groupable ones.

    Names are qualified, plus (outside a grammar) the bare names no two tables share. In a grammar, keys are
    no numbers to sum and primary keys no groups.
    """
    every: list[str] = []
    numbers: dict[str, list[str]] = {}
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
                numbers.setdefault(table.name, []).append(name)
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


def source_parameters(
    info: SchemaInfo, *, grammar: bool = False, semantic: SemanticLayer | None = None
) -> dict[str, JsonValue]:
    """The JSON schema of ``db_aggregate`` arguments on one source: its tables and columns as enums.

    Args:
        info: the source's schema.
        grammar: the closed form a grammar enforces on a small model (the module docstring says what it
            closes), every field written, in the order a question is read.
        semantic: the source's semantic layer: its metrics join the measures.
    """
    return parameters_schema(source_properties(info, grammar=grammar, semantic=semantic), grammar=grammar)


def parameters_schema(properties: dict[str, JsonValue], *, grammar: bool = False) -> dict[str, JsonValue]:
    """The arguments object of ``properties``: in the grammar form every one required and one variant per
    measure kind (``grammar_variants``); else ``source`` required (and ``measures``, unless a ``metric``
    may stand for them)."""
    if grammar:
        return grammar_variants(_object(properties, list(properties)))
    return _object(properties, ["source"] if "metric" in properties else ["source", "measures"])


def _measures(
    info: SchemaInfo, semantic: SemanticLayer | None, *, grammar: bool
) -> tuple[dict[str, JsonValue], list[str]]:
    """The schema of one measure, and the names an ordering may use for a measure."""
    columns, numbers, _, _ = _columns(info, grammar=grammar)
    metrics: list[JsonValue] = list(semantic.metrics) if semantic is not None else []
    metric = _object({"metric": _enum(metrics)}, ["metric"]) if metrics else None
    if grammar:
        options: list[JsonValue] = [
            _object({"agg": _enum(COUNTING), "column": _enum(columns)}, ["agg", "column"])
        ]
        # A product of two columns is summed at one grain: a table's own number columns only.
        options += [
            _object(
                {"agg": _enum(NUMERIC_AGGREGATES), "column": _enum(names), "times": _enum(names)},
                ["agg", "column"],
            )
            for names in numbers.values()
        ]
    else:
        every_number = [name for names in numbers.values() for name in names]
        times: JsonValue = {"anyOf": [_enum(every_number), {"type": "null"}]}
        options = [
            _object(
                {
                    "agg": _enum(AGGREGATES),
                    "column": _enum([*columns, "*"]),
                    "times": times,
                    "as": {"type": "string"},
                },
                ["agg", "column"],
            )
        ]
    if metric is not None:
        options.append(metric)
    measure: dict[str, JsonValue] = {"anyOf": options} if len(options) > 1 else dict(options[0])  # type: ignore[arg-type]
    return measure, [*AGGREGATES, *(str(name) for name in metrics)]


def source_properties(
    info: SchemaInfo, *, grammar: bool = False, semantic: SemanticLayer | None = None
) -> dict[str, JsonValue]:
    """The ``properties`` of :func:`source_parameters`' schema, one per argument of ``db_aggregate``."""
    columns, _, dates, groups = _columns(info, grammar=grammar)
    measure, measure_names = _measures(info, semantic, grammar=grammar)
    dimensions: list[str] = list(semantic.dimensions) if semantic is not None and not grammar else []
    value: dict[str, JsonValue] = (
        {"type": ["string", "number"], "maxLength": 40}
        if grammar
        else {"type": ["string", "number", "boolean", "array", "null"]}
    )
    filters = _object(
        {"column": _enum([*columns, *dimensions]), "op": _enum(FILTER_OPS), "value": value},
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
            "column": _enum(measure_names) if grammar else {"type": "string"},
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
        if semantic is not None and semantic.metrics:
            properties["metric"] = _enum(list(semantic.metrics))
    properties |= {
        "measures": _array(measure, 1 if grammar else MAX_MEASURES, 1 if grammar else 0),
        "group_by": _array(_enum([*groups, *dimensions]), MAX_GROUPS),
        "period": period,
        "filters": _array(filters, 2 if grammar else MAX_FILTERS),
        "order_by": _array(order, 1 if grammar else MAX_ORDER),
        "limit": limit,
    }
    return properties


def _names_of(option: dict[str, JsonValue]) -> list[tuple[str, str]]:
    """What a measure option may be ordered by: ``(field, value)`` for each aggregate or metric it offers."""
    fields = option.get("properties")
    if not isinstance(fields, dict):
        return []
    key = "metric" if "metric" in fields else "agg"
    values = fields.get(key)
    enum = values.get("enum") if isinstance(values, dict) else None
    return [(key, str(value)) for value in enum] if isinstance(enum, list) else []


def grammar_variants(arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The grammar form's arguments object split into one variant per measure kind (an aggregate or a
    metric), each of whose orderings can only name that measure: a context-free grammar cannot otherwise
    tie ``order_by`` to what ``measures`` wrote, and ``order_by [{"column": "count"}]`` after a ``sum``
    does not compile. An object without one measure (or already split) is returned as it is."""
    properties = arguments.get("properties")
    if not isinstance(properties, dict):
        return arguments
    measures = properties.get("measures")
    order = properties.get("order_by")
    items = measures.get("items") if isinstance(measures, dict) else None
    if not isinstance(items, dict) or not isinstance(measures, dict) or measures.get("maxItems") != 1:
        return arguments
    options = items.get("anyOf", [items])
    variants: list[JsonValue] = []
    for option in options if isinstance(options, list) else []:
        if not isinstance(option, dict):
            continue
        for key, name in _names_of(option):
            own = option.get("properties")
            fields: dict[str, JsonValue] = copy.deepcopy(own) if isinstance(own, dict) else {}
            fields[key] = {"enum": [name]}
            narrowed = {**copy.deepcopy(option), "properties": fields}
            variant = copy.deepcopy(properties)
            variant["measures"] = {**measures, "items": narrowed}
            variant["order_by"] = _order_for(order, name)
            variants.append({**arguments, "properties": variant})
    if not variants:
        return arguments
    return variants[0] if len(variants) == 1 else {"anyOf": variants}  # type: ignore[return-value]


def _order_for(order: JsonValue, name: str) -> JsonValue:
    """``order_by``'s schema with its one column the measure ``name`` (an empty list stays as it is)."""
    item = order.get("items") if isinstance(order, dict) else None
    if (
        not isinstance(order, dict)
        or not isinstance(item, dict)
        or not isinstance(item.get("properties"), dict)
    ):
        return copy.deepcopy(order)
    fields = dict(item["properties"])  # type: ignore[arg-type]
    fields["column"] = {"enum": [name]}
    return {**order, "items": {**item, "properties": fields}}


def aggregate_parameters(
    schemas: Sequence[SchemaInfo], semantics: dict[str, SemanticLayer] | None = None
) -> dict[str, JsonValue]:
    """The JSON schema of ``db_aggregate`` over several sources: one alternative per source."""
    layers = semantics or {}
    if not schemas:
        return {"type": "object", "properties": {"source": {"enum": []}}, "required": ["source"]}
    if len(schemas) == 1:
        return source_parameters(schemas[0], semantic=layers.get(schemas[0].source))
    variants: list[JsonValue] = [
        source_parameters(info, semantic=layers.get(info.source)) for info in schemas
    ]
    return {"anyOf": variants}


__all__ = [
    "COUNTING",
    "aggregate_parameters",
    "grammar_variants",
    "parameters_schema",
    "source_parameters",
    "source_properties",
]
