"""Golden files: exact results and reasons (fixtures/results.txt) and exact trees (fixtures/ast.txt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from condition_contexts import CONTEXTS

from plangate.conditions import Condition, compile_condition, evaluate, parse
from plangate.conditions.ast import dump, to_source

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(name: str, columns: int) -> list[list[str]]:
    rows = []
    for number, line in enumerate((FIXTURES / name).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(" | " if columns == 4 else " => ", columns - 1)
        assert len(parts) == columns, f"{name}:{number}: expected {columns} columns, found {len(parts)}"
        rows.append(parts)
    return rows


RESULTS = _rows("results.txt", 4)
TREES = _rows("ast.txt", 2)


def test_the_golden_files_are_substantial() -> None:
    assert len(RESULTS) >= 100
    assert len(TREES) >= 30
    assert {context for context, *_ in RESULTS} == set(CONTEXTS)


@pytest.mark.parametrize(
    ("context", "satisfied", "expression", "reason"), RESULTS, ids=[r[2] for r in RESULTS]
)
def test_result_and_reason(context: str, satisfied: str, expression: str, reason: str) -> None:
    ctx = CONTEXTS[context]()
    result = evaluate(expression, ctx)
    assert (result.satisfied, result.reason) == (satisfied == "true", reason)
    # The eager path writes the same reason as the lazy one, and the uncached compile agrees.
    assert Condition(expression).explain(ctx) == result


@pytest.mark.parametrize(("expression", "tree"), TREES, ids=[t[0] for t in TREES])
def test_tree(expression: str, tree: str) -> None:
    parsed = parse(expression)
    assert dump(parsed) == tree
    # Canonical text parses back to the same tree, and is itself canonical.
    assert parse(to_source(parsed)) == parsed
    assert to_source(parse(to_source(parsed))) == to_source(parsed)
    assert compile_condition(expression).ast == parsed
