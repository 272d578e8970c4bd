"""Var values: turning what a caller passes (often ``--var k=v`` strings) into typed, validated values.

For: coercion by declared type, defaults, and the required / enum / pattern rules, reported as problems that
``cook`` raises and ``check`` lists. Not for: where values are used (templates, conditions: cook.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from pydantic import JsonValue

from plangate.errors import UserError
from plangate.formulas._schema_base import suggest
from plangate.formulas.schema import Scalar, Var, VarType, scalar_type

_INT = re.compile(r"[+-]?[0-9]{1,30}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_TYPE_WORDS = {"string": "a string", "int": "an int", "float": "a float", "bool": "true or false"}


class VarTypeError(UserError, ValueError):
    """A var's value that cannot be read as the var's declared type; the message says what was expected."""


@dataclass(frozen=True)
class VarProblem:
    """A var value that breaks a rule; ``code`` is the check issue code it becomes."""

    name: str
    code: Literal["missing-var", "var-type", "var-enum", "var-pattern", "unknown-var"]
    message: str

    @property
    def level(self) -> Literal["error", "warning"]:
        """Undeclared vars are only a warning: callers such as the copilot pass extra context on purpose."""
        return "warning" if self.code == "unknown-var" else "error"

    @property
    def path(self) -> str:
        """Where the var is declared: ``vars.<name>``."""
        return f"vars.{self.name}"


def coerce(value: object, var_type: VarType) -> Scalar:
    """Convert ``value`` to ``var_type``; strings are parsed (``"3"`` → 3, ``"yes"`` → True).

    Raises:
        VarTypeError: the value cannot be read as that type; the message says what was expected.
    """
    expected = _TYPE_WORDS[var_type]
    found = scalar_type(value)
    if found is None:
        raise VarTypeError(f"expected {expected}, got {type(value).__name__}")
    if found == var_type:
        return value  # type: ignore[return-value]  # scalar_type checked it
    if isinstance(value, str):
        return _parse(value, var_type, expected)
    if var_type == "string":
        return format_scalar(value)  # type: ignore[arg-type]
    if var_type == "float" and found == "int":
        return float(value)  # type: ignore[arg-type]
    if var_type == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    raise VarTypeError(f"expected {expected}, got {value!r}")


def _parse(text: str, var_type: VarType, expected: str) -> Scalar:
    stripped = text.strip()
    if var_type == "int" and _INT.fullmatch(stripped):
        return int(stripped)
    if var_type == "float" and _FLOAT.fullmatch(stripped):
        return float(stripped)
    if var_type == "bool":
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    raise VarTypeError(f"expected {expected}, got {text!r}")


def format_scalar(value: Scalar) -> str:
    """The text of a value as a template prints it: ``true`` / ``false`` for booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def apply_vars(
    specs: Mapping[str, Var], given: Mapping[str, object]
) -> tuple[dict[str, JsonValue], list[VarProblem]]:
    """The values of a formula's vars, and every rule they break.

    Declared vars take the given value (coerced to the declared type) or their default; a required var with no
    value is missing. Given vars that are not declared are kept as they are and reported as a warning.

    Returns:
        ``(values, problems)``: values holds what could be worked out (a value that breaks a rule is kept as
        given, a missing one is absent); problems is empty when every rule holds.
    """
    values: dict[str, JsonValue] = {}
    problems: list[VarProblem] = []
    for name, spec in specs.items():
        if name in given:
            raw = given[name]
            try:
                value = coerce(raw, spec.effective_type)
            except VarTypeError as exc:
                problems.append(VarProblem(name, "var-type", f"var {name!r}: {exc}"))
                values[name] = _keep(raw)
                continue
        elif spec.default is not None:
            value = coerce(spec.default, spec.effective_type)
        else:
            if spec.required:
                problems.append(VarProblem(name, "missing-var", f"required var {name!r} is not set"))
            continue
        values[name] = value
        problem = _rule_problem(name, spec, value)
        if problem is not None:
            problems.append(problem)
    for name in given:
        if name not in specs:
            hint = suggest(name, specs)
            problems.append(
                VarProblem(name, "unknown-var", f"var {name!r} is not declared by the formula{hint}")
            )
            values[name] = _keep(given[name])
    return values, problems


def _rule_problem(name: str, spec: Var, value: Scalar) -> VarProblem | None:
    if spec.enum is not None and not any(_same(value, option) for option in spec.enum):
        options = ", ".join(repr(option) for option in spec.enum)
        hint = suggest(value, [o for o in spec.enum if isinstance(o, str)]) if isinstance(value, str) else ""
        return VarProblem(name, "var-enum", f"var {name!r} must be one of {options}, got {value!r}{hint}")
    if spec.pattern is not None and re.fullmatch(spec.pattern, format_scalar(value)) is None:
        return VarProblem(
            name,
            "var-pattern",
            f"var {name!r} is {value!r}, which does not match the pattern '{spec.pattern}'",
        )
    return None


def _same(value: Scalar, option: Scalar) -> bool:
    # True == 1 in Python; a bool only equals a bool.
    return isinstance(value, bool) == isinstance(option, bool) and value == option


def _keep(value: object) -> JsonValue:
    """A given value as it is when it is JSON (a stored plan must be), else its text."""
    return cast(JsonValue, value) if _is_json(value) else str(value)


def _is_json(value: object) -> bool:
    if value is None or scalar_type(value) is not None:
        return True
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


__all__ = ["VarProblem", "VarTypeError", "apply_vars", "coerce", "format_scalar"]
