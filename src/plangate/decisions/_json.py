"""Finding and loading the JSON object in a model's text.

What it is for: string- and escape-aware brace matching (usable incrementally, for streams), stripping code
fences, and ``json.loads`` with every failure turned into a ``DecisionParseError``. What it is not for:
giving the object's fields a meaning (``decode``).
"""

from __future__ import annotations

import json
from typing import Literal

from plangate.decisions.errors import DecisionParseError

Stop = Literal["closed", "lt", "more"]


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


def json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, with its article (``an object``, ``a string``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def loads(text: str, what: str, *, offset: int = 0) -> object:
    """``json.loads`` whose every failure is a ``DecisionParseError`` on ``what``.

    Args:
        text: the JSON text.
        what: the field name used in errors (``decision``, ``route``, ``plan``).
        offset: where ``text`` starts in the model's output, added to error positions.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecisionParseError(
            what,
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            position=offset + exc.pos,
        ) from None
    except RecursionError:
        raise DecisionParseError(what, "the JSON is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        raise DecisionParseError(what, f"invalid JSON: {exc}") from None


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
        value = json.loads(body)
    except (ValueError, RecursionError):
        span = first_object(body)
        if span is None:
            if "{" in body:
                reason = "the JSON object is not closed (the output ended early)"
                raise DecisionParseError(what, reason) from None
            raise DecisionParseError(what, "expected a JSON object, found no '{'") from None
        start, end = span
        value = loads(body[start:end], what, offset=start)
    if not isinstance(value, dict):
        raise DecisionParseError(what, f"expected a JSON object, got {json_kind(value)}")
    return value
