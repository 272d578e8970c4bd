"""The protocol's models: pairing rules enforced on construction, receipts, round validation, digests."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from plangate.decisions import (
    AbortIntent,
    Decision,
    RoundValidation,
    ToolCallIntent,
    digest_arguments,
    protocol_violation,
)

CALL = ToolCallIntent(name="get_overview", arguments={"day": 1})
ABORT = AbortIntent(code="out_of_scope", user_message="I can only plan your week.")


@pytest.mark.parametrize(
    ("action", "tool_call", "abort"),
    [
        ("continue", None, None),
        ("continue", CALL, None),
        ("ask_user", None, None),
        ("confirm", CALL, None),
        ("next_plan", None, None),
        ("done", None, None),
        ("abort", None, ABORT),
    ],
)
def test_allowed_pairings_build(
    action: str, tool_call: ToolCallIntent | None, abort: AbortIntent | None
) -> None:
    decision = Decision.model_validate({"action": action, "tool_call": tool_call, "abort": abort})
    assert decision.action == action
    assert decision.tool_call == tool_call
    assert decision.abort == abort


@pytest.mark.parametrize(
    ("action", "tool_call", "abort", "message"),
    [
        ("continue", None, ABORT, "abort: not allowed when action is 'continue'"),
        ("ask_user", CALL, None, "tool_call: not allowed when action is 'ask_user'"),
        ("ask_user", None, ABORT, "abort: not allowed when action is 'ask_user'"),
        ("confirm", None, None, "tool_call: required when action is 'confirm'"),
        ("confirm", CALL, ABORT, "abort: not allowed when action is 'confirm'"),
        ("next_plan", CALL, None, "tool_call: not allowed when action is 'next_plan'"),
        ("done", None, ABORT, "abort: not allowed when action is 'done'"),
        ("abort", None, None, "abort: required when action is 'abort'"),
        ("abort", CALL, ABORT, "tool_call: not allowed when action is 'abort'"),
    ],
)
def test_forbidden_pairings_do_not_build(
    action: str, tool_call: ToolCallIntent | None, abort: AbortIntent | None, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Decision.model_validate({"action": action, "tool_call": tool_call, "abort": abort})


def test_protocol_violation_returns_field_and_reason() -> None:
    assert protocol_violation("confirm", has_tool_call=False, has_abort=False) == (
        "tool_call",
        "required when action is 'confirm'",
    )
    assert protocol_violation("continue", has_tool_call=True, has_abort=False) is None


def test_unknown_action_does_not_build() -> None:
    with pytest.raises(ValidationError):
        Decision.model_validate({"action": "finish"})


def test_abort_needs_a_non_blank_user_message() -> None:
    with pytest.raises(ValidationError):
        AbortIntent(user_message="   ")


def test_decision_round_trips_through_json() -> None:
    decision = Decision(action="confirm", speak="Placing it.", tool_call=CALL)
    assert Decision.model_validate_json(decision.model_dump_json()) == decision


def test_round_validation_passes_only_when_all_three_pass() -> None:
    assert RoundValidation().passed
    assert RoundValidation().failure is None
    failed = RoundValidation(
        evidence_passed=False,
        evidence_reason="step 2 has no evidence yet: call a tool or ask the user",
        safety_passed=False,
        safety_reason="stalled",
    )
    assert not failed.passed
    assert failed.failure == "step 2 has no evidence yet: call a tool or ask the user"
    assert not RoundValidation(flow_passed=False, flow_reason="no current step").passed


def test_digest_ignores_key_order_and_sees_values() -> None:
    assert digest_arguments({"a": 1, "b": [1, 2]}) == digest_arguments({"b": [1, 2], "a": 1})
    assert digest_arguments({"a": 1}) != digest_arguments({"a": 2})
    assert digest_arguments({}).startswith("sha256:")
