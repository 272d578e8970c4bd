"""The name of a decoded JSON value's type, as messages say it.

For: ``json_type``, the one helper every message that says what kind of JSON value it found uses (a
decision's field, a JSON schema, a steps file). Not for: the condition language, whose kinds are its own
vocabulary and sit on the path of every comparison (``conditions/_runtime.kind_of``), TOML's names in
formula files (``table``), or a found value shown as written (``tools.json_schema.describe_value``).
"""

from __future__ import annotations

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


__all__ = ["json_type"]
