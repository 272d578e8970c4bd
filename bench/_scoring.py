"""Scoring for the ask-your-data benchmark: do a turn's result rows equal the gold rows, and did a turn
answer a question about a period without data with a figure.

The rule for rows is execution accuracy as Spider and BIRD use it, made explicit (:func:`rows_match`). The
rules for no-data questions are :func:`is_no_data` (what counts as "no data" in a result) and
:func:`figures_in` (the numbers an answer states). Nothing here runs a query or a turn.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence

from plangate.tools.data.results import Cell

MAX_COLUMN_MAPPINGS = 1_000
"""Ways of pairing gold columns with result columns tried at most; past that, the rows do not match.
Only results with many interchangeable columns come near it."""

_NUMERIC_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NUMBER = object()
"""Marks a number's place in a row's signature (numbers are compared with a tolerance, not by value)."""

Norm = float | str | bytes | None
"""A cell after normalisation: every number (and numeric text) a float."""


def normalize(cell: Cell) -> Norm:
    """A cell as compared: booleans, integers, floats and numeric text become floats; the rest is kept."""
    if isinstance(cell, bool | int | float):
        return float(cell)
    if isinstance(cell, str) and _NUMERIC_TEXT.fullmatch(cell):
        return float(cell)
    return cell


def tolerance(precision: int) -> float:
    """How far two numbers may be apart and still match: half a unit of the ``precision``-th decimal."""
    return 0.5 * 10.0**-precision


def cells_match(gold: Norm, got: Norm, tol: float) -> bool:
    """Whether two normalised cells are the same answer (numbers within ``tol``, anything else equal)."""
    if isinstance(gold, float) and isinstance(got, float):
        if gold == got:
            return True  # also equal infinities
        # The slack absorbs binary rounding: 3.975 stored as 3.97499… still matches 3.98 at precision 2.
        return math.isfinite(gold - got) and abs(gold - got) <= tol * (1 + 1e-9) + 1e-12
    return type(gold) is type(got) and gold == got


def rows_match(
    gold_rows: Sequence[Sequence[Cell]],
    got_rows: Sequence[Sequence[Cell]],
    *,
    ordered: bool,
    precision: int = 2,
) -> bool:
    """Whether a result equals the gold result (execution accuracy).

    The rule:

    - The same number of rows. With ``ordered``, row ``i`` of one matches row ``i`` of the other; without,
      the rows are compared as multisets (duplicates count, order does not).
    - Cells: numbers (integers, floats, booleans as 0/1, and text that is a plain decimal number, such as
      ``'2025'`` from ``strftime``) match when they differ by at most half a unit of the ``precision``-th
      decimal (default 2: 0.005), so a result rounded to that many decimals matches the unrounded gold;
      gold SQL therefore never rounds. NULL matches only NULL (not 0, not ``''``). Other text and bytes
      match only when equal (case and spaces included).
    - Columns: their order does not matter, and the result may have extra columns: it matches when each
      gold column can be paired with a distinct result column so that the rows match on those columns.
      Names are not compared (an alias is not part of the answer).

    Args:
        gold_rows: the gold result's rows.
        got_rows: the rows to score.
        ordered: whether the order of the rows is part of the answer.
        precision: decimals to which numbers must agree.
    """
    gold = [tuple(normalize(cell) for cell in row) for row in gold_rows]
    got = [tuple(normalize(cell) for cell in row) for row in got_rows]
    if len(gold) != len(got):
        return False
    if not gold:
        return True
    gold_width, got_width = _width(gold), _width(got)
    if gold_width is None or got_width is None or got_width < gold_width:
        return False
    tol = tolerance(precision)
    candidates = [
        [j for j in range(got_width) if _column_matches(gold, i, got, j, ordered=ordered, tol=tol)]
        for i in range(gold_width)
    ]
    for mapping in _mappings(candidates, MAX_COLUMN_MAPPINGS):
        projected = [tuple(row[j] for j in mapping) for row in got]
        if _rows_equal(gold, projected, ordered=ordered, tol=tol):
            return True
    return False


def is_no_data(rows: Sequence[Sequence[Cell]]) -> bool:
    """Whether a result says "no data": no rows, or one row whose every cell is NULL or 0.

    One row of NULL or 0 is what an aggregate over no rows returns (``count(*)`` is 0, ``sum`` is NULL).
    A row with any other value (a label, a real figure) is data.
    """
    if not rows:
        return True
    return len(rows) == 1 and all(normalize(cell) in (None, 0.0) for cell in rows[0])


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_PARTS = re.compile(
    r"\b\d{4}-\d{1,2}(?:-\d{1,2})?(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\b"  # 2026-06-30, 2026-06, with a time
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?![a-z])"  # 30 June, 1st of March
    rf"|(?<![a-z]){_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?![,.]?\d)",  # June 30, March 1st
    re.IGNORECASE,
)
_FIGURE = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_YEARS = range(1900, 2101)


def figures_in(answer: str, question: str) -> list[str]:
    """The figures an answer states: its numbers, less those that only name a period or repeat the question.

    Not figures: numbers that also occur in the question ("top 3", "2024"), dates and their parts
    (``2026-06-30``, ``2026-06``, ``30 June``, ``June 30``), whole years 1900-2100 written alone, and digits
    inside words (``Q3``, ``H1``, ``3rd``). Everything else is a figure, ``0`` included: "0 orders in 2024"
    states a figure, "no orders in 2024" does not. A count that happens to lie between 1900 and 2100 reads
    as a year; the benchmark accepts that blind spot rather than flag every year as a number.
    """
    mentioned = {_value(match.group()) for match in _FIGURE.finditer(_DATE_PARTS.sub(" ", question))}
    figures = []
    for match in _FIGURE.finditer(_DATE_PARTS.sub(" ", answer)):
        text = match.group()
        value = _value(text)
        if value in mentioned:
            continue
        if "," not in text and "." not in text and value.is_integer() and int(value) in _YEARS:
            continue
        figures.append(text)
    return figures


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _width(rows: Sequence[tuple[Norm, ...]]) -> int | None:
    widths = {len(row) for row in rows}
    return widths.pop() if len(widths) == 1 else None


def _column_matches(
    gold: Sequence[tuple[Norm, ...]],
    i: int,
    got: Sequence[tuple[Norm, ...]],
    j: int,
    *,
    ordered: bool,
    tol: float,
) -> bool:
    # A necessary condition for pairing gold column i with result column j, cheap enough to prune with:
    # for one column, sorting both sides pairs the values whenever any pairing within tol exists.
    left = [row[i] for row in gold]
    right = [row[j] for row in got]
    if not ordered:
        left.sort(key=_sort_key)
        right.sort(key=_sort_key)
    return all(cells_match(a, b, tol) for a, b in zip(left, right, strict=True))


def _sort_key(cell: Norm) -> tuple[int, float, str, bytes]:
    if cell is None:
        return (0, 0.0, "", b"")
    if isinstance(cell, float):
        return (1, cell, "", b"")
    if isinstance(cell, str):
        return (2, 0.0, cell, b"")
    return (3, 0.0, "", cell)


def _mappings(candidates: Sequence[Sequence[int]], limit: int) -> Iterator[tuple[int, ...]]:
    """Injective pairings of gold columns (by position) with result columns, at most ``limit`` of them."""
    tried = 0
    chosen: list[int] = []

    def extend(position: int) -> Iterator[tuple[int, ...]]:
        nonlocal tried
        if position == len(candidates):
            tried += 1
            yield tuple(chosen)
            return
        for column in candidates[position]:
            if column in chosen or tried >= limit:
                continue
            chosen.append(column)
            yield from extend(position + 1)
            chosen.pop()

    yield from extend(0)


def _rows_equal(
    gold: Sequence[tuple[Norm, ...]], got: Sequence[tuple[Norm, ...]], *, ordered: bool, tol: float
) -> bool:
    if ordered:
        return all(_row_matches(a, b, tol) for a, b in zip(gold, got, strict=True))
    # Rows can only match rows with the same non-numeric cells; within such a group, sorting usually pairs
    # them, and a perfect matching settles the rare case where a tolerance makes the sorted pairing fail.
    gold_groups, got_groups = _groups(gold), _groups(got)
    if gold_groups.keys() != got_groups.keys():
        return False
    for signature, left in gold_groups.items():
        right = got_groups[signature]
        if len(left) != len(right):
            return False
        left.sort(key=lambda row: [_sort_key(cell) for cell in row])
        right.sort(key=lambda row: [_sort_key(cell) for cell in row])
        if all(_row_matches(a, b, tol) for a, b in zip(left, right, strict=True)):
            continue
        if not _perfect_matching([[k for k, b in enumerate(right) if _row_matches(a, b, tol)] for a in left]):
            return False
    return True


def _row_matches(gold: tuple[Norm, ...], got: tuple[Norm, ...], tol: float) -> bool:
    return all(cells_match(a, b, tol) for a, b in zip(gold, got, strict=True))


def _groups(rows: Sequence[tuple[Norm, ...]]) -> dict[tuple[object, ...], list[tuple[Norm, ...]]]:
    groups: defaultdict[tuple[object, ...], list[tuple[Norm, ...]]] = defaultdict(list)
    for row in rows:
        groups[tuple(_NUMBER if isinstance(cell, float) else cell for cell in row)].append(row)
    return groups


def _perfect_matching(adjacency: Sequence[Sequence[int]]) -> bool:
    """Whether every left node can be paired with a distinct right node (augmenting paths, no recursion)."""
    owner: dict[int, int] = {}
    for start in range(len(adjacency)):
        if not _augment(start, adjacency, owner):
            return False
    return True


def _augment(start: int, adjacency: Sequence[Sequence[int]], owner: dict[int, int]) -> bool:
    seen: set[int] = set()
    stack: list[tuple[int, Iterator[int]]] = [(start, iter(adjacency[start]))]
    via: list[int] = []  # via[k]: the right node that leads from stack[k] to stack[k + 1]
    while stack:
        left, options = stack[-1]
        for right in options:
            if right in seen:
                continue
            seen.add(right)
            if right not in owner:
                owner[right] = left
                for level, step in enumerate(via):
                    owner[step] = stack[level][0]
                return True
            stack.append((owner[right], iter(adjacency[owner[right]])))
            via.append(right)
            break
        else:
            stack.pop()
            if via:
                via.pop()
    return False


__all__ = [
    "MAX_COLUMN_MAPPINGS",
    "cells_match",
    "figures_in",
    "is_no_data",
    "normalize",
    "rows_match",
    "tolerance",
]
