"""The period a question names, read from its words: ``in 2025``, ``March 2024``, ``Q1 2025``, ``2025-03``,
``between 2023 and 2024``, ``the third quarter of 2026``, ``2025年3月``.

For: the review's no-rows-in-range rule, which compares this period with the dates the data holds. Only
explicit periods are read; relative ones (``last year``) are not, since the data's "now" is unknown. Not for:
query bounds (``plangate.tools.data.periods``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

from plangate.tools.data.periods import Period

_MONTHS = {
    name: index
    for index, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_WORDS = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20)\d{2}"
# Each pattern yields a (start, end) for the text it matches; the first that matches a span wins it.
_ISO_DAY = re.compile(rf"\b({_YEAR})-(\d{{2}})-(\d{{2}})\b")
_ISO_MONTH = re.compile(rf"\b({_YEAR})-(\d{{2}})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_WORDS})\.?\s+(?:of\s+)?({_YEAR})\b", re.IGNORECASE)
_QUARTER = re.compile(rf"\b(?:q([1-4])\s*({_YEAR})|({_YEAR})\s*q([1-4]))\b", re.IGNORECASE)
_HALF = re.compile(rf"\b(?:h([12])\s*({_YEAR})|({_YEAR})\s*h([12]))\b", re.IGNORECASE)
_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_PART_WORDS = re.compile(
    rf"\b({'|'.join(_ORDINALS)})\s+(quarter|half)\s+(?:of\s+)?({_YEAR})\b", re.IGNORECASE
)
_CJK_MONTH = re.compile(rf"({_YEAR})\s*年\s*(\d{{1,2}})\s*月")
_CJK_YEAR = re.compile(rf"({_YEAR})\s*年")
# A bare year counts only after a word that makes it a time (so "top 2000 customers" is not a year).
_BARE_YEAR = re.compile(
    rf"\b(?:in|during|for|of|since|from|to|until|through|between|and|year|fy|before|after)\s+({_YEAR})\b",
    re.IGNORECASE,
)
_LEADING_YEAR = re.compile(rf"^\s*({_YEAR})\b")


Span = tuple[date, date]


def _month(year: int, month: int) -> Span | None:
    if not 1 <= month <= 12:
        return None
    end = date(year + (month == 12), month % 12 + 1, 1)
    return date(year, month, 1), end


def _day(match: re.Match[str]) -> Span | None:
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None
    return day, day + timedelta(days=1)


def _part(match: re.Match[str], months: int) -> Span:
    part = int(match.group(1) or match.group(4))
    year = int(match.group(2) or match.group(3))
    last_month = part * months
    return date(year, (part - 1) * months + 1, 1), date(year + (last_month == 12), last_month % 12 + 1, 1)


def _part_words(match: re.Match[str]) -> Span | None:
    """``the third quarter of 2026``, ``the first half of 2025``."""
    part = _ORDINALS[match.group(1).lower()]
    months = 3 if match.group(2).lower() == "quarter" else 6
    year = int(match.group(3))
    if part * months > 12:
        return None
    last_month = part * months
    return date(year, (part - 1) * months + 1, 1), date(year + (last_month == 12), last_month % 12 + 1, 1)


def _year(match: re.Match[str]) -> Span:
    year = int(match.group(1))
    return date(year, 1, 1), date(year + 1, 1, 1)


# Most precise first: the text a pattern reads is not read again by a later, coarser one.
_READERS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Span | None]], ...] = (
    (_ISO_DAY, _day),
    (_ISO_MONTH, lambda m: _month(int(m.group(1)), int(m.group(2)))),
    (_CJK_MONTH, lambda m: _month(int(m.group(1)), int(m.group(2)))),
    (_MONTH_YEAR, lambda m: _month(int(m.group(2)), _MONTHS[m.group(1).lower()])),
    (_QUARTER, lambda m: _part(m, 3)),
    (_PART_WORDS, _part_words),
    (_HALF, lambda m: _part(m, 6)),
    (_CJK_YEAR, _year),
    (_BARE_YEAR, _year),
    (_LEADING_YEAR, _year),
)
_YEAR_ONLY = frozenset({_CJK_YEAR, _BARE_YEAR, _LEADING_YEAR})


def _spans(question: str) -> list[Span]:
    found: list[Span] = []
    taken: list[tuple[int, int]] = []
    for pattern, read in _READERS:
        for match in pattern.finditer(question):
            # a year is read by its digits alone, so "in 2025" after "Q1 2025" is not read twice
            start, end = match.span(1) if pattern in _YEAR_ONLY else match.span()
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            span = read(match)
            if span is not None:
                taken.append((start, end))
                found.append(span)
    return found


def asked_period(question: str) -> Period | None:
    """The period the question names (all of them together when it names several), or None.

    Example: ``asked_period("revenue by region in March 2024 and April 2024")`` is 2024-03-01 up to
    2024-05-01.
    """
    spans = _spans(question)
    if not spans:
        return None
    start = min(span[0] for span in spans)
    end = max(span[1] for span in spans)
    last = end - timedelta(days=1)
    label = start.isoformat() if last == start else f"{start.isoformat()} to {last.isoformat()}"
    return Period(start, end, label)


__all__ = ["asked_period"]
