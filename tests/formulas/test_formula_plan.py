"""The stored plan: a JSON round trip, the schema version, and a frozen version-1 plan that keeps loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plangate.errors import FormulaError, SchemaVersionError
from plangate.formulas import Plan, expand_iteration
from plangate.formulas.plan import PLAN_SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "plan-v1.json"


def stored() -> dict[str, object]:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_a_version_1_plan_still_loads_and_writes_back_the_same() -> None:
    data = stored()
    plan = Plan.from_dict(data)
    assert plan.schema_version == 1
    assert plan.to_dict() == data
    assert [s.executor.type for s in plan.steps] == [
        "tool",
        "manual",
        "agent",
        "llm",
        "tool",
        "human",
        "manual",
        "formula",
        "manual",
        "human",
    ]


def test_a_stored_plan_can_still_grow_its_until_loop() -> None:
    plan = Plan.from_dict(stored())
    (step,) = expand_iteration(plan, "poll", 2)
    assert step.id == "poll.iter2.probe"
    assert step.needs == ["poll.iter1.probe", "notes.approve"]
    assert step.executor.model_dump() == {"type": "formula", "name": "probe", "vars": {"round": 2}}


def test_the_round_trip_goes_through_json_text() -> None:
    plan = Plan.from_dict(stored())
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    assert again.step("shape").executor.model_dump(by_alias=True)["schema"] == {"type": "object"}


def test_a_newer_plan_is_refused_loudly() -> None:
    data = stored()
    data["schema_version"] = PLAN_SCHEMA_VERSION + 1
    with pytest.raises(SchemaVersionError) as caught:
        Plan.from_dict(data)
    assert str(caught.value) == "this plan has schema version 2; this plangate reads up to 1"


def test_something_that_is_not_a_plan_is_a_formula_error() -> None:
    with pytest.raises(FormulaError) as caught:
        Plan.from_dict({"formula": "f", "steps": [{"id": "a"}]})
    assert str(caught.value) == "steps[0].title: not a stored plan: missing required field"


def test_steps_are_found_by_id() -> None:
    plan = Plan.from_dict(stored())
    assert plan.step("sign").needs == ["poll", "sign.log"]
    with pytest.raises(FormulaError, match="the plan of 'stored' has no step 'nope'"):
        plan.step("nope")
