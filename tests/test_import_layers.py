"""plangate's packages import downward only, in the order the architecture page (docs/architecture.md)
states: a package imports only the packages of the tiers before its own (counting imports inside functions
and those made only for type checking), so there is no cycle among them."""

from __future__ import annotations

import ast
from pathlib import Path

import plangate

ROOT = Path(plangate.__file__).parent
ARCHITECTURE = ROOT.parents[1] / "docs" / "architecture.md"

TIERS: list[list[str]] = [
    ["errors"],
    ["config", "interactions", "vocab", "_json", "_models", "_offloop", "bundled"],
    ["conditions", "events", "decisions"],
    ["store", "models"],
    ["tools"],
    ["runs"],
    ["agent"],
    ["formulas"],
    ["copilot"],
    ["engines"],
    ["workers"],
    ["server"],
    ["cli"],
]
FOUNDATIONS = 5  # the first five tiers


def unit_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported(path: Path) -> set[str]:
    """The plangate packages and top-level modules ``path`` imports anywhere in its text."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "plangate":
                modules = [f"plangate.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        names.update(module.split(".")[1] for module in modules if module.startswith("plangate."))
    return names


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        unit = unit_of(path)
        if unit not in ("__init__", "__main__"):
            graph.setdefault(unit, set()).update(imported(path) - {unit})
    return graph


def test_every_package_has_a_tier() -> None:
    placed = {unit for tier in TIERS for unit in tier}
    assert set(import_graph()) == placed


def test_each_package_imports_only_the_tiers_before_its_own() -> None:
    rank = {unit: i for i, tier in enumerate(TIERS) for unit in tier}
    upward = {
        f"{unit} -> {target}"
        for unit, targets in import_graph().items()
        for target in targets
        if target in rank and rank[target] >= rank[unit]
    }
    assert upward == set()


def test_the_architecture_page_states_the_foundations_order() -> None:
    stated = " → ".join(", ".join(f"`{unit}`" for unit in tier) for tier in TIERS[:FOUNDATIONS])
    assert stated in " ".join(ARCHITECTURE.read_text(encoding="utf-8").split())


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text("def f():\n    from plangate.server.app import create_app\n    import plangate.cli\n")
    assert imported(module) == {"server", "cli"}
