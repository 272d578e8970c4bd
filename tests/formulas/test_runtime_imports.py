"""The formula runtime's modules import in one direction (runtime → scheduler → phases → run context and
state), never back: no cycle among ``plangate.formulas``' modules, counting imports made only for type
checking and those inside functions, and each runtime module imports alone in a fresh interpreter."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

import plangate.formulas

PACKAGE = Path(plangate.formulas.__file__).parent
RUNTIME_MODULES = (
    "runtime",
    "_scheduler",
    "_gates",
    "_writes",
    "_answers",
    "_containers",
    "_work",
    "_runcontext",
    "_runstate",
    "_rungraph",
    "_agent_steps",
    "_executors",
)


def module_name(path: Path) -> str:
    return "plangate.formulas" if path.stem == "__init__" else f"plangate.formulas.{path.stem}"


def import_graph() -> dict[str, set[str]]:
    """Module → the ``plangate.formulas`` modules it imports anywhere in its text."""
    modules = {module_name(path): path for path in PACKAGE.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("plangate.formulas"):
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                found.add(f"plangate.formulas.{node.module}" if node.module else "plangate.formulas")
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("plangate.formulas"))
        graph[name] = found - {name}
    return graph


def test_the_formulas_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph()
    assert "plangate.formulas._scheduler" in graph["plangate.formulas.runtime"]
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle among plangate.formulas modules: {' -> '.join(exc.args[1])}")
    # the orchestrators come after the phases they use, never before
    assert order.index("plangate.formulas._gates") < order.index("plangate.formulas._scheduler")
    assert order.index("plangate.formulas._scheduler") < order.index("plangate.formulas.runtime")


def test_a_phase_sees_the_run_through_its_context_not_the_scheduler() -> None:
    graph = import_graph()
    for phase in ("_gates", "_writes", "_answers", "_work", "_runcontext"):
        imported = graph[f"plangate.formulas.{phase}"]
        assert "plangate.formulas._scheduler" not in imported, phase
        assert "plangate.formulas.runtime" not in imported, phase


@pytest.mark.parametrize("module", RUNTIME_MODULES)
def test_each_runtime_module_imports_alone(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import plangate.formulas.{module}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
