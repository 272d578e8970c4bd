"""Var values: coercion of command-line strings by declared type, defaults, and every rule's message."""

from __future__ import annotations

import pytest
from formula_helpers import formula

from plangate.formulas.variables import apply_vars, coerce

DECLARED = formula(
    """
    formula = "vars"
    [vars.version]
    required = true
    pattern = '^\\d+\\.\\d+\\.\\d+$'
    [vars.channel]
    default = "stable"
    enum = ["stable", "beta"]
    [vars.replicas]
    type = "int"
    default = 2
    [vars.ratio]
    type = "float"
    default = 1
    [vars.dry_run]
    type = "bool"
    default = false
    [vars.note]
    description = "optional, no default"
    """
).vars


@pytest.mark.parametrize(
    ("value", "var_type", "expected"),
    [
        ("3", "int", 3),
        (" -4 ", "int", -4),
        (3.0, "int", 3),
        ("2.5", "float", 2.5),
        ("1e3", "float", 1000.0),
        (2, "float", 2.0),
        ("yes", "bool", True),
        ("FALSE", "bool", False),
        ("0", "bool", False),
        (5, "string", "5"),
        (True, "string", "true"),
    ],
)
def test_coercion_by_declared_type(value: object, var_type: str, expected: object) -> None:
    result = coerce(value, var_type)  # type: ignore[arg-type]
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "var_type", "message"),
    [
        ("three", "int", "expected an int, got 'three'"),
        ("3.5", "int", "expected an int, got '3.5'"),
        (True, "int", "expected an int, got True"),
        (3.5, "int", "expected an int, got 3.5"),
        ("nan", "float", "expected a float, got 'nan'"),
        ("maybe", "bool", "expected true or false, got 'maybe'"),
        (1, "bool", "expected true or false, got 1"),
        ([1], "string", "expected a string, got list"),
    ],
)
def test_coercion_failures_say_what_was_expected(value: object, var_type: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        coerce(value, var_type)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_defaults_keep_their_type_and_strings_are_coerced() -> None:
    values, problems = apply_vars(DECLARED, {"version": "1.2.3", "replicas": "5", "dry_run": "true"})
    assert problems == []
    assert values == {
        "version": "1.2.3",
        "channel": "stable",
        "replicas": 5,
        "ratio": 1.0,
        "dry_run": True,
    }
    assert type(values["ratio"]) is float
    assert "note" not in values


def messages(given: dict[str, object]) -> list[tuple[str, str, str]]:
    _, problems = apply_vars(DECLARED, given)
    return [(p.code, p.path, p.message) for p in problems]


def test_missing_required_var() -> None:
    assert messages({}) == [("missing-var", "vars.version", "required var 'version' is not set")]


def test_enum_failure_with_suggestion() -> None:
    assert messages({"version": "1.0.0", "channel": "stabel"}) == [
        (
            "var-enum",
            "vars.channel",
            "var 'channel' must be one of 'stable', 'beta', got 'stabel' (did you mean 'stable'?)",
        )
    ]


def test_pattern_failure() -> None:
    assert messages({"version": "1.0"}) == [
        (
            "var-pattern",
            "vars.version",
            "var 'version' is '1.0', which does not match the pattern '^\\d+\\.\\d+\\.\\d+$'",
        )
    ]


def test_type_failure_names_the_var() -> None:
    assert messages({"version": "1.0.0", "replicas": "many"}) == [
        ("var-type", "vars.replicas", "var 'replicas': expected an int, got 'many'")
    ]


def test_undeclared_vars_are_kept_and_only_warned_about() -> None:
    values, problems = apply_vars(DECLARED, {"version": "1.0.0", "chanel": "beta", "history": ["q1"]})
    assert values["chanel"] == "beta" and values["history"] == ["q1"]
    assert [(p.code, p.level, p.message) for p in problems] == [
        ("unknown-var", "warning", "var 'chanel' is not declared by the formula (did you mean 'channel'?)"),
        ("unknown-var", "warning", "var 'history' is not declared by the formula"),
    ]


def test_a_boolean_is_not_an_enum_integer() -> None:
    specs = formula('formula = "f"\n[vars.level]\nenum = [0, 1]\n').vars
    assert [p.code for p in apply_vars(specs, {"level": "1"})[1]] == []
    assert [p.code for p in apply_vars(specs, {"level": True})[1]] == ["var-type"]
