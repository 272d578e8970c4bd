"""JSON as plangate writes and names it: an encoder made once, and the name of a decoded value's type.

For: ``Encoder``, the standard library's encoder with its C half made once rather than on every call (what
``json.JSONEncoder.encode`` does), for the values written on the path of every step and round; and
``json_type``, the one helper every message that says what kind of JSON value it found uses (a
decision's field, a JSON schema, a steps file). Not for: the condition language, whose kinds are its own
vocabulary and sit on the path of every comparison (``conditions/_runtime.kind_of``), TOML's names in
formula files (``table``), or a found value shown as written (``tools.json_schema.describe_value``).
"""

from __future__ import annotations

import json
from json import encoder as _encoder

_NAMES: dict[type, str] = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


def json_type(value: object, *, article: bool = False, array: str = "array") -> str:
    """JSON's name for the type of ``value``: ``null``, ``boolean``, ``number``, ``string``, ``array`` or
    ``object``; another Python type by its class name.

    Args:
        value: a decoded JSON value (or anything else).
        article: with its article (``an object``, ``a string``; ``null`` has none).
        array: the word for an array, for messages to people who call it a ``list``.
    """
    if value is None:
        return "null"
    if isinstance(value, dict):
        name = "object"
    else:
        name = _NAMES.get(type(value)) or next(
            (word for kind, word in _NAMES.items() if isinstance(value, kind)), type(value).__name__
        )
    if name == "array":
        name = array
    if not article:
        return name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


class Encoder:
    """``json.JSONEncoder(...).encode`` for values that hold no cycle (JSON data, what a validator made),
    writing the very same text: the encoder's C half, which ``JSONEncoder`` makes again on every call, is
    made once here. Without the circular-reference check, so one encoder serves every thread at once; a
    value that contains itself ends in ``RecursionError``.

    Args:
        ensure_ascii: escape every character outside ASCII (``\\u00e9``), as ``json.dumps`` does by default.
        separators: ``(item, key)`` separators; ``json.dumps``'s default is ``(", ", ": ")``.
        sort_keys: write each object's keys in sorted order.
        allow_nan: write NaN and the infinities as ``NaN`` and ``Infinity``; when False they raise
            ``ValueError``, as JSON has no number for them.
    """

    __slots__ = ("_c", "_python")

    def __init__(
        self,
        *,
        ensure_ascii: bool = False,
        separators: tuple[str, str] = (", ", ": "),
        sort_keys: bool = False,
        allow_nan: bool = True,
    ) -> None:
        self._python = json.JSONEncoder(
            ensure_ascii=ensure_ascii,
            separators=separators,
            sort_keys=sort_keys,
            allow_nan=allow_nan,
            check_circular=False,
        )
        made = getattr(_encoder, "c_make_encoder", None)  # None where the C accelerator is missing
        strings = _encoder.encode_basestring_ascii if ensure_ascii else _encoder.encode_basestring
        item, key = separators
        self._c = (
            None
            if made is None
            else made(None, self._python.default, strings, None, key, item, sort_keys, False, allow_nan)
        )

    def encode(self, value: object) -> str:
        """``value`` as JSON text.

        Raises:
            TypeError: a value JSON cannot hold (a set, an object of a class of one's own).
            ValueError: NaN or an infinity, when ``allow_nan`` is False.
        """
        if self._c is None:
            return self._python.encode(value)
        return "".join(self._c(value, 0))


__all__ = ["Encoder", "json_type"]
