"""Turning pydantic validation errors into one-line formula problems: ``steps[2].depnds_on: unknown field``.

For: the wording a person reads when a formula does not fit the schema (what was expected, what was found,
where, and a did-you-mean). Not for: deciding what is valid (schema.py does that).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from plangate.errors import FormulaError
from plangate.formulas._schema_base import suggest


class FormulaSchemaError(FormulaError):
    """A formula that does not fit the schema.

    Attributes:
        problems: every ``(path, message)`` found, in file order; the error's own message is the first one.
    """

    def __init__(self, problems: Sequence[tuple[str, str]], *, source: str | None = None) -> None:
        self.problems = list(problems)
        path, message = self.problems[0]
        more = len(self.problems) - 1
        if more:
            message = f"{message} (and {more} more problem{'s' if more > 1 else ''})"
        super().__init__(message, path=path, source=source)


def join_path(path: str, part: str) -> str:
    """``steps[2]`` + ``id`` → ``steps[2].id``; ``enum`` + ``[0]`` → ``enum[0]``."""
    if not part:
        return path
    if not path or part.startswith("["):
        return f"{path}{part}"
    return f"{path}.{part}"


def schema_problems(error: ValidationError, *, prefix: str = "") -> list[tuple[str, str]]:
    """Every error of ``error`` as ``(path, message)``, the path rooted at ``prefix``."""
    problems: list[tuple[str, str]] = []
    for detail in error.errors():
        path = prefix
        for part in detail["loc"]:
            path = join_path(path, f"[{part}]" if isinstance(part, int) else str(part))
        ctx = detail.get("ctx") or {}
        if detail["type"] == "formula":
            path = join_path(path, str(ctx.get("where", "")))
        problems.append((path, _message(detail)))
    return problems


def _message(detail: ErrorDetails) -> str:
    kind = detail["type"]
    ctx = detail.get("ctx") or {}
    found = detail.get("input")
    if kind == "formula":
        return str(ctx["message"])
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {describe(found)}"
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "literal_error":
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = suggest(str(found), options) if isinstance(found, str) else ""
        return f"expected {ctx.get('expected')}, got {describe(found)}{hint}"
    if kind in ("greater_than", "greater_than_equal"):
        bound = ctx.get("gt", ctx.get("ge"))
        relation = "more than" if kind == "greater_than" else "at least"
        return f"expected a number {relation} {bound}, got {describe(found)}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return str(detail["msg"])


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "invalid-json-value": "a JSON value (a string, number, boolean, list or table)",
}


def describe(value: object) -> str:
    """A short phrase for a found value: ``a string ('abc')``, ``a table``, ``an integer (3)``."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing"
    return f"a {type(value).__name__}"


__all__ = ["FormulaSchemaError", "describe", "join_path", "schema_problems"]
