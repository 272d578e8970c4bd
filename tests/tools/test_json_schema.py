"""tools/json_schema.py: the one JSON Schema validator (jsonschema underneath), in plangate's words."""

from __future__ import annotations

from typing import Any

import pytest

from plangate.tools.json_schema import first_problem, issues, json_path, schema_problem

ORDER = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": True},
    },
    "required": ["sku", "qty"],
    "additionalProperties": False,
}


def said(schema: dict[str, Any], value: object) -> list[tuple[str, str]]:
    return [(json_path(issue.path), issue.message) for issue in issues(schema, value)]


def test_every_problem_is_named_in_the_order_of_the_value() -> None:
    value = {"tags": ["a", "a", 3], "qty": 0, "extra": True}
    assert said(ORDER, value) == [
        ("$.sku", "required, got nothing"),
        ("$.tags", 'expected at most 2 items, got ["a", "a", 3]'),
        ("$.tags", 'expected items that differ from each other, got ["a", "a", 3]'),
        ("$.tags[2]", "expected a string, got 3"),
        ("$.qty", "expected a number at least 1, got 0"),
        ("$.extra", "unexpected field (expected one of: sku, qty, tags)"),
    ]


def test_a_value_of_the_wrong_type_says_so_once() -> None:
    assert said(ORDER, {"sku": 7, "qty": 2.5}) == [
        ("$.sku", "expected a string, got 7"),
        ("$.qty", "expected an integer, got 2.5"),
    ]


def test_a_value_that_fits_has_no_problem() -> None:
    assert issues(ORDER, {"sku": "ABC-12", "qty": 3, "tags": ["x"]}) == []
    assert first_problem(ORDER, {"sku": "ABC-12", "qty": 3}) is None


@pytest.mark.parametrize(
    ("schema", "value", "problem"),
    [
        (
            {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            3,
            "at $: matches more than one of the allowed forms, got 3",
        ),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "x",
            "at $: matches none of the allowed forms, got 'x'",
        ),
        ({"const": "on"}, "off", "at $: expected 'on', got 'off'"),
        ({"enum": [1, None]}, True, "at $: expected one of 1, null, got true"),
        (
            {"$defs": {"n": {"type": "number"}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
            {"a": "1"},
            "at $.a: expected a number, got '1'",
        ),
        (
            {"properties": {"a": {"$ref": "#/$defs/missing"}}},
            {"a": 1},
            "at $: the schema's $ref cannot be resolved",
        ),
    ],
)
def test_each_keyword_in_plangates_words(schema: dict[str, Any], value: object, problem: str) -> None:
    found = first_problem(schema, value)
    assert found is not None and found.startswith(problem)


def test_a_schema_that_is_not_one_is_said_with_where() -> None:
    assert schema_problem({"type": "integer"}) is None
    assert schema_problem({"type": "whole"}) == (
        "not a valid JSON schema: at $.type: 'whole' is not valid under any of the given schemas"
    )
    assert schema_problem([1]) == "not a valid JSON schema: expected an object or a boolean, got an array"
