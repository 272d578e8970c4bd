"""Periods and date columns: ``2025`` / ``2025-03`` / ``2025-03-14`` as half-open date ranges, and where a
table's dates start and end.

For: the bounds of ``db_aggregate``'s ``period`` (a year, a month or a day, each meaning the whole of it)
and the first and last date a column holds, which the copilot compares with the period a question names.
Not for: reading periods out of a question's words (``plangate.copilot``) or compiling SQL (``aggregate.py``).

Dates are ISO text (``YYYY-MM-DD``, optionally followed by a time) or the database's own date types; a column
is a date column when its declared type says so or when its smallest and largest values read as ISO dates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from plangate.errors import ConfigError
from plangate.tools.data.results import ColumnInfo, QueryLimits, TableInfo
from plangate.tools.data.sources import DataSource

BOUND_PATTERN = r"^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$"
"""What a period bound looks like: a year, a year and month, or a day."""

_BOUND = re.compile(BOUND_PATTERN)
_ISO_START = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATE_TYPES = ("date", "time")
_DATE_NAMES = ("date", "_at", "_on", "time", "day")


@dataclass(frozen=True, slots=True)
class Period:
    """A half-open range of days ``[start, end)``; either side may be open (``None``).

    Attributes:
        start: the first day in the period.
        end: the first day after it.
        label: how it was written (``2025``, ``2025-01 .. 2025-03``), for messages.
    """

    start: date | None
    end: date | None
    label: str

    def overlaps(self, first: date, last: date) -> bool:
        """Whether any day of ``[first, last]`` (both included) is in the period."""
        after_start = self.start is None or last >= self.start
        before_end = self.end is None or first < self.end
        return after_start and before_end


@dataclass(frozen=True, slots=True)
class DateRange:
    """The first and last date a column holds.

    Attributes:
        table: the table.
        column: the column.
        first: its smallest date.
        last: its largest date.
    """

    table: str
    column: str
    first: date
    last: date

    def describe(self) -> str:
        """``orders.order_date has rows from 2025-01-02 to 2026-06-30``."""
        return f"{self.table}.{self.column} has rows from {self.first.isoformat()} to {self.last.isoformat()}"


def bound_range(text: str, where: str = "period") -> tuple[date, date]:
    """The days a bound means: ``2025`` → 2025-01-01 up to 2026-01-01, ``2025-02`` → all of February.

    Raises:
        ConfigError: not a year, a month or a day, or not a real date.
    """
    value = text.strip() if isinstance(text, str) else text
    if not isinstance(value, str) or not _BOUND.fullmatch(value):
        raise ConfigError(
            f"{where}: expected a year, month or day such as 2025, 2025-03 or 2025-03-14; got {text!r}"
        )
    parts = [int(part) for part in value.split("-")]
    try:
        if len(parts) == 1:
            return date(parts[0], 1, 1), date(parts[0] + 1, 1, 1)
        if len(parts) == 2:
            start = date(parts[0], parts[1], 1)
            following = date(parts[0] + (parts[1] == 12), parts[1] % 12 + 1, 1)
            return start, following
        day = date(parts[0], parts[1], parts[2])
    except ValueError as exc:
        raise ConfigError(f"{where}: {text!r} is not a date ({exc})") from None
    return day, day + timedelta(days=1)


def period_between(start: str | None, end: str | None) -> Period:
    """The period from the start of ``start`` to the end of ``end`` (each optional, both included).

    Raises:
        ConfigError: a bound is malformed, or the period ends before it starts.
    """
    first = bound_range(start, "period.from")[0] if start else None
    last = bound_range(end, "period.to")[1] if end else None
    if first is not None and last is not None and last <= first:
        raise ConfigError(f"period: 'to' ({end}) is before 'from' ({start})")
    if start and end:
        label = start if start == end else f"{start} .. {end}"
    else:
        label = f"from {start}" if start else f"up to {end}" if end else "any time"
    return Period(first, last, label)


def iso_date(value: object) -> date | None:
    """The day an ISO date or timestamp text starts with (``2021-01-01 00:00:00`` → 2021-01-01), else None."""
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        return None
    found = _ISO_START.match(value.strip())
    if found is None:
        return None
    try:
        return date(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    except ValueError:
        return None


def maybe_date_column(column: ColumnInfo) -> bool:
    """Whether a column may hold dates, from its type or its name (its values decide: ``date_ranges``)."""
    kind = column.type.lower()
    if any(word in kind for word in _DATE_TYPES):
        return True
    name = column.name.lower()
    textual = kind == "" or any(word in kind for word in ("text", "char", "clob", "string"))
    return textual and any(word in name for word in _DATE_NAMES)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def date_ranges(source: DataSource, tables: list[TableInfo], limits: QueryLimits) -> list[DateRange]:
    """The first and last date of every date column of ``tables`` (columns without dates are left out).

    Raises:
        QueryTimeout: a scan ran past ``limits.timeout_s``.
        DataSourceError: the database could not answer.
    """
    found: list[DateRange] = []
    for table in tables:
        columns = [column for column in table.columns if maybe_date_column(column)]
        if not columns or table.row_count == 0:
            continue
        table_name = table.name.split(".")
        quoted = ".".join(_quote(part) for part in table_name)
        picks = ", ".join(f"min({_quote(c.name)}), max({_quote(c.name)})" for c in columns)
        result = source.query(f"SELECT {picks} FROM {quoted}", limits)
        if not result.rows:
            continue
        row = result.rows[0]
        for index, column in enumerate(columns):
            first, last = iso_date(row[2 * index]), iso_date(row[2 * index + 1])
            if first is not None and last is not None:
                found.append(DateRange(table.name, column.name, first, last))
    return found


__all__ = [
    "BOUND_PATTERN",
    "DateRange",
    "Period",
    "bound_range",
    "date_ranges",
    "iso_date",
    "maybe_date_column",
    "period_between",
]
