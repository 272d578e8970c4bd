"""Writing a formula back to the TOML of a ``.formula.toml`` file, which ``load_formula`` reads to the same
formula.

For: saving formulas that were built in code or by the copilot (``plangate ask --save``): top-level fields,
``[vars.<name>]`` tables, ``[[steps]]`` with their nested values as inline tables. Fields left at their
defaults are not written. Not for: reading (``loader.py``) or preserving a hand-written file's layout.
"""

from __future__ import annotations

import json
import re

from pydantic import JsonValue

from plangate.errors import FormulaError
from plangate.formulas.schema import Formula

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOP_ORDER = ("formula", "description", "version", "type", "extends")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name)


def _string(text: str) -> str:
    # JSON's escapes are TOML's basic-string escapes; DEL is the one control character JSON leaves as is.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: JsonValue, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item, f"{where}[{i}]") for i, item in enumerate(value)) + "]"
    if isinstance(value, dict):
        pairs = [f"{_key(k)} = {_value(v, f'{where}.{k}')}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise FormulaError(f"{where}: TOML has no null; leave the field out or save the formula as JSON")


def formula_toml(formula: Formula, header: str = "") -> str:
    """The formula as the text of a ``.formula.toml`` file.

    Args:
        formula: the formula.
        header: comment lines to put first (each written with ``# ``).

    Raises:
        FormulaError: a value TOML cannot hold (a null inside a list).
    """
    data: dict[str, JsonValue] = formula.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["formula"] = formula.formula
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    if lines:
        lines.append("")
    for name in _TOP_ORDER:
        if name in data and data[name] is not None:
            lines.append(f"{name} = {_value(data[name], name)}")
    rest = {k: v for k, v in data.items() if k not in (*_TOP_ORDER, "vars", "steps") and v is not None}
    for name, value in rest.items():
        lines.append(f"{_key(name)} = {_value(value, name)}")
    variables = data.get("vars")
    if isinstance(variables, dict):
        for name, spec in variables.items():
            lines += ["", f"[vars.{_key(name)}]"]
            if isinstance(spec, dict):
                lines += [
                    f"{_key(k)} = {_value(v, f'vars.{name}.{k}')}" for k, v in spec.items() if v is not None
                ]
    steps = data.get("steps")
    if isinstance(steps, list):
        for index, step in enumerate(steps):
            lines += ["", "[[steps]]"]
            if isinstance(step, dict):
                lines += [
                    f"{_key(k)} = {_value(v, f'steps[{index}].{k}')}"
                    for k, v in step.items()
                    if v is not None
                ]
    return "\n".join(lines) + "\n"


__all__ = ["formula_toml"]
