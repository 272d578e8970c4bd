"""Formulas: declarative workflows loaded from TOML / JSON, resolved, cooked into a plan and checked.

The pipeline is ``load_formula`` → ``resolve`` (``extends``) → ``cook`` (a :class:`Plan`) → ``check``
(a list of :class:`Issue`). The executor that runs a plan lives beside these modules and uses
:func:`expand_iteration` and :func:`render_runtime` from here.
"""

from __future__ import annotations

from plangate.formulas._schema_errors import FormulaSchemaError
from plangate.formulas.check import SUPPORTED_EXECUTORS, Issue, check, check_formula, has_errors
from plangate.formulas.cook import cook, expand_iteration
from plangate.formulas.durations import parse_duration
from plangate.formulas.loader import FormulaLoader, Loader, load_formula, parse_formula
from plangate.formulas.plan import (
    AgentExecutor,
    CookedStep,
    Executor,
    FormulaExecutor,
    HumanExecutor,
    LlmExecutor,
    ManualExecutor,
    Plan,
    PlanGate,
    RuntimeLoop,
    ToolExecutor,
    WaitsFor,
)
from plangate.formulas.ranges import parse_range
from plangate.formulas.resolve import resolve
from plangate.formulas.schema import Advice, Compose, Formula, Pointcut, Step, Var
from plangate.formulas.templates import render_runtime

__all__ = [
    "SUPPORTED_EXECUTORS",
    "Advice",
    "AgentExecutor",
    "Compose",
    "CookedStep",
    "Executor",
    "Formula",
    "FormulaExecutor",
    "FormulaLoader",
    "FormulaSchemaError",
    "HumanExecutor",
    "Issue",
    "LlmExecutor",
    "Loader",
    "ManualExecutor",
    "Plan",
    "PlanGate",
    "Pointcut",
    "RuntimeLoop",
    "Step",
    "ToolExecutor",
    "Var",
    "WaitsFor",
    "check",
    "check_formula",
    "cook",
    "expand_iteration",
    "has_errors",
    "load_formula",
    "parse_duration",
    "parse_formula",
    "parse_range",
    "render_runtime",
    "resolve",
]
