"""The built-in ``data`` toolkit: ``db_schema``, ``db_query`` and ``db_aggregate`` over a
:class:`DataSources` registry.

All three are read tools of the ``data`` domain; ``db_aggregate``'s parameter schema is built from the
sources' real schemas (tables and columns as enums, and the metrics of a source's semantic layer), read when
the tools are built. They turn every outcome
(refused by the guard, rejected by the database, stopped by a limit) into a ``ToolResult`` the model can act
on; they never raise into the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pydantic import JsonValue, TypeAdapter

from plangate.tools.data._format import human_bytes, render_rows, render_schema, rows_summary, shown_table
from plangate.tools.data.aggregate import AggregateError, compile_aggregate, parse_aggregate
from plangate.tools.data.aggregate_schema import aggregate_parameters
from plangate.tools.data.results import DataSourceError, QueryLimits, QueryRefused, QueryTimeout, SchemaInfo
from plangate.tools.data.semantic import SemanticLayer
from plangate.tools.data.sources import DataSources
from plangate.tools.result import ToolResult
from plangate.tools.tool import Tool, tool

DOMAIN = "data"
PACK = "sql"

_SCHEMA_JSON: TypeAdapter[SchemaInfo] = TypeAdapter(SchemaInfo)


def data_tools(
    sources: DataSources,
    limits: QueryLimits | None = None,
    *,
    schemas: Mapping[str, SchemaInfo] | None = None,
    semantics: Mapping[str, SemanticLayer] | None = None,
) -> list[Tool]:
    """Build ``db_schema``, ``db_query`` and ``db_aggregate`` bound to ``sources``.

    Args:
        sources: the data sources the tools may read.
        limits: row, size and time limits per call; the defaults are 1,000 rows, 1 MB and 30 s.
        schemas: the sources' schemas, when the caller has read them already; the others are read here
            (a source that cannot be read is left out of ``db_aggregate``'s enums, and said so).
        semantics: the semantic layers of the sources that have one, by source name (``db_aggregate``
            takes their metrics by name).

    Returns:
        The three tools, domain ``data``, pack ``sql``, all ``read``.
    """
    bounds = limits or QueryLimits()
    known = ", ".join(sources.names()) or "none yet"

    @tool(domain=DOMAIN, pack=PACK, idempotent=True)
    def db_schema(source: str) -> ToolResult:
        """Describe a data source: its tables and views, columns with types, keys and row counts.

        Call it before writing SQL for a source you have not seen.

        Args:
            source: the name of a registered data source.
        """
        if source not in sources:
            message = sources.unknown_message(source)
            return ToolResult.blocked("unknown_source", message, observation=message)
        try:
            schema = sources.get(source).schema(bounds)
        except QueryTimeout as exc:
            limit: dict[str, JsonValue] = {"limit": "time", "timeout_s": exc.seconds}
            observation = f"reading the schema: {exc}"
            return ToolResult.failed("query_timeout", str(exc), observation=observation, data=limit)
        except DataSourceError as exc:
            return ToolResult.failed("source_error", str(exc))
        text, clipped = render_schema(schema, bounds)
        data: JsonValue = _SCHEMA_JSON.dump_python(schema, mode="json")
        tables = sum(1 for table in schema.tables if table.kind == "table")
        summary = f"{source}: {tables} tables" + (" (clipped)" if clipped else "")
        return ToolResult.done(text, summary=summary, data=data)

    @tool(domain=DOMAIN, pack=PACK, idempotent=True)
    def db_query(source: str, sql: str) -> ToolResult:
        """Run one read-only SQL query on a data source and return its rows.

        Only a single SELECT, WITH … SELECT, VALUES or EXPLAIN statement is accepted. Aggregate in SQL rather
        than fetching raw rows: results stop at the row, size and time limits.

        Args:
            source: the name of a registered data source.
            sql: one read-only statement in the source's dialect (SQLite or PostgreSQL).
        """
        if source not in sources:
            message = sources.unknown_message(source)
            return ToolResult.blocked("unknown_source", message, observation=message)
        try:
            result = sources.get(source).query(sql, bounds)
        except QueryRefused as exc:
            return ToolResult.blocked(
                "sql_refused", exc.reason, observation=f"query refused by the read-only guard: {exc.reason}"
            )
        except QueryTimeout as exc:
            observation = f"{exc}: simplify it, filter earlier or aggregate"
            limit: dict[str, JsonValue] = {"limit": "time", "timeout_s": exc.seconds}
            return ToolResult.failed("query_timeout", str(exc), observation=observation, data=limit)
        except DataSourceError as exc:
            observation = f"the database rejected the query: {exc}"
            return ToolResult.failed("sql_error", str(exc), observation=observation)
        rendered = render_rows(result, bounds)
        return ToolResult.done(rendered.text, summary=rows_summary(rendered), data=rendered.data)

    limits_note = (
        f" Limits: {bounds.max_rows:,} rows, {human_bytes(bounds.max_bytes)} of text, {bounds.timeout_s:g} s."
        f" Sources: {known}."
    )
    return [
        _with_description(db_schema, f" Sources: {known}."),
        _with_description(db_query, limits_note),
        aggregate_tool(sources, bounds, schemas=schemas, semantics=semantics),
    ]


def _read_schemas(
    sources: DataSources, limits: QueryLimits, given: Mapping[str, SchemaInfo] | None
) -> tuple[dict[str, SchemaInfo], list[str]]:
    schemas: dict[str, SchemaInfo] = {}
    unread: list[str] = []
    for name in sources.names():
        if given is not None and name in given:
            schemas[name] = given[name]
            continue
        try:
            schemas[name] = sources.get(name).schema(limits)
        except DataSourceError as exc:
            unread.append(f"{name} ({exc})")
    return schemas, unread


def aggregate_tool(
    sources: DataSources,
    limits: QueryLimits | None = None,
    *,
    schemas: Mapping[str, SchemaInfo] | None = None,
    semantics: Mapping[str, SemanticLayer] | None = None,
) -> Tool:
    """``db_aggregate``: a structured query (measures or metrics, groups, filters, a period, an order, a
    limit) compiled to SQL against the source's real schema; its parameters list the tables, columns and
    metrics as enums. Its output holds the rows, the SQL, the rows as shown, the metrics' definitions it
    used (``definitions``) and the measures it computed at their own grain (``grains``).

    Args:
        sources: the data sources it may read.
        limits: row, size and time limits per call.
        schemas: schemas already read, by source name; the others are read now.
        semantics: semantic layers by source name.
    """
    bounds = limits or QueryLimits()
    known, unread = _read_schemas(sources, bounds, schemas)
    layers = {name: layer for name, layer in (semantics or {}).items() if name in known}

    def db_aggregate(**arguments: JsonValue) -> ToolResult:
        source = arguments.get("source")
        if not isinstance(source, str) or source not in known:
            message = (
                sources.unknown_message(str(source)) if source not in sources
                else f"the schema of {source!r} could not be read"
            )
            return ToolResult.blocked("unknown_source", message, observation=message)
        try:
            compiled = compile_aggregate(parse_aggregate(arguments), known[source], layers.get(source))
        except AggregateError as exc:
            return ToolResult.blocked("invalid_query", str(exc), observation=f"the query was not run: {exc}")
        try:
            result = sources.get(source).query(compiled.sql, bounds)
        except QueryRefused as exc:
            return ToolResult.blocked("sql_refused", exc.reason, observation=f"query refused: {exc.reason}")
        except QueryTimeout as exc:
            observation = f"{exc}: filter earlier or aggregate less"
            return ToolResult.failed("query_timeout", str(exc), observation=observation)
        except DataSourceError as exc:
            return ToolResult.failed("sql_error", str(exc), observation=f"the database rejected it: {exc}")
        rendered = render_rows(result, bounds)
        data = dict(rendered.data)
        data["sql"] = compiled.sql
        if compiled.definitions:
            data["definitions"] = dict(compiled.definitions)
        if compiled.grains:
            data["grains"] = dict(compiled.grains)
        # The rows as a person reads them, for a prompt that asks for an answer to be written from them:
        # a small model copies "1,328,137.93" where it garbles the float 1328137.929999979.
        columns, rows = rendered.data["columns"], rendered.data["rows"]
        if isinstance(columns, list) and isinstance(rows, list):
            data["shown"] = shown_table([str(c) for c in columns], [r for r in rows if isinstance(r, list)])
        return ToolResult.done(rendered.text, summary=rows_summary(rendered), data=data)

    note = f" Sources: {', '.join(known) or 'none'}."
    for name, layer in layers.items():
        if layer.metrics:
            note += f" Metrics of {name} ({{\"metric\": name}}): " + "; ".join(
                f"{m.name} = {m.definition}" for m in layer.metrics.values()
            )
            note += "."
    if unread:
        note += f" Not readable now: {'; '.join(unread)}."
    return Tool(
        name="db_aggregate",
        description=(
            "Compute measures (count, count_distinct, sum, avg, min, max of a column; sum of a column times "
            "another) over a table, grouped by columns, filtered, within a period (from/to: a year 2025, a "
            "month 2025-03 or a day), ordered and limited. Columns of other tables are joined along foreign "
            "keys; each measure is computed once per row of its own table, whatever the joins repeat. Names "
            "are table.column; the SQL is built for you." + note
        ),
        parameters=aggregate_parameters(list(known.values()), layers),
        function=db_aggregate,
        domain=DOMAIN,
        pack=PACK,
        idempotent=True,
    )


def _with_description(item: Tool, extra: str) -> Tool:
    return replace(item, description=item.description + extra)


__all__ = ["DOMAIN", "PACK", "aggregate_tool", "data_tools"]
