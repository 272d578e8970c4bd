"""Which held gates a step's transition concerns: those whose condition names the step, ranges over a step
above it (``children``/``descendants``), or over every step; never the step's own gate."""

from __future__ import annotations

import pytest

from plangate.formulas._rungraph import PlanGraph, gate_reads
from plangate.formulas.plan import CookedStep, Plan, PlanGate, ToolExecutor


def step(
    step_id: str, gate: str | None = None, *, parent: str | None = None, children: list[str] | None = None
) -> CookedStep:
    return CookedStep(
        id=step_id,
        title=step_id,
        parent=parent,
        children=children or [],
        gate=PlanGate(condition=gate) if gate else None,
        executor=ToolExecutor(name="work", args={}),
    )


def graph() -> PlanGraph:
    return PlanGraph(
        Plan(
            formula="g",
            steps=[
                step("build"),
                step("top", children=["mid"]),
                step("mid", parent="top", children=["leaf"]),
                step("leaf", parent="mid"),
                step("named", "build.status == 'complete' and top.output.n > 1"),
                step("kids", "children(top).all(status == 'complete')"),
                step("deep", "descendants(top).any(output.ok == true)"),
                step("counted", "steps.complete >= 3"),
                step("every", "steps.any(status == 'failed')"),
                step("selfish", "status == 'pending' and children(step).any(status == 'failed')"),
                step("file", "file.exists('x') or env.CI == 'true'"),
                step("broken", "build.status =="),
            ],
        )
    )


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ("build", {"named", "counted", "every"}),
        ("top", {"named", "kids", "deep", "counted", "every"}),
        ("mid", {"kids", "deep", "counted", "every"}),
        ("leaf", {"kids", "deep", "counted", "every"}),  # two levels below ``top``
        ("named", {"counted", "every"}),
        ("counted", {"every"}),  # a gate reading every step is not looked at for its own transitions
        ("selfish", {"counted", "every"}),
    ],
)
def test_a_transition_concerns_the_gates_that_read_the_step(changed: str, expected: set[str]) -> None:
    assert set(graph().gates_reading(changed)) == expected


def test_steps_added_below_a_parent_concern_the_gates_over_it() -> None:
    plan_graph = graph()
    plan_graph.add([step("mid", parent="top", children=["leaf", "late"]), step("late", parent="mid")])

    assert set(plan_graph.gates_reading("late")) == {"kids", "deep", "counted", "every"}
    assert plan_graph.position["late"] == len(plan_graph.steps) - 1
    assert plan_graph.position["mid"] == 2  # a re-taken step keeps its place


def test_what_a_condition_reads() -> None:
    reads = gate_reads("children(tests).count(output.failed > 0) == 0 and build.status == 'complete'", "me")
    assert (reads.named, reads.below) == (("tests", "build"), ("tests",))
    assert not reads.every and not reads.outside
    assert gate_reads("children(step).all(status == 'complete')", "me").below == ("me",)
    assert gate_reads("steps.count(status == 'failed') == 0", "me").every
    assert gate_reads("file.exists('{{path}}')", "me").outside
    assert not gate_reads("vars.go == 'yes'", "me").outside


def test_a_gate_that_does_not_parse_reads_nothing_and_is_still_a_gate() -> None:
    plan_graph = graph()
    assert "broken" in plan_graph.gated
    assert "broken" not in plan_graph.gates_reading("build")
