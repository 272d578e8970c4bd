"""What a question asks to compute, read from its words: the aggregate, what is counted or summed, whether
the answer is one value or one per group, which way a ranking goes, and how many rows a ranking keeps.

For: the grammar of a small constrained model (``_constrained``), which offers it only the choices these
words leave, so that "how many customers" counts customers, "top 3" keeps 3 rows and a question about one
total groups by nothing. Each rule reads plain words and is unit-tested; where a question says nothing a
rule would read, every choice stays open. Not for: periods (``plangate.copilot._periods``), category
values and the columns a question names (``_constrained.question_hints``), or any model that writes ops
freely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from plangate.tools.data import SchemaInfo, TableInfo
from plangate.tools.data.aggregate import is_numeric

_COUNT = re.compile(r"\b(how many|number of|count(?:s|ed)?|how often)\b")
_UNITS = re.compile(
    r"\b(how many|number of|total|count of)\s+(?:\w+\s+){0,2}?(units?|items?|pieces?|quantity)\b"
)
_AVERAGE = re.compile(r"\b(average|avg|mean|on average)\b")
_MONEY = re.compile(
    r"\b(how much|revenue|sales|spent|spend|spending|earn(?:ed|s|ings)?|income|turnover|invoiced?|billed|"
    r"paid|money|brought in)\b"
)
_HOW_MUCH = re.compile(r"\bhow much\b")
_MOST_OF = re.compile(r"\b(?:most|fewest|least|more|fewer)\s+([\w/-]+)(?:\s+([a-z]+))?")
_BY_UNITS = re.compile(r"\b(by (?:units|quantity)|units sold|best[- ]selling)\b")
_PER = re.compile(r"\b([a-z]+)\s+(?:per|by|for each|in each|for every)\s")
_TOTAL = re.compile(r"\b(total|sum|altogether|add up|in all)\b")
_HIGH = re.compile(r"\b(top|highest|most|best|largest|biggest|greatest|leading|busiest|max(?:imum)?)\b")
_LOW = re.compile(r"\b(lowest|least|fewest|smallest|worst|bottom|min(?:imum)?)\b")
_GROUPED = re.compile(
    r"\b(per|each|which|who|whom|rank(?:ed|ing)?|top|break(?:s|ing)?\s+\w+(?:\s+\w+)?\s+down|"
    r"breakdown|month by month|year by year|by (?!how\b)\w+)\b"
)
NUMBER_WORDS: dict[str, int] = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
}
"""Number words a question may use for a count ('top three'), and their values."""
_NUMBER = r"(\d{1,3}|" + "|".join(NUMBER_WORDS) + r")"
_RANKED = re.compile(
    rf"\b(?:top|first|best|worst|bottom|last)\s+{_NUMBER}\b|\b{_NUMBER}\s+(?:[\w-]+\s+){{0,2}}?[a-z-]+s\b"
)
_WHICH_ONE = re.compile(r"\b(?:which|what)\s+([a-z-]+)\b")
_THE_MOST = re.compile(
    r"\bthe\s+(?:most|least|highest|lowest|biggest|largest|smallest|best|worst|top)\s+(?:[\w-]+\s+){0,2}?([a-z]+)\b"
)
_QUANTITY_WORDS = frozenset({"quantity", "qty"})
_UNIT_WORDS = frozenset({"unit", "units", "item", "items", "piece", "pieces", "quantity"})
_MONEY_WORDS = frozenset({"price", "total", "amount", "revenue", "sales", "paid", "value", "spend"})
_WORD = re.compile(r"[a-z0-9]+")
_ANY = frozenset({"*"})  # marks "every number column" for _numbers_named
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> set[str]:
    return set(_WORD.findall(_CAMEL.sub(" ", name).lower()))


def _forms(word: str) -> set[str]:
    """A word and the stems it may be a plural or a past of (``countries``: ``country``; ``returned``:
    ``return``)."""
    forms = {word}
    if len(word) > 3 and word.endswith("s"):
        forms.add(word[:-1])
        if word.endswith("ies"):
            forms.add(word[:-3] + "y")
        elif word.endswith("es"):
            forms.add(word[:-2])
    if len(word) > 4 and word.endswith("ed"):
        forms |= {word[:-2], word[:-1]}
    return forms


def _all_forms(words: set[str]) -> set[str]:
    return {form for word in words for form in _forms(word)}


@dataclass(frozen=True)
class Asked:
    """What a question asks to compute (an empty field leaves every choice open).

    Attributes:
        aggs: the aggregates it allows (``("count_distinct",)`` for "how many customers").
        counted: the key columns "how many X" counts (X's primary key), when X is a table.
        measured: the number columns a sum or an average may read (``quantity`` for units, prices and
            totals for revenue, the columns it names for an average).
        times: the columns a price may be multiplied by (quantities, for revenue); empty: no multiplier.
        grouped: False when it asks for one value (no group, no order), True when for one per group.
        desc: True for "highest first", False for "lowest first", None when it does not say.
        limit: the N of "top N" / "N regions", or None.
    """

    aggs: tuple[str, ...] = ()
    counted: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()
    times: tuple[str, ...] = ()
    grouped: bool | None = None
    desc: bool | None = None
    limit: int | None = None


def _tables_named(text: str, schema: SchemaInfo) -> list[TableInfo]:
    """The tables ``text`` names, whole names first (``orders`` before ``order_items``), in schema order."""
    asked = _all_forms(set(_WORD.findall(text)))
    whole = [
        t for t in schema.tables if _all_forms({_CAMEL.sub("", t.name).lower().replace("_", "")}) & asked
    ]
    partial = [t for t in schema.tables if t not in whole and _all_forms(_words(t.name)) & asked]
    return whole or partial


def _keys(tables: list[TableInfo]) -> tuple[str, ...]:
    found = []
    for table in tables:
        keys = [c.name for c in table.columns if c.primary_key]
        if len(keys) == 1:
            found.append(f"{table.name}.{keys[0]}")
    return tuple(found)


def _counted(question: str, schema: SchemaInfo) -> tuple[str, ...]:
    """The primary key of the first table named in the four words after "how many" / "number of"."""
    for match in re.finditer(r"\b(?:how many|number of|count of)\s+((?:[\w/-]+\s*){1,4})", question):
        for word in match.group(1).split():
            named = _keys(_tables_named(word, schema))
            if named:
                return named[:1]
    return ()


def _numbers_named(
    schema: SchemaInfo, words: frozenset[str] | set[str], exclude: frozenset[str]
) -> list[str]:
    found: list[str] = []
    for table in schema.tables:
        keys = {key.column for key in table.foreign_keys}
        for column in table.columns:
            if column.primary_key or column.name in keys or not is_numeric(column) or not column.type:
                continue
            named = _all_forms(_words(column.name))
            if (words is _ANY or named & words) and not named & exclude:
                found.append(f"{table.name}.{column.name}")
    return found


def _limit(question: str) -> int | None:
    for match in _RANKED.finditer(question):
        text = match.group(1) or match.group(2)
        number = NUMBER_WORDS.get(text) if text in NUMBER_WORDS else int(text)
        if number is not None and 0 < number <= 100:
            return number
    return None


def _money(schema: SchemaInfo) -> tuple[list[str], list[str]]:
    """The columns revenue is summed from, and the quantities a price is multiplied by: the prices of tables
    that hold a quantity (order lines) and the totals, never a list price beside them (``products``)."""
    prices = _numbers_named(schema, _MONEY_WORDS, frozenset({"cost"}))
    quantities = _numbers_named(schema, _QUANTITY_WORDS, frozenset())
    lines = {name.rpartition(".")[0] for name in quantities}
    totals = {"total", "amount"}
    kept = [p for p in prices if p.rpartition(".")[0] in lines or _words(p.rpartition(".")[2]) & totals]
    priced = {name.rpartition(".")[0] for name in kept}
    return kept or prices, [q for q in quantities if q.rpartition(".")[0] in priced]


def _in_named(columns: list[str], text: str, schema: SchemaInfo) -> list[str]:
    """``columns`` of the tables ``text`` names, when there are any; else all of them."""
    named = {t.name for t in _tables_named(text, schema)}
    mine = [c for c in columns if c.rpartition(".")[0] in named]
    return mine or columns


def _numbers_of(tables: list[TableInfo], schema: SchemaInfo) -> list[str]:
    names = {t.name for t in tables}
    return [c for c in _numbers_named(schema, _ANY, frozenset()) if c.rpartition(".")[0] in names]


def asked(question: str, schema: SchemaInfo, *, ignore: tuple[str, ...] = ()) -> Asked:
    """What ``question`` asks to compute on the source ``schema`` describes.

    Args:
        question: the question.
        schema: the source's schema.
        ignore: words of the question that are data, not instructions (category values it mentions:
            "Sales Support Agent" asks for no sales).
    """
    text = question.lower()
    for value in ignore:
        text = text.replace(value.lower(), " ")
    units = _UNITS.search(text) is not None or _BY_UNITS.search(text) is not None
    money = _MONEY.search(text) is not None and "best-selling" not in text
    aggs: tuple[str, ...] = ()
    counted: tuple[str, ...] = ()
    measured: list[str] = []
    times: list[str] = []
    most = _most_of(text, schema)
    per = _PER.search(text)
    if _AVERAGE.search(text):
        aggs = ("avg",)
        words = _all_forms(set(_WORD.findall(text))) - {"average", "mean", "avg"}
        measured = _numbers_named(schema, words, frozenset()) or _numbers_of(
            _tables_named(text, schema), schema
        )
    elif units:
        aggs, measured = (
            ("sum",),
            _in_named(_numbers_named(schema, _QUANTITY_WORDS, frozenset()), text, schema),
        )
    elif _HOW_MUCH.search(text) or (money and not _COUNT.search(text)):
        aggs = ("sum",)
        measured, times = _money(schema)
    elif _COUNT.search(text):
        counted = _counted(text, schema)
        aggs = ("count_distinct",) if counted else ("count", "count_distinct")
    elif _TOTAL.search(text):
        aggs, measured = ("sum",), _numbers_of(_tables_named(text, schema), schema)
    elif most == "units":
        aggs = ("sum",)
        measured = _in_named(_numbers_named(schema, _QUANTITY_WORDS, frozenset()), text, schema)
    elif most:
        aggs, counted = ("count_distinct",), (most,)
    elif per is not None and (keys := _keys(_tables_named(per.group(1), schema))):
        aggs, counted = ("count_distinct",), keys[:1]
    limit = _limit(text)
    grouped = limit is not None or _GROUPED.search(text) is not None
    desc = True if _HIGH.search(text) else False if _LOW.search(text) else None
    if limit is None and desc is not None and _one_thing(text, schema):
        grouped, limit = True, 1  # "which region … the most", "the most expensive product": the one on top
    return Asked(aggs, counted, tuple(measured), tuple(times), grouped, desc, limit)


def _most_of(text: str, schema: SchemaInfo) -> str | None:
    """What "the most X" ranks by: ``units`` (a quantity), the key of the table X names when X is plural
    ("the most orders", "the most return requests"), or None ("the most expensive product" ranks one thing
    by something else)."""
    for match in _MOST_OF.finditer(text):
        words = [word for word in match.groups() if word]
        if words[0] in _UNIT_WORDS:
            return "units"
        if not any(word.endswith("s") for word in words):
            continue
        for word in words:
            keys = _keys(_tables_named(word, schema))
            if keys:
                return keys[0]
    return None


def _one_thing(text: str, schema: SchemaInfo) -> bool:
    """Whether a ranking question asks for one thing: "which customer", "the most expensive product"."""
    for pattern in (_WHICH_ONE, _THE_MOST):
        for match in pattern.finditer(text):
            word = match.group(1)
            if word.endswith("s") or word in ("of", "the", "a", "is", "are", "was", "were"):
                continue
            if pattern is _WHICH_ONE or _tables_named(word, schema):
                return True
    return False


__all__ = ["NUMBER_WORDS", "Asked", "asked"]
