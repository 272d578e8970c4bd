"""Turn argument problems into messages that name the path, the expectation and what was found.

Two sources: pydantic ``ValidationError`` for ``@tool`` functions, and the JSON Schema validator
(``json_schema.py``, on ``jsonschema``) for tools that only carry a schema (tools from MCP servers,
hand-built tools). Both speak of ``arguments.<path>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from plangate.tools import json_schema
from plangate.tools.errors import ArgumentIssue
from plangate.tools.json_schema import describe_value

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

def format_path(loc: Sequence[int | str]) -> str:
    """``("moves", 1, "slot")`` → ``arguments.moves[1].slot``."""
    path = "arguments"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


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


def check_json_schema(schema: Mapping[str, Any], value: object) -> list[ArgumentIssue]:
    """Check ``value`` (a call's arguments) against ``schema``; an empty list means it is valid."""
    found = []
    for issue in json_schema.issues(schema, value):
        message = issue.message
        if issue.keyword == "additionalProperties" and len(issue.path) == 1:
            message = message.replace("unexpected field", "unexpected argument", 1)
        found.append(ArgumentIssue(format_path(issue.path), message))
    return found


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
