"""The category values a question names, read from its words: ``Rock``, ``cancelled``, ``the East region``;
whether it leaves them out ("leaving cancelled orders aside") or counts them in ("cancelled ones too").

For: the filters a small model's grammar holds (``plangate.copilot.small._constrained``) and the review's
check that a query filters on the values its question names (``_shape``), which must read a question the
same way. A value is named as a whole word; one written in capitals only (a code such as ``ON`` or ``CA``)
only when the question writes it so, since "spent on Rock" names no Canadian province. Not for: periods
(``_periods``) or the columns a question is about (``small._constrained.linked_columns``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from plangate.tools.data.profile import CategoryColumn

_NOT_BEFORE = re.compile(
    r"\b(not|no|non|excluding|exclude|without|except|but|leaving|ignoring|other than|don't|do not)\b"
    r"(?:\W+\w+){0,3}\W+$"
)
_NOT_AFTER = re.compile(
    r"^\W*(?:\w+\W+){0,3}?(aside|excluded|left out|don't count|do not count|not counted)\b"
)
_IN_BEFORE = re.compile(r"\b(include|including|includes|counting|plus)\b(?:\W+\w+){0,2}\W+$")
_IN_AFTER = re.compile(r"^\W*(?:\w+\W+){0,2}?(too|as well|included|or not)\b")


@dataclass(frozen=True, slots=True)
class Mention:
    """A category value a question names.

    Attributes:
        column: ``table.column`` of the value.
        value: the value as the data holds it.
        negated: the question leaves those rows out (a ``!=`` filter).
        included: the question counts them in with the others ("cancelled ones too"): no filter at all.
    """

    column: str
    value: str
    negated: bool = False
    included: bool = False

    @property
    def filters(self) -> bool:
        """Whether the question asks to filter on the value (``=`` or ``!=``)."""
        return not self.included


def _found(value: str, question: str) -> re.Match[str] | None:
    if len(value) < 2:
        return None
    if value.isupper():
        return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", question)
    return re.search(rf"(?<!\w){re.escape(value.lower())}(?!\w)", question.lower())


def mentions(question: str, categories: Sequence[CategoryColumn]) -> list[Mention]:
    """Every category value ``question`` names, in the order of the columns and their values."""
    lowered = question.lower()
    found: list[Mention] = []
    for column in categories:
        for value in column.values:
            match = _found(value, question)
            if match is None:
                continue
            before, after = lowered[: match.start()], lowered[match.end() :]
            negated = bool(_NOT_BEFORE.search(before) or _NOT_AFTER.search(after))
            included = not negated and bool(_IN_BEFORE.search(before) or _IN_AFTER.search(after))
            found.append(Mention(column.name, value, negated, included))
    return found


__all__ = ["Mention", "mentions"]
