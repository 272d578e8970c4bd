"""What the copilot model reads: the op protocol, the data source described (with its semantic layer's
metrics and dimensions), the question, its history, and the messages that answer a ``look``, report the
check's issues, or hand a retry back.

For: text only, built from plain values: the full op protocol of the models that write ops freely, and the
schema text and ``look`` answers every model reads. Not for: calling the model (``_generate``), or the short
prompt of a model that samples under grammars (``plangate.copilot.small``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import JsonValue

from plangate.copilot._check import REPAIRED_WARNINGS
from plangate.copilot._scope import Scope
from plangate.copilot.policy import HistoryItem, history_items
from plangate.formulas import Issue
from plangate.models import Message
from plangate.tools.data import QueryResult
from plangate.tools.data._format import cell_text
from plangate.tools.data.results import TableInfo

SCHEMA_CHARS = 9_000
"""The longest schema description in the full prompt; beyond it, tables are listed by name only."""

PROTOCOL = """You build a workflow that answers a question about data. Write it as operations: one JSON
object per line, nothing else on the line, no code fences. The operations:
{"op":"plan","summary":"..."}                  what you will do, in one sentence
{"op":"look","table":"T"}                       see the columns, types and 5 sample rows of table T
{"op":"add_step","step":{...}}                  add a step (below)
{"op":"update_step","id":"S", ...fields}        change fields of step S (a field set to null is deleted)
{"op":"remove_step","id":"S"}                   remove step S
{"op":"done","explanation":"...","run":true}    the workflow is complete; it runs (run:false only builds it)
{"op":"reply","text":"..."}                     answer without data, only when no data is needed
{"op":"ask","text":"..."}                       ask the user first, when the question cannot be understood

