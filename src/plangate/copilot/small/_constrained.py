"""The op stream a grammar-constrained model (the local default) may write, as a schema of lines.

A small model cannot be trusted with the whole op protocol, so it gets the structured path only, under a
grammar (``plangate.models._grammar`` turns ``{"x-lines": [...]}`` into one): one line, the ``add_step`` of
a ``db_aggregate`` query whose arguments are the source's real tables and columns as enums (it cannot name
a column that does not exist). The copilot then adds the two ops that always follow on this path (marked
``"by": "copilot"``): the answer step, which writes the answer from the query's rows (its prompt is what a
small model writes worst, and sampling fixed text token by token under a grammar costs as much as writing
it), and ``done``.

The grammar also holds what the question states plainly, so the model cannot contradict it: the period it
names (else no period), the numbers it names as the possible limits (else 100), and as filters only the
values of the data's category columns that it mentions (``cancelled`` for ``orders.status``). Every stream
the model can write is a formula that passes the check's shape rules.

For: the schema and the question's hints. Not for: the prompt (``_prompt``), or telling whether a model
samples under grammars (``plangate.copilot._strategy.samples_under_grammar``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import JsonValue

from plangate.copilot._periods import asked_period
from plangate.copilot.small._asked import NUMBER_WORDS, Asked, asked
from plangate.models._grammar import LINES, NOT_BLANK
from plangate.tools.data import SchemaInfo, TableInfo
from plangate.tools.data.aggregate import parameters_schema, source_properties
from plangate.tools.data.periods import Period, maybe_date_column
from plangate.tools.data.profile import CategoryColumn

QUERY_STEP = "query"
ANSWER_STEP = "answer"
ANSWER_PROMPT = (
    "Question: {{question}}\n"
    "Rows:\n{{steps.query.output.shown}}\n"
    "Answer the question in one or two sentences from these rows only. Copy every number exactly as the "
    "rows write it. If there are no rows, say that the data has none for the question."
)
ANSWER_OP: dict[str, JsonValue] = {
    "op": "add_step",
    "step": {"id": ANSWER_STEP, "title": "Answer", "needs": [QUERY_STEP], "llm": {"prompt": ANSWER_PROMPT}},
}
DONE_OP: dict[str, JsonValue] = {
    "op": "done",
    "explanation": "A structured query, then an answer written from its rows",
    "run": True,
}
DEFAULT_LIMIT = 10
"""The limit when the question names no number: a small model reads a few rows better than many."""
_INTEGER = re.compile(r"(?<![\d.,-])(\d{1,4})(?![\d.,])")
_NOT_BEFORE = re.compile(
    r"\b(not|no|non|excluding|exclude|without|except|but|leaving|ignoring|other than|don't|do not)\b"
    r"(?:\W+\w+){0,3}\W+$"
)
_NOT_AFTER = re.compile(
    r"^\W*(?:\w+\W+){0,3}?(aside|excluded|left out|don't count|do not count|not counted)\b"
)
NO_GROUP_LIMIT = 100
"""The limit of a grouped question that names no number: every group (up to this many)."""


@dataclass(frozen=True)
class Hints:
    """What a question states plainly.

    Attributes:
        period: the bounds of the period it names (``("2025", "2025")``), or None.
        limits: the numbers it names that could be a limit.
        mentions: ``(table.column, value)`` for each category value it mentions.
        linked: the ``table.column`` names whose table or column the question names (``regions`` for
            "which regions"): the groups it can mean. Empty when it names none.
        negated: the mentioned values it leaves out ("leaving cancelled orders aside"): filtered with
            ``!=``.
        asked: what it asks to compute (``_asked``), or None when unknown.
    """

    period: tuple[str, str] | None = None
    limits: list[int] = field(default_factory=list)
    mentions: list[tuple[str, str]] = field(default_factory=list)
    linked: list[str] = field(default_factory=list)
    negated: frozenset[str] = frozenset()
    asked: Asked | None = None


_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _forms(word: str) -> set[str]:
    """A word and the singular forms it may be the plural of (``countries`` gives ``country``)."""
    forms = {word}
    if len(word) > 3 and word.endswith("s"):
        forms.add(word[:-1])
        if word.endswith("es"):
            forms.add(word[:-2])
        if word.endswith("ies"):
            forms.add(word[:-3] + "y")
    return forms


def _words(name: str) -> set[str]:
    spaced = _CAMEL.sub(" ", name).lower()
    return {form for word in _WORD.findall(spaced) for form in _forms(word)} - {"id"}


_LABELS = frozenset({"name", "title", "label"})
_TEXT = ("char", "text", "clob", "string")


def _display_columns(table: TableInfo) -> list[str]:
    """The columns that name a table's rows: ``name`` / ``title`` / ``label`` ones, else its first text
    column that is no key (what a person means by "which regions")."""
    keys = {key.column for key in table.foreign_keys}
    plain = [c for c in table.columns if not c.primary_key and c.name not in keys]
    labels = [c for c in plain if _words(c.name) & _LABELS]
    texts = [c for c in plain if any(word in c.type.lower() for word in _TEXT)]
    chosen = labels or texts[:1]
    return [f"{table.name}.{column.name}" for column in chosen]


def linked_columns(question: str, schema: SchemaInfo) -> list[str]:
    """The columns a question names, directly (``channel``), or through their table (``regions``: the
    columns that name its rows): schema linking, by words (plurals folded), so a small model groups by
    what the question is about."""
    asked = {form for word in _WORD.findall(question.lower()) for form in _forms(word)}
    found: list[str] = []
    for table in schema.tables:
        keys = {key.column for key in table.foreign_keys}
        for column in table.columns:
            if not column.primary_key and column.name not in keys and _words(column.name) & asked:
                found.append(f"{table.name}.{column.name}")
        if _words(table.name) & asked:
            found += [name for name in _display_columns(table) if name not in found]
    return found


def period_bounds(period: Period) -> tuple[str, str] | None:
    """A period as the bounds ``db_aggregate`` takes: whole years, else whole months, else days."""
    if period.start is None or period.end is None:
        return None
    start, end = period.start, period.end
    last = end - timedelta(days=1)
    if start.month == start.day == end.month == end.day == 1:
        return str(start.year), str(last.year)
    if start.day == end.day == 1:
        return f"{start.year:04d}-{start.month:02d}", f"{last.year:04d}-{last.month:02d}"
    return start.isoformat(), last.isoformat()


def question_hints(
    question: str, categories: list[CategoryColumn], schema: SchemaInfo | None = None
) -> Hints:
    """The period, the limits, the category values and the columns ``question`` names."""
    period = asked_period(question)
    lowered = question.lower()
    limits = [int(match.group(1)) for match in _INTEGER.finditer(question) if 0 < int(match.group(1)) <= 1000]
    limits += [number for word, number in NUMBER_WORDS.items() if re.search(rf"\b{word}\b", lowered)]
    mentions: list[tuple[str, str]] = []
    negated: set[str] = set()
    for column in categories:
        for value in column.values:
            found = re.search(rf"(?<!\w){re.escape(value.lower())}(?!\w)", lowered)
            if len(value) > 1 and found:
                mentions.append((column.name, value))
                if _NOT_BEFORE.search(lowered[: found.start()]) or _NOT_AFTER.search(lowered[found.end() :]):
                    negated.add(value)
    linked = linked_columns(question, schema) if schema is not None else []
    return Hints(
        period_bounds(period) if period else None,
        sorted(set(limits)),
        mentions[:8],
        linked,
        frozenset(negated),
        asked(question, schema, ignore=tuple(value for _, value in mentions)) if schema is not None else None,
    )


def _text(limit: int) -> dict[str, JsonValue]:
    return {"type": "string", "minLength": 1, "maxLength": limit, "pattern": NOT_BLANK}


def query_arguments(schema: SchemaInfo, hints: Hints) -> dict[str, JsonValue]:
    """``db_aggregate``'s grammar form on ``schema``, with the question's hints as its only choices."""
    properties = source_properties(schema, grammar=True)
    period = properties["period"]
    options_of = period.get("anyOf") if isinstance(period, dict) else None
    span = options_of[0] if isinstance(options_of, list) and options_of else None
    inner = span.get("properties") if isinstance(span, dict) else None
    if hints.period is not None and isinstance(span, dict) and isinstance(inner, dict):
        first, last = hints.period
        span_properties = dict(inner)
        span_properties["from"] = {"enum": [first]}
        span_properties["to"] = {"enum": [last]}
        properties["period"] = {**span, "properties": span_properties}
    else:
        properties["period"] = {"type": "null"}
    if hints.mentions:
        options: list[JsonValue] = [
            {
                "type": "object",
                "properties": {
                    "column": {"enum": [column]},
                    "op": {"enum": ["!=" if value in hints.negated else "="]},
                    "value": {"enum": [value]},
                },
                "required": ["column", "op", "value"],
                "additionalProperties": False,
            }
            for column, value in hints.mentions
        ]
        # A value the question names is a filter it wants: at least one is written.
        most = min(2, len(options))
        properties["filters"] = {
            "type": "array",
            "items": {"anyOf": options},
            "minItems": 1,
            "maxItems": most,
        }
    else:
        properties["filters"] = {"enum": [[]]}
    limits: list[JsonValue] = (
        [*hints.limits, DEFAULT_LIMIT] if DEFAULT_LIMIT not in hints.limits else [*hints.limits]
    )
    properties["limit"] = {"enum": limits}
    groups = properties["group_by"]
    if hints.linked and isinstance(groups, dict):
        cap = groups.get("maxItems")
        # As many groups as the question names at most: a small model repeats a name it likes.
        fewest = min(cap, len(hints.linked)) if isinstance(cap, int) else len(hints.linked)
        properties["group_by"] = {**groups, "items": {"enum": list(hints.linked)}, "maxItems": fewest}
    if hints.asked is not None:
        _apply_asked(properties, hints.asked, schema)
    return parameters_schema(properties, grammar=True)


def _apply_asked(properties: dict[str, JsonValue], what: Asked, schema: SchemaInfo) -> None:
    """Narrow the measure, the groups, the order and the limit to what the question asks to compute."""
    if what.aggs:
        properties["measures"] = {
            "type": "array",
            "items": _measure(what, properties["measures"]),
            "minItems": 1,
            "maxItems": 1,
        }
    base = next(iter(what.counted or what.measured), None)
    dates = dates_near(schema, base.rpartition(".")[0]) if base else []
    period = properties["period"]
    span = _fields(period) if isinstance(period, dict) else {}
    if dates and "column" in span and isinstance(period, dict):
        # The period of a count or a sum is on the dates of what it counts (an order line's: its order's).
        properties["period"] = {**period, "properties": {**span, "column": {"enum": dates}}}
    if what.grouped is False:
        # One value: nothing to group by, nothing to rank.
        properties["group_by"] = {"enum": [[]]}
        properties["order_by"] = {"enum": [[]]}
        properties["limit"] = {"enum": [1]}
        return
    groups = properties["group_by"]
    if what.grouped and isinstance(groups, dict):
        properties["group_by"] = {**groups, "minItems": 1}
    order = properties["order_by"]
    item = order.get("items") if isinstance(order, dict) else None
    if isinstance(item, dict) and isinstance(item.get("properties"), dict):
        fields = dict(_fields(item))
        if what.aggs:
            fields["column"] = {"enum": list(what.aggs)}
        if what.desc is not None:
            fields["desc"] = {"enum": [what.desc]}
        ranked = what.desc is not None or what.limit is not None
        properties["order_by"] = {
            "type": "array",
            "items": {**item, "properties": fields},
            "maxItems": 1,
            **({"minItems": 1} if ranked else {}),
        }
    properties["limit"] = {"enum": [what.limit if what.limit is not None else NO_GROUP_LIMIT]}


def dates_near(schema: SchemaInfo, table: str) -> list[JsonValue]:
    """The date columns of ``table``, else of the tables it refers to, else of theirs (``order_items``:
    ``orders.order_date``)."""
    tables = {t.name: t for t in schema.tables}
    level = [table]
    seen = {table}
    for _ in range(3):
        found: list[JsonValue] = [
            f"{name}.{column.name}"
            for name in level
            if name in tables
            for column in tables[name].columns
            if maybe_date_column(column)
        ]
        if found:
            return found
        parents = [
            key.references_table for name in level if name in tables for key in tables[name].foreign_keys
        ]
        level = [name for name in dict.fromkeys(parents) if name not in seen]
        seen.update(level)
    return []


def _fields(shape: dict[str, JsonValue]) -> dict[str, JsonValue]:
    fields = shape.get("properties")
    return fields if isinstance(fields, dict) else {}


def _measure(what: Asked, measures: JsonValue) -> JsonValue:
    """The one measure the question asks for, its aggregate and its columns narrowed."""
    item = measures.get("items") if isinstance(measures, dict) else None
    options = item.get("anyOf") if isinstance(item, dict) else None
    shapes = [o for o in (options if isinstance(options, list) else [item]) if isinstance(o, dict)]
    counting = next((o for o in shapes if "times" not in _fields(o)), None)
    summing = next((o for o in shapes if "times" in _fields(o)), None)
    if set(what.aggs) <= {"count", "count_distinct"} and isinstance(counting, dict):
        fields = dict(_fields(counting))
        fields["agg"] = {"enum": list(what.aggs)}
        if what.counted:
            fields["column"] = {"enum": list(what.counted)}
        return {**counting, "properties": fields}
    if isinstance(summing, dict):
        fields = dict(_fields(summing))
        fields["agg"] = {"enum": list(what.aggs)}
        fields.pop("times", None)
        if what.measured:
            fields["column"] = {"enum": list(what.measured)}
        if not (what.times and what.aggs == ("sum",)):
            return {**summing, "properties": fields}
        # Revenue: a line's price always times the line's quantity; a total alone.
        choices: list[JsonValue] = []
        for column in what.measured:
            table = column.rpartition(".")[0]
            times: list[JsonValue] = [q for q in what.times if q.rpartition(".")[0] == table]
            option: dict[str, JsonValue] = {**fields, "column": {"enum": [column]}}
            if times:
                option["times"] = {"enum": times}
            required: list[JsonValue] = ["agg", "column", "times"] if times else ["agg", "column"]
            choices.append({**summing, "properties": option, "required": required})
        return {"anyOf": choices}
    return item


def op_lines_schema(schema: SchemaInfo, hints: Hints | None = None) -> dict[str, JsonValue]:
    """The lines a constrained model writes for a question on the source ``schema`` describes."""
    query: JsonValue = {
        "type": "object",
        "properties": {
            "op": {"enum": ["add_step"]},
            "step": {
                "type": "object",
                "properties": {
                    "id": {"enum": [QUERY_STEP]},
                    "title": _text(40),
                    "tool": {
                        "type": "object",
                        "properties": {
                            "name": {"enum": ["db_aggregate"]},
                            "args": query_arguments(schema, hints or Hints()),
                        },
                        "required": ["name", "args"],
                        "additionalProperties": False,
                    },
                },
                "required": ["id", "title", "tool"],
                "additionalProperties": False,
            },
        },
        "required": ["op", "step"],
        "additionalProperties": False,
    }
    return {LINES: [query]}


def closing_ops() -> list[dict[str, JsonValue]]:
    """The ops the copilot adds after a constrained model's query line: the answer step, then ``done``."""
    return [{**ANSWER_OP, "by": "copilot"}, {**DONE_OP, "by": "copilot"}]


__all__ = [
    "ANSWER_OP",
    "ANSWER_PROMPT",
    "ANSWER_STEP",
    "DONE_OP",
    "QUERY_STEP",
    "Hints",
    "closing_ops",
    "linked_columns",
    "op_lines_schema",
    "period_bounds",
    "question_hints",
]
