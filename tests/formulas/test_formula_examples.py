"""The formulas in examples/formulas: each loads, cooks and checks clean, and shows what it is for."""

from __future__ import annotations

from pathlib import Path

import pytest

from plangate.formulas import check, check_formula, cook, expand_iteration, load_formula

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"
#: The tools the examples call; an executor test registers these names.
TOOLS = {
    "run_tests",
    "build_artifact",
    "publish",
    "deploy",
    "check_health",
    "notify",
    "write_draft",
    "list_regions",
    "db_query",
    "get_overview",
    "query_available_slots",
    "analyze_health",
    "place",
}
VARS = {
    "release": {"version": "1.4.0"},
    "base-release": {"version": "1.4.0"},
    "composed-release": {"version": "1.4.0"},
}
VARS["deploy-region"] = {"region": "eu-west"}


def names() -> list[str]:
    return sorted(p.name.removesuffix(".formula.toml") for p in EXAMPLES.glob("*.formula.toml"))


def test_the_examples_are_there() -> None:
    assert {"release", "retry-until", "base-release", "composed-release", "review", "audit", "fanout"} <= set(
        names()
    )


@pytest.mark.parametrize("name", names())
def test_each_example_checks_clean(name: str) -> None:
    formula = load_formula(name, [EXAMPLES])
    if formula.type != "workflow":
        return  # expansions and aspects are checked through the workflows that use them
    plan, issues = check_formula(formula, VARS.get(name, {}), TOOLS, search_paths=[EXAMPLES])
    assert issues == []
    assert plan is not None and plan.steps


def test_release_has_tools_a_person_and_a_gate() -> None:
    plan = cook(load_formula("release", [EXAMPLES]), VARS["release"])
    kinds = {step.id: step.executor.type for step in plan.steps}
    assert kinds == {"run-tests": "tool", "build": "tool", "approve": "human", "publish": "tool"}
    gate = plan.step("publish").gate
    assert gate is not None and gate.condition is not None and gate.timeout == 1800


def test_retry_until_grows_at_run_time() -> None:
    plan = cook(load_formula("retry-until", [EXAMPLES]))
    (loop,) = plan.loops
    assert (loop.id, loop.max) == ("wait-healthy", 5)
    assert [s.id for s in expand_iteration(plan, loop.id, 2)] == ["wait-healthy.iter2.check"]
    assert check(plan, tools=TOOLS) == []


def test_composed_release_uses_extends_an_expansion_and_an_aspect() -> None:
    plan = cook(load_formula("composed-release", [EXAMPLES]), VARS["composed-release"])
    ids = [step.id for step in plan.steps]
    assert "notes" not in ids and {"notes.draft", "notes.approve"} <= set(ids)
    assert {"run-tests.audit", "build.audit", "notes.draft.audit", "publish.audit"} <= set(ids)
    assert plan.step("publish").needs == ["notes.approve"]
    assert plan.step("publish").title == "Publish 1.4.0 with its notes"


def test_fanout_spawns_a_sub_formula_per_element() -> None:
    plan = cook(load_formula("fanout", [EXAMPLES]))
    on_complete = plan.step("list-regions").on_complete
    assert on_complete is not None
    assert (on_complete.for_each, on_complete.formula, on_complete.parallel) == (
        "output.regions",
        "deploy-region",
        True,
    )
    assert load_formula(on_complete.formula, [EXAMPLES]).vars["region"].required
