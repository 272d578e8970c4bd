"""The step states a condition reads are kept current by each transition (not rebuilt for the whole plan at
every look), and always equal what a full build from the run's state gives: statuses, outputs, children
nested, in the same order, and after the plan grows."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.conditions import ConditionContext, StepState, compile_condition
from plangate.events import StepStateEvent
from plangate.formulas._runstate import RunState, StepRun
from plangate.formulas.plan import CookedStep, Plan, ToolExecutor

STATUSES = ("pending", "ready", "running", "waiting", "complete", "failed", "skipped", "cancelled")


def step(step_id: str, *, parent: str | None = None, children: list[str] | None = None) -> CookedStep:
    return CookedStep(
        id=step_id,
        title=step_id,
        parent=parent,
        children=children or [],
        executor=ToolExecutor(name="work", args={}),
    )


def nested_plan() -> Plan:
    return Plan(
        formula="nested",
        steps=[
            step("a"),
            step("top", children=["mid", "c"]),
            step("mid", parent="top", children=["leaf", "d"]),
            step("leaf", parent="mid"),
            step("d", parent="mid"),
            step("c", parent="top"),
            step("z"),
        ],
    )


def full_build(state: RunState) -> dict[str, StepState]:
    """What the view must equal: every step built from scratch (children before their parent)."""
    built: dict[str, StepState] = {}

    def build(step_id: str) -> StepState:
        if step_id in built:
            return built[step_id]
        plan_step = state.plan.index[step_id]
        run = state.steps[step_id]
        kids = [build(c) for c in plan_step.children if c in state.plan.index]
        built[step_id] = StepState(id=step_id, status=run.status, output=run.output or {}, children=kids)
        return built[step_id]

    for plan_step in state.plan.steps:
        build(plan_step.id)
    return built


def shape(found: StepState) -> tuple[Any, ...]:
    return (found.id, found.status, dict(found.output), [shape(c) for c in found.children])


def assert_same(state: RunState) -> None:
    view = state.condition_steps()
    expected = full_build(state)
    assert list(view) == list(expected)
    assert len(view) == len(expected)
    assert {k: shape(v) for k, v in view.items()} == {k: shape(v) for k, v in expected.items()}
    assert "nowhere" not in view and view.get("nowhere") is None


events = st.lists(
    st.tuples(
        st.sampled_from(["a", "top", "mid", "leaf", "d", "c", "z"]),
        st.sampled_from(STATUSES),
        st.one_of(st.none(), st.dictionaries(st.sampled_from(["n", "ok"]), st.integers(0, 3), max_size=2)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(events)
def test_the_view_equals_a_full_build_after_any_transitions(changes: list[tuple[str, str, Any]]) -> None:
    state = RunState.new(nested_plan())
    view = state.condition_steps()
    for step_id, status, output in changes:
        view[step_id]  # read before the transition: what was built must not go stale
        state.apply(StepStateEvent(step_id=step_id, status=status, attempt=1, output=output))  # type: ignore[arg-type]
        assert_same(state)


def test_a_parent_lists_its_childrens_current_states_and_the_same_objects() -> None:
    state = RunState.new(nested_plan())
    view = state.condition_steps()
    top = view["top"]
    state.apply(StepStateEvent(step_id="leaf", status="complete", attempt=1, output={"n": 1}))

    # the parent's entry did not need building again to see its grandchild's transition
    assert view["top"] is top
    assert [k.status for k in top.children[0].children] == ["complete", "pending"]
    assert top.children[0] is view["mid"] and top.children[0].children[0] is view["leaf"]
    assert [k.id for k in top.children[:1]] == ["mid"]
    result = compile_condition("descendants(top).count(status == 'complete') == 1").evaluate(
        ConditionContext(steps=view, current_step="a")
    )
    assert result.satisfied, result.reason


def test_the_view_follows_the_plan_when_it_grows() -> None:
    state = RunState.new(nested_plan())
    view = state.condition_steps()
    assert [k.id for k in view["z"].children] == []
    grown = nested_plan().model_copy(deep=True)
    grown.steps[-1] = step("z", children=["z.1"])
    grown.steps.append(step("z.1", parent="z"))
    state.plan = Plan.from_dict(grown.to_dict())
    state.steps["z.1"] = StepRun("z.1")
    state.apply(StepStateEvent(step_id="z.1", status="complete", attempt=1))

    assert [k.status for k in view["z"].children] == ["complete"]
    assert_same(state)
