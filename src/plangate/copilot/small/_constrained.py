"""The op stream a grammar-constrained model (the local default) may write, as a schema of lines.

A small model cannot be trusted with the whole op protocol, so it gets the structured path only, under a
grammar (``plangate.models._grammar`` turns ``{"x-lines": [...]}`` into one): one line, the ``add_step`` of
a ``db_aggregate`` query whose arguments are the source's real tables and columns as enums (it cannot name
a column that does not exist). The copilot then adds the two ops that always follow on this path (marked
``"by": "copilot"``): the answer step, which writes the answer from the query's rows (its prompt is what a
small model writes worst, and sampling fixed text token by token under a grammar costs as much as writing
it), and ``done``.

The grammar also holds what the question states plainly, so the model cannot contradict it: the period it
names (else no period), the numbers it names as the possible limits (else 100), as filters only the values
of the data's category columns that it mentions (``cancelled`` for ``orders.status``), and the semantic
layer's metric it names ("revenue", or a synonym) when what it asks to compute agrees with the metric's
definition (a sum for a sum; its condition's values not asked for the other way). Every stream the model
can write is a formula that passes the check (``tests/copilot/test_grammar_streams.py`` samples them).

For: the schema and the question's hints. Not for: the prompt (``_prompt``), or telling whether a model
samples under grammars (``plangate.copilot._strategy.samples_under_grammar``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import JsonValue

from plangate.copilot._mentions import Mention
from plangate.copilot._mentions import mentions as mentions_in
from plangate.copilot._periods import asked_period
from plangate.copilot.small._asked import NUMBER_WORDS, Asked, asked
from plangate.models._grammar import LINES, NOT_BLANK
from plangate.tools.data import SchemaInfo, SemanticLayer, TableInfo
from plangate.tools.data.aggregate_schema import parameters_schema, source_properties
from plangate.tools.data.periods import Period, maybe_date_column
from plangate.tools.data.profile import CategoryColumn
from plangate.tools.data.semantic import Metric

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
        metrics: the semantic layer's metrics it names (by name or synonym) that agree with what it asks
            to compute: the measure it is offered, alone, when there is one.
    """

    period: tuple[str, str] | None = None
    limits: list[int] = field(default_factory=list)
    mentions: list[tuple[str, str]] = field(default_factory=list)
    linked: list[str] = field(default_factory=list)
    negated: frozenset[str] = frozenset()
    asked: Asked | None = None
    metrics: tuple[str, ...] = ()


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


def linked_columns(question: str, schema: SchemaInfo, semantic: SemanticLayer | None = None) -> list[str]:
    """The columns a question names, directly (``channel``), through their table (``regions``: the columns
    that name its rows), or through a semantic layer's dimension or one of its synonyms ("area" for
    ``regions.name``): schema linking, by words (plurals folded), so a small model groups by what the
    question is about."""
    asked = {form for word in _WORD.findall(question.lower()) for form in _forms(word)}
    found: list[str] = []
    for table in schema.tables:
        keys = {key.column for key in table.foreign_keys}
        for column in table.columns:
            if not column.primary_key and column.name not in keys and _words(column.name) & asked:
                found.append(f"{table.name}.{column.name}")
        if _words(table.name) & asked:
            found += [name for name in _display_columns(table) if name not in found]
    if semantic is not None:
        lowered = question.lower()
        for dimension in semantic.dimensions.values():
            phrases = [dimension.name.replace("_", " "), *dimension.synonyms]
            if dimension.column.name not in found and any(_says(lowered, p) for p in phrases):
                found.append(dimension.column.name)
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
    question: str,
    categories: list[CategoryColumn],
    schema: SchemaInfo | None = None,
    semantic: SemanticLayer | None = None,
) -> Hints:
    """The period, the limits, the category values, the columns and the metrics ``question`` names."""
    period = asked_period(question)
    lowered = question.lower()
    limits = [int(match.group(1)) for match in _INTEGER.finditer(question) if 0 < int(match.group(1)) <= 1000]
    limits += [number for word, number in NUMBER_WORDS.items() if re.search(rf"\b{word}\b", lowered)]
    named = mentions_in(question, categories)
    # A value counted in with the others ("cancelled ones too") is no filter; its words are still data.
    mentions = [(m.column, m.value) for m in named if m.filters]
    negated = {m.value for m in named if m.negated}
    linked = linked_columns(question, schema, semantic) if schema is not None else []
    what = asked(question, schema, ignore=tuple(m.value for m in named)) if schema is not None else None
    metrics = named_metrics(question, semantic, what, named)
    return Hints(
        period_bounds(period) if period else None,
        sorted(set(limits)),
        mentions[:8],
        linked,
        frozenset(negated),
        what,
        tuple(metric.name for metric in metrics),
    )


def _says(text: str, phrase: str) -> bool:
    """Whether ``text`` (lower case) holds ``phrase`` as whole words, a plural folded."""
    words = r"\s+".join(re.escape(word) for word in phrase.lower().split())
    return re.search(rf"(?<!\w){words}(?:s|es)?(?!\w)", text) is not None


def _agrees(metric: Metric, what: Asked | None) -> bool:
    """Whether what a question asks to compute is what ``metric`` computes: a sum for a sum, a count for a
    count (an average or a maximum is another figure)."""
    if what is None or not what.aggs:
        return False
    counts = {"count", "count_distinct"}
    if metric.agg in counts:
        return set(what.aggs) <= counts
    return metric.agg in what.aggs


