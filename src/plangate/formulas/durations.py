"""Durations in formulas (``"30m"``, ``"2h"``, ``"1h30m"``) turned into whole seconds.

For: the ``timeout`` and ``timer`` fields of steps and gates. Not for: dates, clocks or scheduling; a duration
here is only a length of time.
"""

from __future__ import annotations

import re

from plangate.errors import FormulaError

_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_ORDER = "dhms"
_PART = re.compile(r"([0-9]+)([A-Za-z]*)")
#: Ten years: a longer wait is a typo, and it keeps every result a small integer.
MAX_SECONDS = 10 * 366 * 86_400
_HINT = "expected a duration like '30m', '2h', '10s' or '1h30m'"


def parse_duration(value: object, *, path: str = "") -> int:
    """Turn a duration into whole seconds.

    Args:
        value: a string of ``<number><unit>`` parts, largest unit first, each unit at most once (units:
            ``d``, ``h``, ``m``, ``s``), or a positive integer number of seconds.
        path: where the value sits in the formula, for the error message.

    Returns:
        The number of seconds, always more than 0.

    Raises:
        FormulaError: the value is not a duration; the message says what was found and where.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FormulaError(f"{_HINT}, got {_describe(value)}", path=path)
    if isinstance(value, int):
        return _checked(value, value, path)
    return _checked(_parse_text(value, path), value, path)


def _parse_text(text: str, path: str) -> int:
    stripped = text.strip()
    if not stripped:
        raise FormulaError(f"{_HINT}, got an empty string", path=path)
    total = 0
    last_unit = -1
    pos = 0
    while pos < len(stripped):
        match = _PART.match(stripped, pos)
        if match is None:
            raise FormulaError(
                f"{_HINT}, got {text!r}: unexpected {stripped[pos]!r} at column {pos + 1}", path=path
            )
        digits, unit = match.groups()
        if not unit:
            raise FormulaError(
                f"{_HINT}, got {text!r}: the number {digits} has no unit (d, h, m or s)", path=path
            )
        if unit not in _UNITS:
            raise FormulaError(f"{_HINT}, got {text!r}: unknown unit {unit!r} (use d, h, m or s)", path=path)
        rank = _ORDER.index(unit)
        if rank <= last_unit:
            raise FormulaError(
                f"{_HINT}, got {text!r}: units must go from largest to smallest, each at most once", path=path
            )
        last_unit = rank
        if len(digits) > 12:
            raise FormulaError(f"duration {text!r} is longer than the limit of 10 years", path=path)
        total += int(digits) * _UNITS[unit]
        pos = match.end()
    return total


def _checked(seconds: int, original: object, path: str) -> int:
    if seconds <= 0:
        raise FormulaError(f"a duration must be longer than 0 seconds, got {original!r}", path=path)
    if seconds > MAX_SECONDS:
        raise FormulaError(f"duration {original!r} is longer than the limit of 10 years", path=path)
    return seconds


def _describe(value: object) -> str:
    names = {bool: "a boolean", float: "a number with a fraction", list: "a list", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


__all__ = ["MAX_SECONDS", "parse_duration"]
