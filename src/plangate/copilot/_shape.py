"""Whether the queries an answer rests on have the shape the question asks for: the review's say on how sure
a turn may be.

For: two review signals. ``fan_out`` (broken): a ``db_query`` step sums, averages or counts a parent
table's column under a join to its children, so its figure is multiplied by the join (the check found it
before the run too; a repair may not have fixed it). ``query_shape`` (degraded): the checker cannot vouch for
a query's shape: its grain (SQL it could not read, or an answer that rests on no query at all), the time
grain the question names ("for each year", "month by month": the query groups by no date bucket), the
kind of figure it names (a percentage or a share: the query divides nothing), the period the question names
(no date bound of the query falls in it), or a value the question names (a category value such as ``Rock``
or ``cancelled`` that no filter of the query mentions). A turn is ``done`` only when
the review found nothing, this included; otherwise it is ``partial`` and says why. Not for: the other rules
(``_review``), or the query's own errors (``_check``).
"""

from __future__ import annotations

import json
import re
from datetime import date

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from plangate.copilot._check import sql_fan_outs
from plangate.copilot._mentions import mentions
from plangate.copilot._periods import asked_period
from plangate.copilot._run import Read, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot.results import Signal
from plangate.errors import ConfigError
from plangate.tools.data.periods import Period, period_between
from plangate.tools.sql_guard import Dialect

_DATE_TEXT = re.compile(r"^\s*(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_TIME_GRAIN = re.compile(
    r"\b(?:(?:per|each|every|by)\s+(?:calendar\s+)?(year|quarter|month|week|day)|(year|quarter|month|week|day)\s+by"
    r"\s+(?:year|quarter|month|week|day)|(yearly|quarterly|monthly|weekly|daily))\b",
    re.IGNORECASE,
)
_RATIO = re.compile(r"\b(percent(?:age)?|per cent|share|proportion|ratio|fraction)\b|%", re.IGNORECASE)
_BUCKETS = (exp.TimeToStr, exp.DateTrunc, exp.TimestampTrunc, exp.Extract, exp.Substring, exp.Year, exp.Month)


def fan_out_signals(reads: list[Read], scope: Scope) -> list[Signal]:
    """``fan_out`` for every ``db_query`` read whose SQL measures a parent's column across its children."""
    signals: list[Signal] = []
    for read in reads:
        sql = read.args.get("sql")
        if read.tool != "db_query" or not isinstance(sql, str):
            continue
        for fan in sql_fan_outs(sql, scope.schema) or []:
            detail = f"step {read.step_id!r}: {fan.parent} -> {fan.child}: {fan.message()}"
            signals.append(Signal(kind="fan_out", detail=detail, severity="broken"))
    return signals


def shape_signals(question: str, outcome: RunOutcome, scope: Scope) -> list[Signal]:
    """``query_shape`` for what the checker cannot vouch for in the queries the answer rests on."""
    if not outcome.completed or not outcome.answer.strip():
        return []
    reads = _basis(outcome)
    if not reads:
        detail = "the answer rests on no query the checker could read, so nothing vouches for its figures"
        return [Signal(kind="query_shape", detail=detail, severity="degraded")]
    doubts: list[str] = []
    for read in reads:
        if read.tool == "db_query" and sql_fan_outs(str(read.args.get("sql", "")), scope.schema) is None:
            doubts.append(f"step {read.step_id!r}: its SQL could not be read to check its grain")
    grain = _TIME_GRAIN.search(question)
    if grain is not None and not any(_buckets_dates(read, scope) for read in reads):
        doubts.append(
            f"the question asks for a figure {grain.group(0)!r}, but the query groups by no date bucket"
        )
    ratio = _RATIO.search(question)
    if ratio is not None and not any(_divides(read, scope) for read in reads):
        doubts.append(f"the question asks for a {ratio.group(0)!r}, but the query divides nothing")
    period = asked_period(question)
    if period is not None and period.start is not None and period.end is not None:
        if not any(_bounds_period(read, period, scope) for read in reads):
            doubts.append(f"the question names {period.label}, but no date bound of the query falls in it")
    for mention in mentions(question, scope.categories):
        if mention.filters and not any(_names_value(read, mention.value) for read in reads):
            named = f"{mention.value!r} ({mention.column})"
            doubts.append(f"the question names {named}, but the query does not filter on it")
    return [
        Signal(kind="query_shape", detail=f"{doubt}: the figure is not vouched for", severity="degraded")
        for doubt in dict.fromkeys(doubts)
    ]


