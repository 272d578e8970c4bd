"""Render query results and schemas as compact text for the model, applying the size limit.

Pure functions over ``results.py`` values; no database access.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from pydantic import JsonValue

from plangate.tools.data.results import Cell, QueryLimits, QueryResult, SchemaInfo, TableInfo

SEPARATOR = " | "


@dataclass(frozen=True, slots=True)
class RenderedRows:
    """A query result as the model sees it.

    Attributes:
        text: the table text with its notes.
        data: columns and the rows shown, as JSON.
        shown: how many rows the text shows.
        truncated: the query had more rows than the row limit.
        clipped: the byte limit cut the rows short, or a value was over the value limit.
    """

    text: str
    data: dict[str, JsonValue]
    shown: int
    truncated: bool
    clipped: bool


def human_bytes(size: int) -> str:
    """``1000000`` → ``1 MB``, ``2500`` → ``2.5 kB``, ``300`` → ``300 bytes``."""
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if size >= scale:
            return f"{size // scale:,} {unit}" if size % scale == 0 else f"{size / scale:,.1f} {unit}"
    return f"{size:,} bytes"


def cell_text(value: Cell) -> str:
    """One value as table text: ``NULL`` for null, a size for blobs, newlines escaped."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value):,} bytes>"
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return repr(value) if isinstance(value, float) else str(value)


def shown_cell(value: JsonValue) -> str:
    """One cell as a person reads it: a fraction rounded (``1,328,137.93``, not the ``1328137.929999979`` a
    sum of prices is in floating point; ``0.0512``), everything else as ``cell_text`` writes it."""
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        if abs(value) >= 1:
            return f"{value:,.2f}"
        if abs(value) >= 0.0001:
            return f"{value:.4f}".rstrip("0")
    return cell_text(value)


def shown_table(columns: list[str], rows: list[list[JsonValue]], limit: int = 50) -> str:
    """Rows as ``a | b`` lines under a header, each cell as ``shown_cell`` writes it, at most ``limit`` of
    them and then how many there are in all (their count, which the number guard knows, rather than a
    difference it does not)."""
    lines = [SEPARATOR.join(columns)]
    lines += [SEPARATOR.join(shown_cell(value) for value in row) for row in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"… {len(rows):,} rows in all")
    return "\n".join(lines)


def _cell_json(value: Cell) -> JsonValue:
    return f"<blob {len(value):,} bytes>" if isinstance(value, bytes) else value


def render_rows(result: QueryResult, limits: QueryLimits) -> RenderedRows:
    """The rows as ``a | b`` lines under a header, cut at ``limits.max_bytes``, with a closing note."""
    header = SEPARATOR.join(result.columns)
    lines = [header]
    used = len(header.encode()) + 1
    shown = 0
    clipped = False
    for row in result.rows:
        line = SEPARATOR.join(cell_text(value) for value in row)
        size = len(line.encode()) + 1
        if used + size > limits.max_bytes:
            clipped = True
            break
        lines.append(line)
        used += size
        shown += 1
    notes = [f"{shown:,} row{'' if shown == 1 else 's'}"]
    if result.more_rows:
        notes.append(f"truncated at {limits.max_rows:,} rows: aggregate or add a LIMIT to see the rest")
    if clipped:
        notes.append(f"result clipped at {human_bytes(limits.max_bytes)}")
    if result.clipped_values:
        many = result.clipped_values != 1
        notes.append(
            f"{result.clipped_values:,} value{'s' if many else ''} over the "
            f"{human_bytes(limits.max_value_bytes)} value limit clipped (shown as NULL)"
        )
    clipped = clipped or result.clipped_values > 0
    lines.append(f"({'; '.join(notes)})")
    data: dict[str, JsonValue] = {
        "columns": list(result.columns),
        "rows": [[_cell_json(value) for value in row] for row in result.rows[:shown]],
        "truncated": result.more_rows,
        "clipped": clipped,
    }
    if result.clipped_values:
        data["clipped_values"] = result.clipped_values
    return RenderedRows("\n".join(lines), data, shown, result.more_rows, clipped)


def rows_summary(rendered: RenderedRows) -> str:
    """``12 rows``, ``1,000 rows (truncated)``, ``80 rows (clipped)``."""
    text = f"{rendered.shown:,} row{'' if rendered.shown == 1 else 's'}"
    if rendered.truncated:
        return f"{text} (truncated)"
    return f"{text} (clipped)" if rendered.clipped else text


def _table_lines(table: TableInfo) -> list[str]:
    size = "" if table.row_count is None else f" ({table.row_count:,} rows)"
    lines = [f"{table.kind} {table.name}{size}"]
    references = {key.column: key for key in table.foreign_keys}
    for column in table.columns:
        parts = [f"  {column.name}", column.type or "ANY"]
        if column.primary_key:
            parts.append("primary key")
        elif not column.nullable:
            parts.append("not null")
        key = references.get(column.name)
        if key is not None:
            parts.append(f"-> {key.references_table}.{key.references_column}".rstrip("."))
        lines.append(" ".join(parts))
    return lines


def render_schema(schema: SchemaInfo, limits: QueryLimits) -> tuple[str, bool]:
    """The schema as text (one block per table), cut at ``limits.max_bytes``; returns the text and whether it
    was clipped."""
    tables = sum(1 for table in schema.tables if table.kind == "table")
    views = len(schema.tables) - tables
    lines = [f"source {schema.source} ({schema.dialect}): {tables} tables, {views} views"]
    used = len(lines[0].encode()) + 1
    for table in schema.tables:
        block = _table_lines(table)
        size = sum(len(line.encode()) + 1 for line in block)
        if used + size > limits.max_bytes:
            lines.append(f"(schema clipped at {human_bytes(limits.max_bytes)})")
            return "\n".join(lines), True
        lines.extend(block)
        used += size
    return "\n".join(lines), False


__all__ = ["RenderedRows", "cell_text", "human_bytes", "render_rows", "render_schema", "rows_summary"]