A step is {"id":"...","title":"...","needs":["ids of earlier steps it reads"], and one executor:
  "tool":{"name":"db_aggregate","args":{...}}   a structured query (prefer it)
  "tool":{"name":"db_query","args":{"source":"S","sql":"SELECT ..."}}   one read-only SQL statement
  "llm":{"prompt":"..."}                         a model call; its prompt reads earlier results as
        {{steps.ID.output.columns}} and {{steps.ID.output.rows}}, and the question as {{question}}
The output of the LAST step is the answer: make it an llm step that writes the answer from the rows of the
steps it needs. Never write a number yourself: every number in the answer must be copied from the rows.

db_aggregate args: {"source":"S","table":"T",
  "measures":[{"agg":"count|count_distinct|sum|avg|min|max","column":"table.column or *",
               "times":"table.column (optional: sums column x times)","as":"result name"}
              or {"metric":"a metric of the source, by name"}],
  "group_by":["table.column"],
  "filters":[{"column":"table.column","op":"= != < <= > >= in|not in|like|is null","value":...}],
  "period":{"column":"table.date_column","from":"2025","to":"2025-06"},
  "order_by":[{"column":"a group_by column or a measure's as","desc":true}], "limit":10}
Columns of other tables are joined along foreign keys; each measure is computed once per row of its own
table, whatever a join repeats. A period bound is a year, a month or a day. When the source defines a metric
for what the question asks (revenue, say), use the metric: it is the source's own definition.
In db_query SQL, never SUM or AVG a column of a table joined to its child rows (an invoice's total joined to
its lines counts it once per line): sum the child rows, or aggregate the parent first in a subquery.

Example, on another database:
"""
_EXAMPLE_OPS: list[dict[str, JsonValue]] = [
    {"op": "plan", "summary": "Total sales per city in 2024, the top 2"},
    {
        "op": "add_step",
        "step": {
            "id": "sales",
            "title": "Sales per city",
            "tool": {
                "name": "db_aggregate",
                "args": {
                    "source": "demo",
                    "table": "sales",
                    "measures": [{"agg": "sum", "column": "sales.amount", "as": "total"}],
                    "group_by": ["stores.city"],
                    "period": {"column": "sales.sold_on", "from": "2024", "to": "2024"},
                    "order_by": [{"column": "total", "desc": True}],
                    "limit": 2,
                },
            },
        },
    },
    {
        "op": "add_step",
        "step": {
            "id": "answer",
            "title": "Answer",
            "needs": ["sales"],
            "llm": {
                "prompt": (
                    "Question: {{question}}\n"
                    "Rows {{steps.sales.output.columns}}: {{steps.sales.output.rows}}\n"
                    "Answer in one or two sentences, copying every number exactly from the rows."
                )
            },
        },
    },
    {"op": "done", "explanation": "Sums sales per city for 2024 and keeps the top 2", "run": True},
]
PROTOCOL += "\n".join(json.dumps(op, separators=(",", ":")) for op in _EXAMPLE_OPS) + "\n"


def _column_text(table: TableInfo, scope: Scope) -> str:
    keys = {key.column: key for key in table.foreign_keys}
    ranges = {item.column: item for item in scope.ranges_of(table.name)}
    parts = []
    for column in table.columns:
        text = f"{column.name} {column.type or 'ANY'}"
        if column.primary_key:
            text += " key"
        key = keys.get(column.name)
        if key is not None:
            text += f" -> {key.references_table}.{key.references_column}".rstrip(".")
        span = ranges.get(column.name)
        if span is not None:
            text += f" [{span.first.isoformat()} .. {span.last.isoformat()}]"
        parts.append(text)
    return ", ".join(parts)


def table_line(table: TableInfo, scope: Scope) -> str:
    """``orders (4,000 rows): order_id INTEGER key, order_date TEXT [2025-01-01 .. 2026-06-30], …``."""
    size = "" if table.row_count is None else f" ({table.row_count:,} rows)"
    kind = " view" if table.kind == "view" else ""
    return f"{table.name}{kind}{size}: {_column_text(table, scope)}"


def schema_text(scope: Scope, limit: int = SCHEMA_CHARS) -> str:
    """The source described in lines, tables beyond ``limit`` characters listed by name only."""
    schema = scope.schema
    head = f"Data source {scope.name!r} ({schema.dialect}), {len(schema.tables)} tables and views:"
    lines = [head]
    used = len(head)
    rest: list[str] = []
    for table in schema.tables:
        line = table_line(table, scope)
        if rest or used + len(line) > limit:
            rest.append(table.name)
            continue
        lines.append(line)
        used += len(line) + 1
    if rest:
        lines.append(f"More tables (look at one to see its columns): {', '.join(rest)}")
    return "\n".join(lines)


def _history_text(history: Sequence[HistoryItem]) -> str:
    items = history_items(history)
    if not items:
        return ""
    lines = ["Earlier in this conversation:"]
    for item in items:
        lines.append(f"Q: {item['question']}\nA: {item['answer']}")
    return "\n".join(lines) + "\n\n"


def metrics_text(scope: Scope) -> str:
    """The source's metrics and dimensions as the prompt lists them, or "" without a semantic layer."""
    layer = scope.semantic
    if layer is None or not (layer.metrics or layer.dimensions):
        return ""
    lines = []
    if layer.metrics:
        lines.append('Metrics of this source (in db_aggregate: {"metric":"name"}):')
        for metric in layer.metrics.values():
            also = f" (also: {', '.join(metric.synonyms)})" if metric.synonyms else ""
            about = f": {metric.description}" if metric.description else ""
            lines.append(f"- {metric.name} = {metric.definition}{about}{also}")
    if layer.dimensions:
        named = [f"{d.name} = {d.column.name}" for d in layer.dimensions.values()]
        lines.append("Dimensions (group_by or filter by name): " + "; ".join(named))
    return "\n".join(lines) + "\n"


def messages(
    scope: Scope, question: str, history: Sequence[HistoryItem], instruction: str | None
) -> list[Message]:
    """The opening messages of a generation: the protocol, the schema and the semantic layer, then the
    conversation's earlier turns and the question (or the retry's instruction)."""
    system = PROTOCOL + "\n" + schema_text(scope) + "\n" + metrics_text(scope)
    body = instruction if instruction is not None else f"Question: {question}"
    return [Message("system", system), Message("user", _history_text(history) + body)]


def look_text(table: TableInfo, scope: Scope, sample: QueryResult | None, problem: str | None) -> str:
    """What a ``look`` at ``table`` shows: its columns and types, then up to 5 sample rows."""
    lines = [f"look {table.name}: {table_line(table, scope)}"]
    if sample is None:
        lines.append(f"(no sample rows: {problem})")
    else:
        lines.append(f"{len(sample.rows)} sample rows:")
        lines.append(" | ".join(sample.columns))
        lines += [" | ".join(cell_text(value)[:60] for value in row) for row in sample.rows]
    lines.append("Go on with the next operation.")
    return "\n".join(lines)


def issue_list(issues: Sequence[Issue]) -> str:
    """The check's errors (and the warnings the repair rounds hand back, a fan-out) as ``- path: message``
    lines."""
    return "\n".join(
        f"- {issue.path}: {issue.message}" if issue.path else f"- {issue.message}"
        for issue in issues
        if issue.level == "error" or issue.code in REPAIRED_WARNINGS
    )


def repair_text(issues: Sequence[Issue]) -> str:
    """The message that hands the check's errors back to the model, to fix with ops."""
    return (
        f"The check of your workflow found these errors:\n{issue_list(issues)}\n"
        "Fix them with update_step, remove_step or add_step ops (one per line; an add_step of a step that "
        "exists replaces it), then done."
    )


__all__ = [
    "PROTOCOL",
    "SCHEMA_CHARS",
    "issue_list",
    "look_text",
    "messages",
    "metrics_text",
    "repair_text",
    "schema_text",
    "table_line",
]