def _basis(outcome: RunOutcome) -> list[Read]:
    """The reads the answer rests on: those of the steps its step needs (all of them when it names none)."""
    plan = outcome.plan
    final = outcome.answer_step
    if final is None or final not in plan.index:
        return list(outcome.reads)
    wanted: set[str] = set()
    stack = [final]
    while stack:
        current = stack.pop()
        if current in wanted or current not in plan.index:
            continue
        wanted.add(current)
        stack.extend(plan.index[current].needs)
    return [read for read in outcome.reads if read.step_id in wanted] or list(outcome.reads)


def _bounds_period(read: Read, period: Period, scope: Scope) -> bool:
    """Whether the query bounds its rows by a date within ``period`` (or ending right after it)."""
    start, end = period.start, period.end
    if start is None or end is None:
        return True  # an open period bounds nothing to check
    if read.tool == "db_aggregate":
        spec = read.args.get("period")
        if not isinstance(spec, dict):
            return False
        first, last = spec.get("from"), spec.get("to")
        try:
            bounds = period_between(
                first if isinstance(first, str) else None, last if isinstance(last, str) else None
            )
        except ConfigError:
            return False
        return bounds.start == start and bounds.end == end
    tree = _tree(read, scope)
    if tree is None:
        return False
    for literal in tree.find_all(exp.Literal):
        day = _as_date(literal.name)
        if day is not None and start <= day <= end:
            return True
    return False


def _tree(read: Read, scope: Scope) -> exp.Expr | None:
    """A ``db_query`` read's SQL parsed, or None (a structured query, or SQL that does not parse)."""
    sql = read.args.get("sql")
    if read.tool != "db_query" or not isinstance(sql, str):
        return None
    dialect: Dialect = "postgres" if scope.schema.dialect == "postgres" else "sqlite"
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except (SqlglotError, ValueError):
        return None


def _buckets_dates(read: Read, scope: Scope) -> bool:
    """Whether the query groups by a date bucket (``strftime('%Y', …)``, ``date_trunc``, ``substr``):
    a structured query cannot."""
    tree = _tree(read, scope)
    if tree is None:
        return False
    for group in tree.find_all(exp.Group):
        if any(group.find_all(*_BUCKETS)):
            return True
        # GROUP BY 1 or by an alias: the bucket is in the select list.
        selects = tree.selects if isinstance(tree, exp.Select) else []
        if any(any(s.find_all(*_BUCKETS)) for s in selects):
            return True
    return False


def _divides(read: Read, scope: Scope) -> bool:
    """Whether the query divides (a share, a percentage): a structured query cannot."""
    tree = _tree(read, scope)
    return tree is not None and any(tree.find_all(exp.Div))


def _as_date(text: str) -> date | None:
    match = _DATE_TEXT.match(text)
    if match is None or (len(text.strip()) > 4 and match.group(2) is None):
        return None
    try:
        return date(int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1))
    except ValueError:
        return None


def _names_value(read: Read, value: str) -> bool:
    """Whether the query names ``value`` (in a filter, a metric's condition, or the SQL's text)."""
    wanted = value.lower()
    if read.tool == "db_aggregate":
        texts = [json.dumps(read.args.get("filters", []), ensure_ascii=False), *read.definitions.values()]
        return any(wanted in text.lower() for text in texts)
    sql = read.args.get("sql")
    return isinstance(sql, str) and f"'{wanted}'" in sql.lower().replace('"', "'")


__all__ = ["fan_out_signals", "shape_signals"]
