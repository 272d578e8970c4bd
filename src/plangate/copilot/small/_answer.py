"""What replaces a small model's unusable sentence: the rows its sound query found, or that the data holds
nothing for the period asked.

For: the answers of a grammar-constrained model, after the review's rules (``plangate.copilot._review``)
judged them. A 135M model copies figures badly ("2328.6014" for 2328.60), drops names from a list and says
"0 orders" for a period the data does not cover; when only its sentence is at fault, the data answers
instead, and a ``degraded`` signal says so. The number guard still holds: rows that would not pass it are
never the answer. Not for: the rules themselves, which judge every model's answers alike.
"""

from __future__ import annotations

import re

from pydantic import JsonValue

from plangate.copilot._numbers import Known, shown_numbers
from plangate.copilot._review import answer_signals
from plangate.copilot._run import RunOutcome, shown_cell, table_text
from plangate.copilot.results import Review, Signal

ANSWER_TEXT_KINDS = frozenset(
    {"invented_number", "answer_denies_rows", "answer_omits_rows", "leaked_markup", "empty_output"}
)
"""The signals about the answer's text alone (the query and its rows are fine)."""


_ROWS_SHOWN = 20
"""Rows an answer made of the rows shows (the rest are counted)."""


def is_no_data(rows: list[list[JsonValue]]) -> bool:
    """Whether rows are no data: none, or one row of nothing but NULL and 0 (an aggregate of no rows)."""
    return not rows or (len(rows) == 1 and all(cell is None or cell == 0 for cell in rows[0]))


def no_data_instead(review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
    """For a small model, when the question names a period the data does not cover and the query found
    nothing there: an answer that says so from what the review read (the dates the data covers), in place
    of its sentence (which tends to be a figure, "0 orders", or no answer at all), with a ``degraded``
    ``no_data_in_range`` note. None when the review found no such period or the rows are not empty.

    The review's verdict stays: a retry may read the period on another date column that does cover it.
    """
    ranged = next((signal for signal in review.signals if signal.kind == "no_rows_in_range"), None)
    if ranged is None or not outcome.completed or not is_no_data(outcome.result.rows):
        return None
    broken = [signal for signal in review.signals if signal.severity == "broken"]
    if any(signal.kind not in ANSWER_TEXT_KINDS for signal in broken):
        return None
    answer = f"The data holds nothing for the period asked: {ranged.detail}."
    known.add_text(ranged.detail)  # the dates the data covers, as the review read them
    kept = [signal for signal in review.signals if signal.kind not in ANSWER_TEXT_KINDS]
    note = Signal(
        kind="no_data_in_range",
        severity="degraded",
        detail="the answer says the data holds nothing for the period asked, in place of the written one",
    )
    return answer, Review.of([*kept, note], review.note)


_LISTED = 10
"""Rows of names a written answer is expected to name every one of."""


def omitted_labels(answer: str, rows: list[list[JsonValue]]) -> list[str]:
    """The names (the first text column's values) of a short result that ``answer`` leaves out while it
    names others: "France, Germany, Brazil and Canada" for a top 5 led by USA. Empty when the answer names
    none of them (it may speak of the rows another way), or every one."""
    if not 2 <= len(rows) <= _LISTED:
        return []
    column = next((i for i, cell in enumerate(rows[0]) if isinstance(cell, str) and cell.strip()), None)
    if column is None:
        return []
    labels = [str(row[column]) for row in rows if column < len(row) and isinstance(row[column], str)]
    lowered = answer.lower()
    named = [
        label
        for label in labels
        if re.search(rf"(?<!\w){re.escape(label.lower())}(?!\w)", lowered) is not None
    ]
    return [label for label in labels if label not in named] if named else []


def missed_value(answer: str, rows: list[list[JsonValue]]) -> str | None:
    """The value of a one-value result (one row, one number) that ``answer`` does not state as any
    rounding of it, or None: "The answer to this question is 1." for 300 customers, a figure the number
    guard lets through because the result has 1 row."""
    if len(rows) != 1 or len(rows[0]) != 1:
        return None
    [value] = rows[0]
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    known = Known()
    known.add_value(value)
    numbers, _ = shown_numbers(answer)
    return None if any(known.explains(number) for number in numbers) else shown_cell(value)


def states_a_cell(answer: str, rows: list[list[JsonValue]]) -> bool:
    """Whether ``answer`` states at least one cell of ``rows``: a text cell by name, or a number as any
    rounding of it ("The most customer support agents have the most customers assigned." states none)."""
    lowered = answer.lower()
    known = Known()
    for row in rows:
        for cell in row:
            if isinstance(cell, str) and cell.strip():
                if re.search(rf"(?<!\w){re.escape(cell.lower())}(?!\w)", lowered):
                    return True
            elif isinstance(cell, int | float) and not isinstance(cell, bool):
                known.add_value(cell)
    numbers, _ = shown_numbers(answer)
    return any(known.explains(number) for number in numbers)


def _sentence_misses_rows(answer: str, rows: list[list[JsonValue]]) -> list[Signal]:
    """A small model's sentence that passes the number guard but not its rows: nothing the rows hold, the
    one value left unsaid, or some names of a short list left out."""
    if is_no_data(rows):
        return []  # the no-data answer's business (``no_data_instead``)
    value = missed_value(answer, rows)
    if value is not None:
        return [Signal(kind="answer_omits_rows", severity="broken", detail=f"it does not state the {value}")]
    if not states_a_cell(answer, rows):
        return [Signal(kind="answer_omits_rows", severity="broken", detail="it states nothing the rows hold")]
    left_out = omitted_labels(answer, rows)
    if left_out:
        return [
            Signal(kind="answer_omits_rows", severity="broken", detail=f"it leaves out {', '.join(left_out)}")
        ]
    return []


def rows_instead(review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
    """For a small model whose written answer is broken while its query is sound: the rows themselves as
    the answer, with a ``degraded`` signal saying so (None when the query is at fault too, or the rows
    would not pass the number guard either).

    A 135M model copies figures badly ("2328.6014" for 2328.60) and drops names from a list
    (``answer_omits_rows``): its rows are the answer it can stand by.
    """
    broken = [signal for signal in review.signals if signal.severity == "broken"]
    result = outcome.result
    if not broken:
        broken = _sentence_misses_rows(outcome.answer, result.rows)
    if not broken or any(signal.kind not in ANSWER_TEXT_KINDS for signal in broken):
        return None
    if not result.columns or not result.rows or not outcome.completed:
        return None
    answer = table_text(result.columns, result.rows, limit=_ROWS_SHOWN)
    if answer_signals(answer, known):
        return None
    replaced = "; ".join(signal.detail for signal in broken)
    kept = [signal for signal in review.signals if signal.kind not in ANSWER_TEXT_KINDS]
    note = Signal(
        kind="answer_from_rows",
        severity="degraded",
        detail=f"the written answer was not usable ({replaced}): the answer shows the rows instead",
    )
    return answer, Review.of([*kept, note], review.note)


def answer_instead(review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
    """What a small model's answer is replaced with, if anything: that the data holds nothing for the
    period asked (``no_data_instead``), else the rows (``rows_instead``)."""
    return no_data_instead(review, outcome, known) or rows_instead(review, outcome, known)


__all__ = [
    "ANSWER_TEXT_KINDS",
    "answer_instead",
    "is_no_data",
    "missed_value",
    "no_data_instead",
    "omitted_labels",
    "rows_instead",
    "states_a_cell",
]
