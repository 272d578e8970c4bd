"""The event types: one per tag of SPEC §7, cheap to build, immutable, strict about their fields."""

from __future__ import annotations

import datetime

import pytest
from pydantic import ValidationError

from plangate.events import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    InteractionOpenedEvent,
    InteractionTool,
    PlanEvent,
    PlanEventStep,
    SpeakEvent,
    StepStateEvent,
    ToolCallEvent,
    ToolResultEvent,
)

SPEC_TYPES = {
    "status",
    "speak",
    "thinking",
    "plan",
    "step_started",
    "step_advanced",
    "tool_call",
    "tool_result",
    "interaction_opened",
    "interaction_resolved",
    "correction",
    "round",
    "outcome",
    "op",
    "review",
    "heartbeat",
    "step_state",
    "gate",
}


def test_there_is_one_class_per_event_type_of_the_spec() -> None:
    assert set(EVENT_TYPES) == SPEC_TYPES
    for tag, cls in EVENT_TYPES.items():
        assert cls.model_fields["type"].default == tag


def test_engines_build_events_without_the_envelope() -> None:
    event = SpeakEvent(text="hello")
    assert (event.run_id, event.seq, event.at, event.type) == ("", 0, 0.0, "speak")


def test_events_are_immutable() -> None:
    event = SpeakEvent(text="hello")
    with pytest.raises(ValidationError, match="frozen"):
        event.text = "changed"  # type: ignore[misc]


def test_unknown_fields_and_wrong_types_are_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        SpeakEvent(text="hi", txt="typo")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="status"):
        StepStateEvent(step_id="build", status="done")
    with pytest.raises(ValidationError, match="resolution"):
        EVENT_ADAPTER.validate_python(
            {"type": "interaction_resolved", "interaction_id": "i", "kind": "confirm", "resolution": "maybe"}
        )


def test_json_fields_refuse_values_json_cannot_carry() -> None:
    with pytest.raises(ValidationError, match="arguments"):
        ToolCallEvent(call_id="c1", tool="place", arguments={"when": datetime.datetime(2025, 1, 1)})
    with pytest.raises(ValidationError, match="observation"):
        ToolResultEvent(
            call_id="c1", tool="db_query", status="done", success=True, summary="", observation={1, 2}
        )


def test_optional_fields_have_the_documented_defaults() -> None:
    result = ToolResultEvent(call_id="c1", tool="get_overview", status="done", success=True, summary="ok")
    assert (result.observation, result.error_code, result.error_message, result.step_id) == (
        None,
        None,
        None,
        None,
    )
    state = StepStateEvent(step_id="build", status="ready")
    assert (state.reason, state.attempt, state.output) == ("", 0, None)
    opened = InteractionOpenedEvent(interaction_id="int_1", kind="ask_user", prompt="Which day?")
    assert (opened.tool, opened.step_id) == (None, None)


def test_nested_models_are_validated_from_plain_data() -> None:
    plan = PlanEvent.model_validate({"steps": [{"content": "look", "done_when": "seen"}]})
    assert plan.steps == [PlanEventStep(content="look", done_when="seen")]
    opened = InteractionOpenedEvent.model_validate(
        {
            "interaction_id": "int_1",
            "kind": "confirm",
            "prompt": "Place it?",
            "tool": {"name": "place", "arguments": {"slot": 3}, "arguments_digest": "d"},
        }
    )
    assert opened.tool == InteractionTool(name="place", arguments={"slot": 3}, arguments_digest="d")
