"""Wire schemas: the portable subset, the tool-name constraint, and agreement with the decoder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from plangate.decisions import (
    AbortIntent,
    ContextHook,
    Decision,
    PlanOutput,
    PlanStep,
    RouteDecision,
    ToolCallIntent,
    decision_json_schema,
    is_closed_schema,
    parse_decision_json,
    parse_plan_json,
    plan_json_schema,
    route_json_schema,
)

PORTABLE = {"type", "enum", "properties", "required", "additionalProperties", "items", "anyOf", "description"}


def keywords(schema: Mapping[str, Any]) -> set[str]:
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= keywords(sub)
    for sub in schema.get("anyOf", ()):
        found |= keywords(sub)
    if isinstance(schema.get("items"), Mapping):
        found |= keywords(schema["items"])
    return found


def conforms(value: object, schema: Mapping[str, Any]) -> bool:
    """A validator for exactly the subset the schemas use."""
    if "anyOf" in schema:
        return any(conforms(value, option) for option in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    types = schema.get("type")
    allowed = types if isinstance(types, list) else [types]
    python = {
        "string": str,
        "object": dict,
        "array": list,
        "null": type(None),
        "integer": int,
        "boolean": bool,
    }
    if not any(isinstance(value, python[name]) for name in allowed):
        return False
    if isinstance(value, dict) and "properties" in schema:
        properties = schema["properties"]
        if set(value) != set(schema["required"]) or not set(value) <= set(properties):
            return False
        return all(conforms(value[key], properties[key]) for key in value)
    if isinstance(value, list):
        return all(conforms(item, schema["items"]) for item in value)
    return True


DECISIONS = [
    Decision(action="continue"),
    Decision(
        action="continue", tool_call=ToolCallIntent(name="place", arguments={"slot": 3, "days": [1, 2]})
    ),
    Decision(action="ask_user", speak="Which day?"),
    Decision(action="confirm", reason="write", tool_call=ToolCallIntent(name="move")),
    Decision(action="next_plan", goal_check="satisfied evidence: overview read"),
    Decision(action="done", speak="All set."),
    Decision(action="abort", abort=AbortIntent(code="out_of_scope", user_message="I only plan weeks.")),
]


def test_schemas_use_only_portable_keywords() -> None:
    for schema in (
        decision_json_schema(),
        decision_json_schema(["a"]),
        plan_json_schema(),
        route_json_schema(),
    ):
        assert keywords(schema) <= PORTABLE
        assert "$defs" not in json.dumps(schema)


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda decision: decision.action)
def test_every_decision_fits_the_schema_and_parses_back(decision: Decision) -> None:
    wire = decision.model_dump(mode="json")
    assert conforms(wire, decision_json_schema())
    assert parse_decision_json(json.dumps(wire)) == decision


def test_the_schema_rejects_what_the_protocol_cannot_read() -> None:
    schema = decision_json_schema()
    valid = Decision(action="done").model_dump(mode="json")
    assert not conforms({**valid, "action": "finish"}, schema)
    assert not conforms({**valid, "tool_call": "place"}, schema)
    assert not conforms({key: value for key, value in valid.items() if key != "speak"}, schema)
    assert not conforms({**valid, "extra": 1}, schema)


def test_tool_names_constrain_the_tool_call_name() -> None:
    schema = decision_json_schema(["move", "get_overview", "move"])
    known = Decision(action="confirm", tool_call=ToolCallIntent(name="move")).model_dump(mode="json")
    unknown = Decision(action="confirm", tool_call=ToolCallIntent(name="delete_all")).model_dump(mode="json")
    assert conforms(known, schema)
    assert not conforms(unknown, schema)
    tool_call = schema["properties"]
    assert isinstance(tool_call, dict)
    assert tool_call["tool_call"]["anyOf"][0]["properties"]["name"]["enum"] == ["get_overview", "move"]
    # The unconstrained schema is not changed by building a constrained one.
    assert conforms(unknown, decision_json_schema())


def test_no_tools_leave_tool_call_null_only() -> None:
    schema = decision_json_schema([])
    assert conforms(Decision(action="done").model_dump(mode="json"), schema)
    with_call = Decision(action="continue", tool_call=ToolCallIntent(name="x")).model_dump(mode="json")
    assert not conforms(with_call, schema)


def test_plan_and_route_schemas_are_closed_but_the_decision_has_open_arguments() -> None:
    assert is_closed_schema(plan_json_schema())
    assert is_closed_schema(route_json_schema())
    assert not is_closed_schema(decision_json_schema())
    assert not is_closed_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": []})


def test_plan_and_route_fit_their_schemas() -> None:
    plan = PlanOutput(
        action="plan_done",
        plan_steps=[PlanStep(content="Read the week", done_when="overview read")],
        context_hook=ContextHook(domain="schedule", packs=["core"]),
    )
    assert conforms(plan.model_dump(mode="json"), plan_json_schema())
    assert parse_plan_json(plan.model_dump_json()) == plan
    assert conforms(RouteDecision(route="execute").model_dump(mode="json"), route_json_schema())
    assert not conforms({"route": "think", "reply": None}, route_json_schema())
