"""plangate: a runtime for LLM agents and workflows that plan, act only with consent, and prove each step.

The names below are imported on first use, so ``import plangate`` stays cheap (the CLI's start-up, a
worker's import) however much the engines pull in.

An agent run hands back an :class:`~plangate.agent.AgentResult`, a formula run a
:class:`~plangate.formulas.runtime.FormulaResult`; both end with one :class:`~plangate.runs.Outcome`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_LAZY = {
    "Agent": "plangate.agent",
    "AgentResult": "plangate.agent",
    "FormulaResult": "plangate.formulas.runtime",
    "Outcome": "plangate.runs",
    "tool": "plangate.tools",
    "Approve": "plangate.interactions",
    "Reject": "plangate.interactions",
    "Answer": "plangate.interactions",
    "Edit": "plangate.interactions",
    "load_formula": "plangate.formulas",
    "run_formula": "plangate.formulas.runtime",
}

if TYPE_CHECKING:
    from plangate.agent import Agent, AgentResult
    from plangate.formulas import load_formula
    from plangate.formulas.runtime import FormulaResult, run_formula
    from plangate.interactions import Answer, Approve, Edit, Reject
    from plangate.runs import Outcome
    from plangate.tools import tool


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'plangate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentResult",
    "Answer",
    "Approve",
    "Edit",
    "FormulaResult",
    "Outcome",
    "Reject",
    "__version__",
    "load_formula",
    "run_formula",
    "tool",
]
