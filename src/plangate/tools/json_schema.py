"""JSON Schema validation: the ``jsonschema`` library, with plangate's wording on top.

For: the one validator of every JSON Schema plangate checks against: the parameters of tools that carry a
schema only (MCP tools, hand-built ones), an ``llm`` step's answer, and the schemas themselves. The whole
specification is enforced (the draft a schema's ``$schema`` names, else 2020-12; local ``$ref``; a remote
``$ref`` is never fetched). What is ours is the wording: ``issues`` names each problem's path, what was
expected and what was found (``expected an integer, got 2.5``), in the order of the value, for a model to
correct its call; ``first_problem`` says the first of them. Not for: tools built from typed functions
(pydantic validates those) or deriving schemas (``_schema.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import jsonschema
import referencing.exceptions
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

from plangate._json import json_type

_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """One way a value breaks its schema.

    Attributes:
        path: where in the value (keys and indices from the top).
        message: what was expected and what was found, in plangate's words.
        keyword: the schema keyword that was broken (``type``, ``required``, ``additionalProperties``...).
    """

    path: tuple[str | int, ...]
    message: str
    keyword: str


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a valid JSON schema, with where (None when it is one)."""
    if not isinstance(schema, Mapping | bool):
        found = json_type(schema, article=True)
        return f"not a valid JSON schema: expected an object or a boolean, got {found}"
    try:
        _validator_class(schema).check_schema(cast(Any, schema))
    except SchemaError as exc:
        return f"not a valid JSON schema: at {exc.json_path}: {exc.message}"
    return None


def issues(schema: Mapping[str, Any] | bool, value: object) -> list[SchemaIssue]:
    """Every way ``value`` breaks ``schema``, in the order of the value (an object's missing required
    properties first, then its properties as they come); empty when it fits."""
    found: list[tuple[tuple[int, ...], SchemaIssue]] = []
    required: set[tuple[str | int, ...]] = set()
    for error in _errors(schema, value):
        if error.validator == "required":
            # One error per missing name: the first one at an object lists them all.
            at = tuple(error.absolute_path)
            if at in required:
                continue
            required.add(at)
        for issue in _worded(error):
            found.append((_position(value, issue), issue))
    found.sort(key=lambda item: item[0])
    typed = {issue.path for _, issue in found if issue.keyword == "type"}
    # A value of the wrong type says so once: what else it breaks at the same place follows from it.
    return [issue for _, issue in found if issue.keyword == "type" or issue.path not in typed]


def first_problem(schema: Mapping[str, Any] | bool, value: object) -> str | None:
    """The first way ``value`` breaks ``schema`` (as :func:`issues` orders them), as ``at <json path>:
    <message>`` (None when it fits)."""
    found = issues(schema, value)
    return None if not found else f"at {json_path(found[0].path)}: {found[0].message}"


def json_path(path: Sequence[str | int]) -> str:
    """``("rows", 0, "name")`` → ``$.rows[0].name``."""
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def _validator_class(schema: Mapping[str, Any] | bool) -> type[Validator]:
    cls: type[Validator] = jsonschema.validators.validator_for(schema)
    return cls


def _validator(schema: Mapping[str, Any] | bool) -> Validator:
    return _validator_class(schema)(schema)


def _errors(schema: Mapping[str, Any] | bool, value: object) -> Iterator[ValidationError]:
    try:
        yield from _validator(schema).iter_errors(cast(Any, value))
    except referencing.exceptions.Unresolvable as exc:
        # Only local references resolve (nothing is fetched): the schema is at fault, not the value.
        yield ValidationError(f"the schema's $ref cannot be resolved ({exc})", validator="$ref")


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


def _worded(error: ValidationError) -> list[SchemaIssue]:
    path = tuple(error.absolute_path)
    keyword = str(error.validator)
    rule: Any = error.validator_value
    found = describe_value(error.instance)
    if keyword == "required" and isinstance(error.instance, Mapping):
        missing = [name for name in rule if name not in error.instance]
        return [SchemaIssue((*path, name), "required, got nothing", keyword) for name in missing]
    if keyword == "additionalProperties" and isinstance(error.instance, Mapping):
        known = list(error.schema.get("properties") or {}) if isinstance(error.schema, Mapping) else []
        allowed = f" (expected one of: {', '.join(known)})" if known else ""
        extra = [name for name in error.instance if name not in known and not _patterned(error, name)]
        return [SchemaIssue((*path, name), f"unexpected field{allowed}", keyword) for name in extra]
    return [SchemaIssue(path, _message(keyword, rule, error, found), keyword)]


def _patterned(error: ValidationError, name: str) -> bool:
    patterns = error.schema.get("patternProperties") if isinstance(error.schema, Mapping) else None
    return any(re.search(pattern, name) for pattern in patterns or {})


_BOUNDS = {
    "minimum": "expected a number at least {rule}",
    "maximum": "expected a number at most {rule}",
    "exclusiveMinimum": "expected a number more than {rule}",
    "exclusiveMaximum": "expected a number less than {rule}",
    "multipleOf": "expected a multiple of {rule}",
    "minLength": "expected at least {rule} characters",
    "maxLength": "expected at most {rule} characters",
    "minItems": "expected at least {rule} items",
    "maxItems": "expected at most {rule} items",
    "minProperties": "expected at least {rule} fields",
    "maxProperties": "expected at most {rule} fields",
    "pattern": "expected a string matching {rule!r}",
    "uniqueItems": "expected items that differ from each other",
}


def _message(keyword: str, rule: Any, error: ValidationError, found: str) -> str:
    if keyword == "type":
        kinds = [rule] if isinstance(rule, str) else list(rule)
        return f"expected {' or '.join(_TYPES.get(kind, kind) for kind in kinds)}, got {found}"
    if keyword == "enum":
        return f"expected one of {', '.join(describe_value(option) for option in rule)}, got {found}"
    if keyword == "const":
        return f"expected {describe_value(rule)}, got {found}"
    if keyword == "oneOf" and "is valid under each of" in error.message:
        return f"matches more than one of the allowed forms, got {found}"
    if keyword in ("anyOf", "oneOf"):
        return f"matches none of the allowed forms, got {found}"
    if keyword in _BOUNDS:
        return f"{_BOUNDS[keyword].format(rule=rule)}, got {found}"
    return f"{error.message[:1].lower()}{error.message[1:]}"  # the library's words for the rarer rules


def _position(value: object, issue: SchemaIssue) -> tuple[int, ...]:
    """Where ``issue`` stands in ``value``, for the order issues are listed in: each key by its place in
    its object, each index as it is; a missing required property before every property of its object."""
    position: list[int] = []
    here: object = value
    for step in issue.path:
        if isinstance(here, Mapping) and step in here:
            position.append(list(here).index(step) + 1)
            here = here[step]
        elif isinstance(here, Sequence) and isinstance(step, int) and not isinstance(here, str):
            position.append(step + 1)
            here = here[step] if step < len(here) else None
        else:  # a required property that is not there
            position.append(0)
            here = None
    return tuple(position)


__all__ = ["SchemaIssue", "describe_value", "first_problem", "issues", "json_path", "schema_problem"]
