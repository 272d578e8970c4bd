"""A formula a request names, checked before anything is stored for it: a run started, a schedule added.

Not for: checking formulas for their own sake (``routes/formulas.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from plangate.formulas import Plan, check_formula, has_errors
from plangate.formulas.runtime import FormulaRunner
from plangate.server._problems import Problem


def checked_plan(runner: FormulaRunner, formula: str, vars: Mapping[str, object]) -> Plan:
    """``formula`` (a name on the server's search path) cooked with ``vars`` and checked.

    Raises:
        Problem: 422 ``formula-check-failed`` with the issues, when it cannot be found, cooked, or has an
            error-level issue.
    """
    plan, issues = check_formula(formula, vars, tools=runner.tools, search_paths=runner.search_paths)
    if plan is None or has_errors(issues):
        errors = [issue for issue in issues if issue.level == "error"]
        listed = "; ".join(f"{i.path}: {i.message}" if i.path else i.message for i in errors[:5])
        raise Problem(
            422,
            "formula-check-failed",
            f"formula {formula!r} does not pass check: {listed}",
            issues=[issue.model_dump(mode="json") for issue in issues],
        )
    return plan


__all__ = ["checked_plan"]
