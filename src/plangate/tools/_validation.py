"""Turn argument problems into messages that name the path, the expectation and what was found.

Two sources: pydantic ``ValidationError`` for ``@tool`` functions, and a small JSON Schema checker for tools
that only carry a schema (tools from MCP servers, hand-built tools). The checker covers the keywords tool
schemas use in practice (type, enum, const, required, properties, additionalProperties, items, anyOf/oneOf,
local ``$ref``); it is not a general JSON Schema implementation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from plangate.tools.errors import ArgumentIssue

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer without a fractional part",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "frozen_set_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "typed_dict_type": "an object",
    "none_required": "null",
    "date_type": "a date (YYYY-MM-DD)",
    "date_parsing": "a date (YYYY-MM-DD)",
    "date_from_datetime_parsing": "a date (YYYY-MM-DD)",
    "datetime_type": "a date-time (ISO 8601)",
    "datetime_parsing": "a date-time (ISO 8601)",
    "datetime_from_date_parsing": "a date-time (ISO 8601)",
    "time_type": "a time (HH:MM[:SS])",
    "time_parsing": "a time (HH:MM[:SS])",
    "uuid_type": "a UUID",
    "uuid_parsing": "a UUID",
    "decimal_type": "a decimal number",
    "decimal_parsing": "a decimal number",
}

_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def format_path(loc: Sequence[int | str]) -> str:
    """``("moves", 1, "slot")`` → ``arguments.moves[1].slot``."""
    path = "arguments"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def describe_value(value: object, limit: int = 60) -> str:
    """Show a found value the way a model wrote it: strings quoted, ``null``/``true`` in JSON spelling."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None or isinstance(value, bool | int | float):
        text = json.dumps(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except ValueError:
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def issues_from_pydantic(exc: ValidationError, parameters: Sequence[str]) -> list[ArgumentIssue]:
    """Translate a pydantic ``ValidationError`` raised for an arguments model.

    Args:
        exc: the error from validating the arguments object.
        parameters: the tool's parameter names, listed when an unexpected top-level argument is found.
    """
    issues: list[ArgumentIssue] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        kind = error["type"]
        found = error.get("input")
        if kind == "missing":
            message = "required, got nothing"
        elif kind == "extra_forbidden" and len(loc) == 1:
            allowed = f" (expected one of: {', '.join(parameters)})" if parameters else ""
            message = "unexpected argument" + allowed
        elif kind == "extra_forbidden":
            message = "unexpected field"
        elif kind in ("literal_error", "enum"):
            message = f"expected {error.get('ctx', {}).get('expected', 'one of the allowed values')}, " \
                      f"got {describe_value(found)}"
        elif kind in _EXPECTED:
            message = f"expected {_EXPECTED[kind]}, got {describe_value(found)}"
        else:
            text = error["msg"]
            lowered = text[0].lower() + text[1:] if text else text
            if lowered.startswith("input should be "):
                lowered = "expected " + lowered.removeprefix("input should be ")
            message = f"{lowered}, got {describe_value(found)}"
        issues.append(ArgumentIssue(format_path(loc), message))
    return issues


def check_json_schema(
    schema: Mapping[str, Any], value: object, *, root: Mapping[str, Any] | None = None
) -> list[ArgumentIssue]:
    """Check ``value`` against the supported subset of JSON Schema; an empty list means it is valid.

    Args:
        schema: the schema to check against.
        value: the value to check.
        root: the document local ``$ref`` pointers resolve against; ``schema`` itself when omitted.
    """
    issues: list[ArgumentIssue] = []
    _check(schema, value, (), schema if root is None else root, issues)
    return issues


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    target: Any = root
    for part in ref.removeprefix("#/").split("/"):
        target = target.get(part) if isinstance(target, Mapping) else None
    return _resolve(target, root) if isinstance(target, Mapping) else {}


def _type_matches(kind: str, value: object) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    expected: dict[str, type] = {"string": str, "array": list, "object": dict, "null": type(None)}
    return kind not in expected or isinstance(value, expected[kind])


def _check(
    schema: Mapping[str, Any],
    value: object,
    loc: tuple[int | str, ...],
    root: Mapping[str, Any],
    issues: list[ArgumentIssue],
) -> None:
    schema = _resolve(schema, root)
    path = format_path(loc)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list) and alternatives:
        options = [alt for alt in alternatives if isinstance(alt, Mapping)]
        if all(check_json_schema(alt, value, root=root) for alt in options):
            found = describe_value(value)
            issues.append(ArgumentIssue(path, f"matches none of the allowed forms, got {found}"))
        return
    kinds = schema.get("type")
    kind_list = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if kind_list and not any(_type_matches(kind, value) for kind in kind_list):
        wanted = " or ".join(_JSON_TYPES.get(kind, kind) for kind in kind_list)
        issues.append(ArgumentIssue(path, f"expected {wanted}, got {describe_value(value)}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(describe_value(option) for option in schema["enum"])
        issues.append(ArgumentIssue(path, f"expected one of {allowed}, got {describe_value(value)}"))
    if "const" in schema and value != schema["const"]:
        expected = describe_value(schema["const"])
        issues.append(ArgumentIssue(path, f"expected {expected}, got {describe_value(value)}"))
    if isinstance(value, dict):
        _check_object(schema, value, loc, root, issues)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _check(schema["items"], item, (*loc, index), root, issues)


def _check_object(
    schema: Mapping[str, Any],
    value: dict[Any, Any],
    loc: tuple[int | str, ...],
    root: Mapping[str, Any],
    issues: list[ArgumentIssue],
) -> None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            issues.append(ArgumentIssue(format_path((*loc, name)), "required, got nothing"))
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(properties[name], item, (*loc, name), root, issues)
        elif extra is False:
            allowed = f" (expected one of: {', '.join(properties)})" if properties else ""
            label = "unexpected field" if loc else "unexpected argument"
            issues.append(ArgumentIssue(format_path((*loc, name)), label + allowed))
        elif isinstance(extra, Mapping):
            _check(extra, item, (*loc, name), root, issues)


def apply_defaults(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``arguments`` with the top-level defaults of ``schema`` filled in for missing keys."""
    filled = dict(arguments)
    for name, sub in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(sub, Mapping) and "default" in sub:
            filled[name] = sub["default"]
    return filled


__all__ = [
    "apply_defaults",
    "check_json_schema",
    "describe_value",
    "format_path",
    "issues_from_pydantic",
]
