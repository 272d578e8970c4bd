"""The built-in ``data`` toolkit: ``db_schema`` and ``db_query`` over a :class:`DataSources` registry.

Both are read tools of the ``data`` domain. They turn every outcome (refused by the guard, rejected by the
database, stopped by a limit) into a ``ToolResult`` the model can act on; they never raise into the loop.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import JsonValue, TypeAdapter

from plangate.tools.data._format import human_bytes, render_rows, render_schema, rows_summary
from plangate.tools.data.results import DataSourceError, QueryLimits, QueryRefused, QueryTimeout, SchemaInfo
from plangate.tools.data.sources import DataSources
from plangate.tools.result import ToolResult
from plangate.tools.tool import Tool, tool

DOMAIN = "data"
PACK = "sql"

_SCHEMA_JSON: TypeAdapter[SchemaInfo] = TypeAdapter(SchemaInfo)


def data_tools(sources: DataSources, limits: QueryLimits | None = None) -> list[Tool]:
    """Build ``db_schema`` and ``db_query`` bound to ``sources``.

    Args:
        sources: the data sources the tools may read.
        limits: row, size and time limits per call; the defaults are 1,000 rows, 1 MB and 30 s.

    Returns:
        The two tools, domain ``data``, pack ``sql``, both ``read``.
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
    ]


def _with_description(item: Tool, extra: str) -> Tool:
    return replace(item, description=item.description + extra)


__all__ = ["DOMAIN", "PACK", "data_tools"]
