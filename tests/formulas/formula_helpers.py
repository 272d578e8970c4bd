"""Shared by the formula tests: formulas written inline, and a loader that serves them by name."""

from __future__ import annotations

import textwrap

from plangate.errors import FormulaNotFound
from plangate.formulas import Formula, Plan, cook, parse_formula


def formula(text: str, *, source: str = "test.formula.toml") -> Formula:
    """A formula from TOML text (dedented)."""
    return parse_formula(textwrap.dedent(text), source=source)


class Library:
    """A loader over formulas given as TOML text, by name; counts how often each is loaded."""

    def __init__(self, **texts: str) -> None:
        self._formulas = {
            name.replace("_", "-"): formula(text, source=f"{name}.formula.toml")
            for name, text in texts.items()
        }
        self.loads: dict[str, int] = {}

    def __call__(self, name: str) -> Formula:
        found = self._formulas.get(name)
        if found is None:
            raise FormulaNotFound(f"formula {name!r} not found")
        self.loads[name] = self.loads.get(name, 0) + 1
        return found


def cooked(text: str, variables: dict[str, object] | None = None, **library: str) -> Plan:
    """Cook TOML text with vars, other formulas served from ``library``."""
    return cook(formula(text), variables or {}, loader=Library(**library))


def ids(plan: Plan) -> list[str]:
    """The step ids of a plan, in plan order."""
    return [step.id for step in plan.steps]


def needs(plan: Plan) -> dict[str, list[str]]:
    """Each step's needs, by id."""
    return {step.id: step.needs for step in plan.steps}