def named_metrics(
    question: str, semantic: SemanticLayer | None, what: Asked | None, named: list[Mention]
) -> list[Metric]:
    """The metrics ``question`` names (by name or synonym) whose definition it agrees with: the aggregate
    it asks for, and no value of the metric's condition that the question asks for the other way ("cancelled
    ones too" for a metric that leaves cancelled orders out)."""
    if semantic is None:
        return []
    lowered = question.lower()
    mentioned = {m.value.lower(): m.negated for m in named}
    found: list[Metric] = []
    for metric in semantic.metrics.values():
        phrases = [metric.name.replace("_", " "), *metric.synonyms]
        if not any(_says(lowered, phrase) for phrase in phrases) or not _agrees(metric, what):
            continue
        conflicts = [
            value
            for value, left_out in metric.condition_values()
            if value.lower() in mentioned and mentioned[value.lower()] != left_out
        ]
        if not conflicts:
            found.append(metric)
    return found


def _text(limit: int) -> dict[str, JsonValue]:
    return {"type": "string", "minLength": 1, "maxLength": limit, "pattern": NOT_BLANK}


def query_arguments(
    schema: SchemaInfo, hints: Hints, semantic: SemanticLayer | None = None
) -> dict[str, JsonValue]:
    """``db_aggregate``'s grammar form on ``schema``, with the question's hints as its only choices."""
    properties = source_properties(schema, grammar=True, semantic=semantic)
    _keep_metrics(properties, hints.metrics)
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
        _apply_asked(
            properties,
            hints.asked,
            schema,
            semantic.metric(hints.metrics[0]) if semantic and hints.metrics else None,
        )
    return parameters_schema(properties, grammar=True)


def _options(properties: dict[str, JsonValue]) -> list[dict[str, JsonValue]]:
    measures = properties.get("measures")
    item = measures.get("items") if isinstance(measures, dict) else None
    options = item.get("anyOf", [item]) if isinstance(item, dict) else []
    return [option for option in options if isinstance(option, dict)] if isinstance(options, list) else []


def _set_options(properties: dict[str, JsonValue], options: list[dict[str, JsonValue]]) -> None:
    measures = properties["measures"]
    if not isinstance(measures, dict):
        return
    item: JsonValue = options[0] if len(options) == 1 else {"anyOf": list(options)}
    properties["measures"] = {**measures, "items": item}


def _keep_metrics(properties: dict[str, JsonValue], named: tuple[str, ...]) -> None:
    """Offer only the metrics the question names, and when it names one, that metric alone."""
    options = _options(properties)
    metrics = [o for o in options if "metric" in _fields(o)]
    if not metrics:
        return
    if named:
        _set_options(properties, [{**metrics[0], "properties": {"metric": {"enum": [named[0]]}}}])
    else:
        _set_options(properties, [o for o in options if "metric" not in _fields(o)])


def _apply_asked(
    properties: dict[str, JsonValue], what: Asked, schema: SchemaInfo, metric: Metric | None = None
) -> None:
    """Narrow the measure, the groups, the order and the limit to what the question asks to compute."""
    if what.aggs and metric is None:
        _set_options(properties, _measure(what, _options(properties)))
    measured = next(iter(what.counted or what.measured), None)
    base = metric.tables[0] if metric is not None else measured.rpartition(".")[0] if measured else None
    dates = dates_near(schema, base) if base else []
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


def _measure(what: Asked, options: list[dict[str, JsonValue]]) -> list[dict[str, JsonValue]]:
    """The measures the question asks for, their aggregate and their columns narrowed (each table's
    ``sum`` / ``avg`` option keeps its own columns: a product is summed at one grain)."""
    counting = next((o for o in options if "agg" in _fields(o) and "times" not in _fields(o)), None)
    summing = [o for o in options if "times" in _fields(o)]
    if set(what.aggs) <= {"count", "count_distinct"} and counting is not None:
        fields = dict(_fields(counting))
        fields["agg"] = {"enum": list(what.aggs)}
        if what.counted:
            fields["column"] = {"enum": list(what.counted)}
        return [{**counting, "properties": fields}]
    chosen: list[dict[str, JsonValue]] = []
    for option in summing:
        fields = dict(_fields(option))
        own = _enum_of(fields.get("column"))
        columns = [c for c in own if not what.measured or c in what.measured]
        if not columns:
            continue
        fields["agg"] = {"enum": list(what.aggs)}
        fields.pop("times", None)
        if not (what.times and what.aggs == ("sum",)):
            named: list[JsonValue] = list(columns)
            chosen.append({**option, "properties": {**fields, "column": {"enum": named}}})
            continue
        # Revenue: a line's price always times the line's own quantity; a total alone.
        for column in columns:
            table = column.rpartition(".")[0]
            times: list[JsonValue] = [q for q in what.times if q.rpartition(".")[0] == table and q in own]
            shape: dict[str, JsonValue] = {**fields, "column": {"enum": [column]}}
            if times:
                shape["times"] = {"enum": times}
            required: list[JsonValue] = ["agg", "column", "times"] if times else ["agg", "column"]
            chosen.append({**option, "properties": shape, "required": required})
    return chosen or options


def _enum_of(node: JsonValue) -> list[str]:
    values = node.get("enum") if isinstance(node, dict) else None
    return [str(value) for value in values] if isinstance(values, list) else []


def op_lines_schema(
    schema: SchemaInfo, hints: Hints | None = None, semantic: SemanticLayer | None = None
) -> dict[str, JsonValue]:
    """The lines a constrained model writes for a question on the source ``schema`` describes (and its
    semantic layer's metrics, when the question names one)."""
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
                            "args": query_arguments(schema, hints or Hints(), semantic),
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
    "named_metrics",
    "op_lines_schema",
    "period_bounds",
    "question_hints",
]
