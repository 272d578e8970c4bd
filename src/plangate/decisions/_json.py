"""Finding and loading the JSON object in a model's text.

What it is for: string- and escape-aware brace matching (usable incrementally, for streams), stripping code
fences, and strict JSON loading with every failure turned into a ``DecisionParseError``. What it is not for:
giving the object's fields a meaning (``decode``).

Strict, because what a model writes is hostile input: values nested deeper than ``MAX_DEPTH``, numbers out of
a 64-bit float's range, ``NaN`` / ``Infinity`` (not JSON, though Python reads them) and an object naming a key
twice (which value did the model mean?) are refused. Everything after this module may then walk a value
recursively without meeting a ``RecursionError``.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Literal

from plangate._json import json_type
from plangate.decisions.errors import DecisionParseError
from plangate.errors import Signal

Stop = Literal["closed", "lt", "more"]

MAX_DEPTH = 64
"""How deep arrays and objects may nest in a model's output (the top value is at depth 1)."""

# Longer digit strings are refused before Python converts them (conversion is quadratic in the length).
_MAX_INT_DIGITS = 330


class _Refused(Signal):
    """Valid JSON syntax that the protocol still refuses (a repeated key, a non-finite or huge number)."""


class ObjectScanner:
    """Brace matching over a JSON object's text, resumable across chunks of a stream.

    Braces inside strings (and escaped quotes inside strings) do not count. The scan also stops at a ``<``
    outside any string, which valid JSON never contains there, so a caller can look for a closing tag.
    """

    __slots__ = ("depth", "escape", "in_string")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False

    def advance(self, text: str, pos: int) -> tuple[int, Stop]:
        """Scan ``text`` from ``pos`` (at or after the object's opening brace).

        Returns:
            ``(index, "closed")`` with the index just past the closing brace, ``(index, "lt")`` with the
            index of an unquoted ``<`` (call again from ``index + 1`` to go on), or ``(len(text), "more")``.
        """
        for index in range(pos, len(text)):
            char = text[index]
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif char == "\\":
                    self.escape = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char == "{":
                self.depth += 1
            elif char == "}":
                self.depth -= 1
                if self.depth == 0:
                    return index + 1, "closed"
            elif char == "<":
                return index, "lt"
        return len(text), "more"


def first_object(text: str) -> tuple[int, int] | None:
    """The span ``(start, end)`` of the balanced object opened by the first ``{``, or ``None``."""
    start = text.find("{")
    if start < 0:
        return None
    scanner = ObjectScanner()
    pos = start
    while True:
        pos, stop = scanner.advance(text, pos)
        if stop == "closed":
            return start, pos
        if stop == "more":
            return None
        pos += 1


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence around ``text`` (```` ```json ```` ... ```` ``` ````), if there is one."""
    body = text.strip()
    if not body.startswith("```"):
        return body
    newline = body.find("\n")
    # A fence's first line is the fence and its language tag only; a one-line fence has no newline.
    body = body[newline + 1 :] if newline >= 0 else body.lstrip("`")
    body = body.rstrip()
    if body.endswith("```"):
        body = body[:-3]
    return body.strip()


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value: dict[str, object] = {}
    for key, item in pairs:
        if key in value:
            raise _Refused(f"the key {key!r} appears twice in one object; expected each key once")
        value[key] = item
    return value


def _constant(name: str) -> object:
    raise _Refused(f"{name} is not a JSON number; expected a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {_clip(text)} is too large; expected a finite number")
    return value


def _int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    value = int(text) if digits <= _MAX_INT_DIGITS else None
    if value is None or abs(value) > sys.float_info.max:
        raise _Refused(f"the number {_clip(text)} ({digits} digits) is too large; expected a finite number")
    return value


def _clip(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:20]}..."


def check_value(value: object, what: str) -> None:
    """Refuse a decoded value that nests deeper than ``MAX_DEPTH`` or holds a non-finite or huge number.

    Iterative, so any depth is safe to check; values decoded by ``loads`` already pass, and this guards the
    decoders when they are handed values decoded elsewhere.

    Raises:
        DecisionParseError: on ``what``, saying what was found.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise DecisionParseError(what, f"the JSON nests deeper than {MAX_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            raise DecisionParseError(what, f"{item} is not a JSON number; expected a finite number")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > sys.float_info.max:
            raise DecisionParseError(what, "a number is too large; expected a finite number")


_STRICT = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
)


def _strict_loads(text: str) -> object:
    """``json.loads`` that raises ``_Refused`` for what the protocol refuses (see the module docstring): one
    decoder for every decision (``json.loads`` makes one per call with hooks)."""
    if text.startswith("\ufeff"):
        return json.loads(text)  # refused with json's own message for a byte order mark
    return _STRICT.decode(text)


def loads(text: str, what: str, *, offset: int = 0) -> object:
    """Strict ``json.loads`` whose every failure is a ``DecisionParseError`` on ``what``.

    Args:
        text: the JSON text.
        what: the field name used in errors (``decision``, ``route``, ``plan``).
        offset: where ``text`` starts in the model's output, added to error positions.
    """
    try:
        value = _strict_loads(text)
    except json.JSONDecodeError as exc:
        raise DecisionParseError(
            what,
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            position=offset + exc.pos,
        ) from None
    except _Refused as exc:
        raise DecisionParseError(what, str(exc)) from None
    except RecursionError:
        raise DecisionParseError(what, f"the JSON nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # anything else json refuses to convert
        raise DecisionParseError(what, f"invalid JSON: {exc}") from None
    _check_decoded(value, text, what)
    return value


def _check_decoded(value: object, text: str, what: str) -> None:
    """``check_value`` of what ``_strict_loads`` decoded from ``text``: its numbers were refused as they
    were read, and a text with no more than ``MAX_DEPTH`` brackets cannot nest deeper (only a longer one is
    walked)."""
    if text.count("{") + text.count("[") > MAX_DEPTH:
        check_value(value, what)


def load_object(text: str, what: str) -> dict[str, object]:
    """Load the JSON object a model wrote, tolerating fences and text around the object.

    The whole text is tried first; if it is not JSON, the first balanced object inside it is.

    Raises:
        DecisionParseError: no object, an unclosed object, invalid JSON, or JSON that is not an object.
    """
    body = strip_fences(text)
    if not body:
        raise DecisionParseError(what, "expected a JSON object, got an empty output")
    try:
        value = _strict_loads(body)
    except _Refused as exc:
        raise DecisionParseError(what, str(exc)) from None
    except (ValueError, RecursionError):
        span = first_object(body)
        if span is None:
            if "{" in body:
                reason = "the JSON object is not closed (the output ended early)"
                raise DecisionParseError(what, reason) from None
            raise DecisionParseError(what, "expected a JSON object, found no '{'") from None
        start, end = span
        value = loads(body[start:end], what, offset=start)  # checked there
    else:
        _check_decoded(value, body, what)
    if not isinstance(value, dict):
        raise DecisionParseError(what, f"expected a JSON object, got {json_type(value, article=True)}")
    return value
