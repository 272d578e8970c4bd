"""Tolerant decoding on the json wire: every rule of SPEC §3, and the exact corrections it produces."""

from __future__ import annotations

import json
import pickle

import pytest

from plangate.decisions import (
    ContextHook,
    Decision,
    DecisionParseError,
    PlanStep,
    ToolCallIntent,
    flatten_goal_check,
    parse_decision_json,
    parse_plan_json,
    parse_route_json,
    try_parse_route,
)
from plangate.errors import ModelBehaviorError


def parse(obj: object) -> Decision:
    return parse_decision_json(json.dumps(obj))


def parse_error(obj: object) -> str:
    with pytest.raises(DecisionParseError) as info:
        parse_decision_json(obj if isinstance(obj, str) else json.dumps(obj))
    return str(info.value)


# --- the basic shape ----------------------------------------------------------------------------------------


def test_a_full_decision_decodes() -> None:
    decision = parse(
        {
            "action": "confirm",
            "speak": "I'll move the gym session to Tuesday.",
            "reason": "user asked",
            "tool_call": {"name": "move", "arguments": {"task": "gym", "day": 2}},
        }
    )
    assert decision == Decision(
        action="confirm",
        speak="I'll move the gym session to Tuesday.",
        reason="user asked",
        tool_call=ToolCallIntent(name="move", arguments={"task": "gym", "day": 2}),
    )


def test_parse_error_is_a_model_behavior_error_with_field_and_reason() -> None:
    with pytest.raises(ModelBehaviorError) as info:
        parse({"action": "continue", "tool_call": "get_overview"})
    error = info.value
    assert isinstance(error, DecisionParseError)
    assert (error.field, error.reason) == ("tool_call", "expected an object, got a string")
    assert str(error) == "tool_call: expected an object, got a string"


def test_parse_error_survives_pickling() -> None:
    error = DecisionParseError("decision", "invalid JSON", position=4)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.reason, copy.position, str(copy)) == ("decision", "invalid JSON", 4, str(error))


# --- "" and null mean absent ------------------------------------------------------------------------------


@pytest.mark.parametrize("empty", ["", "   ", None])
def test_empty_and_null_fields_are_absent(empty: object) -> None:
    decision = parse(
        {
            "action": "done",
            "speak": empty,
            "reason": empty,
            "goal_check": empty,
            "tool_call": empty,
            "abort": empty,
        }
    )
    assert decision == Decision(action="done")


def test_empty_objects_for_optional_intents_are_absent() -> None:
    assert parse({"action": "ask_user", "tool_call": {}, "abort": {}}) == Decision(action="ask_user")


def test_strings_are_trimmed_and_action_case_is_ignored() -> None:
    decision = parse({"action": " Ask_User ", "speak": "  Which day?\n", "reason": "\tneed a day "})
    assert (decision.action, decision.speak, decision.reason) == ("ask_user", "Which day?", "need a day")


def test_tool_arguments_are_passed_on_untouched() -> None:
    decision = parse(
        {"action": "continue", "tool_call": {"name": " db_query ", "arguments": {"sql": " SELECT 1 "}}}
    )
    assert decision.tool_call == ToolCallIntent(name="db_query", arguments={"sql": " SELECT 1 "})


def test_numbers_where_text_is_expected_keep_their_json_text() -> None:
    decision = parse({"action": "abort", "abort": {"code": 404, "user_message": "Not found."}})
    assert decision.abort is not None
    assert decision.abort.code == "404"


def test_unknown_keys_are_ignored() -> None:
    assert parse({"action": "done", "confidence": 0.9}) == Decision(action="done")


# --- tool_call --------------------------------------------------------------------------------------------


def test_parameters_are_accepted_when_arguments_are_absent() -> None:
    decision = parse({"action": "continue", "tool_call": {"name": "place", "parameters": {"slot": 3}}})
    assert decision.tool_call == ToolCallIntent(name="place", arguments={"slot": 3})


def test_arguments_win_over_parameters() -> None:
    decision = parse(
        {
            "action": "continue",
            "tool_call": {"name": "place", "arguments": {"slot": 1}, "parameters": {"slot": 2}},
        }
    )
    assert decision.tool_call == ToolCallIntent(name="place", arguments={"slot": 1})


def test_missing_arguments_mean_no_arguments() -> None:
    decision = parse({"action": "continue", "tool_call": {"name": "get_overview"}})
    assert decision.tool_call == ToolCallIntent(name="get_overview", arguments={})


# --- the errors, each naming its field --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({}, "action: required, one of continue, ask_user, confirm, next_plan, done, abort"),
        ({"action": ""}, "action: required, one of continue, ask_user, confirm, next_plan, done, abort"),
        (
            {"action": "finish"},
            "action: expected one of continue, ask_user, confirm, next_plan, done, abort, got 'finish'",
        ),
        ({"action": ["done"]}, "action: expected a string, got an array"),
        ({"action": "continue", "tool_call": "place"}, "tool_call: expected an object, got a string"),
        ({"action": "continue", "tool_call": ["place"]}, "tool_call: expected an object, got an array"),
        (
            {"action": "continue", "tool_call": {"arguments": {"a": 1}}},
            "tool_call.name: required, a non-empty string",
        ),
        (
            {"action": "continue", "tool_call": {"name": True}},
            "tool_call.name: expected a string, got a boolean",
        ),
        (
            {"action": "continue", "tool_call": {"name": "place", "arguments": '{"slot": 3}'}},
            "tool_call.arguments: expected an object, got a string",
        ),
        (
            {"action": "continue", "tool_call": {"name": "place", "parameters": [3]}},
            "tool_call.parameters: expected an object, got an array",
        ),
        ({"action": "abort", "abort": "giving up"}, "abort: expected an object, got a string"),
        ({"action": "abort", "abort": {"code": "x"}}, "abort.user_message: required, a non-empty string"),
        (
            {"action": "abort", "abort": {"user_message": "  "}},
            "abort.user_message: required, a non-empty string",
        ),
        ({"action": "abort"}, "abort: required when action is 'abort' (with a non-empty user_message)"),
        ({"action": "confirm"}, "tool_call: required when action is 'confirm'"),
        (
            {"action": "done", "tool_call": {"name": "place"}},
            "tool_call: not allowed when action is 'done'",
        ),
        (
            {"action": "continue", "abort": {"user_message": "bye"}},
            "abort: not allowed when action is 'continue'",
        ),
        ({"action": "done", "speak": {"text": "hi"}}, "speak: expected a string, got an object"),
        ({"action": "done", "goal_check": True}, "goal_check: expected a string, got a boolean"),
        ([{"action": "done"}], "decision: expected a JSON object, got an array"),
        ("null", "decision: expected a JSON object, got null"),
    ],
)
def test_errors_name_the_field_and_the_reason(obj: object, message: str) -> None:
    assert parse_error(obj) == message


def test_lone_surrogates_are_parse_errors() -> None:
    assert parse_error('{"action": "done", "speak": "ok \\ud800"}') == (
        "speak: invalid text: a lone surrogate at character 3"
    )
    message = parse_error('{"action": "continue", "tool_call": {"name": "x", "arguments": {"q": "\\udc00"}}}')
    assert message.startswith("tool_call.arguments: invalid text: a lone surrogate")


# --- the text around the JSON -----------------------------------------------------------------------------


def test_code_fences_and_surrounding_text_are_tolerated() -> None:
    fenced = '```json\n{"action": "done", "speak": "All set."}\n```'
    assert parse_decision_json(fenced) == Decision(action="done", speak="All set.")
    chatty = 'Here you go: {"action": "done", "speak": "a } in a string"} hope it helps'
    assert parse_decision_json(chatty) == Decision(action="done", speak="a } in a string")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "decision: expected a JSON object, got an empty output"),
        ("```json\n```", "decision: expected a JSON object, got an empty output"),
        ("I will now finish.", "decision: expected a JSON object, found no '{'"),
        (
            '{"action": "done", "speak": "unfinish',
            "decision: the JSON object is not closed (the output ended early)",
        ),
        (
            '{"action": "done",}',
            "decision: invalid JSON at line 1 column 19: Expecting property name enclosed in double quotes",
        ),
        ("[" * 100_000 + "]" * 100_000, "decision: expected a JSON object, found no '{'"),
    ],
)
def test_unusable_text_is_a_parse_error(text: str, message: str) -> None:
    assert parse_error(text) == message


def test_invalid_json_error_carries_the_position() -> None:
    with pytest.raises(DecisionParseError) as info:
        parse_decision_json('noise {"action": "done",}')
    assert info.value.position == len('noise {"action": "done",')


def test_deeply_nested_json_is_a_parse_error() -> None:
    deep = "{" + '"a":{' * 100_000 + "}" * 100_001
    assert parse_error(deep) == "decision: the JSON nests deeper than 64 levels"


@pytest.mark.parametrize("depth", [65, 300])
def test_json_nested_past_the_limit_but_within_the_decoder_s_is_a_parse_error(depth: int) -> None:
    # decoded whole by json (no RecursionError), then refused by the depth limit
    nested = '{"action": "done", "reason": "x", "goal_check": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    assert parse_error(nested) == "decision: the JSON nests deeper than 64 levels"


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    decision = parse({"action": "done", "reason": "{[" * 100})
    assert decision.reason == "{[" * 100


# --- goal_check -------------------------------------------------------------------------------------------


def test_goal_check_object_is_flattened_with_done_when_and_evidence_first() -> None:
    decision = parse(
        {
            "action": "next_plan",
            "goal_check": {
                "zeta": "last",
                "evidence": "get_overview shows 3 free slots",
                "alpha": 1,
                "done_when": "free slots are known",
            },
        }
    )
    assert decision.goal_check == (
        "satisfied done_when: free slots are known; evidence: get_overview shows 3 free slots; "
        "alpha=1; zeta=last"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"done_when": "x", "evidence": ["a", " b ", ""]}, "satisfied done_when: x; evidence: a, b"),
        ({"satisfied": True, "evidence": "e"}, "satisfied evidence: e"),
        ({"satisfied": False, "evidence": "e"}, "not satisfied evidence: e"),
        ({"satisfied": "mostly", "evidence": "e"}, "satisfied evidence: e; satisfied=mostly"),
        ({"evidence": "e", "extra": {"k": [1, 2]}}, 'satisfied evidence: e; extra={"k": [1, 2]}'),
        ({"done_when": "", "evidence": None, "notes": []}, None),
        ({"satisfied": True}, None),
        (["overview read", "3 slots free"], "overview read; 3 slots free"),
        ([], None),
        ("  plain text  ", "plain text"),
        (3, "3"),
        (None, None),
    ],
)
def test_flatten_goal_check(value: object, expected: str | None) -> None:
    assert flatten_goal_check(value) == expected


# --- route ------------------------------------------------------------------------------------------------


def test_route_decodes_and_unusable_routes_give_none() -> None:
    route = parse_route_json('{"route": " Reply ", "reply": " Hi! "}')
    assert (route.route, route.reply) == ("reply", "Hi!")
    assert parse_route_json('{"route": "plan", "reply": ""}').reply is None
    assert try_parse_route('<decision>{"route": "execute"}</decision>') is not None
    assert try_parse_route("I think we should plan.") is None
    assert try_parse_route('{"route": "think"}') is None
    with pytest.raises(DecisionParseError) as info:
        parse_route_json('{"route": "think"}')
    assert str(info.value) == "route: expected one of reply, plan, execute, got 'think'"


# --- plan -------------------------------------------------------------------------------------------------


def test_plan_decodes_with_the_same_tolerance() -> None:
    plan = parse_plan_json(
        json.dumps(
            {
                "action": "plan_done",
                "reason": " two steps ",
                "plan_steps": [
                    {"content": " Read the week ", "done_when": "overview read"},
                    None,
                    {"content": "Place the gym session", "done_when": ""},
                ],
                "context_hook": {"domain": "schedule", "packs": "core"},
                "question": "",
            }
        )
    )
    assert plan.reason == "two steps"
    assert plan.plan_steps == [
        PlanStep(content="Read the week", done_when="overview read"),
        PlanStep(content="Place the gym session"),
    ]
    assert plan.context_hook == ContextHook(domain="schedule", packs=["core"])
    assert plan.question is None


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"action": "plan_done"}, "plan_steps: at least one step is required when action is 'plan_done'"),
        ({"action": "ask_user"}, "question: required when action is 'ask_user'"),
        (
            {"action": "continue", "plan_steps": "read, then place"},
            "plan_steps: expected an array, got a string",
        ),
        (
            {"action": "continue", "plan_steps": ["read the week"]},
            "plan_steps[0]: expected an object, got a string",
        ),
        (
            {"action": "continue", "plan_steps": [{"content": "a"}, {"done_when": "b"}]},
            "plan_steps[1].content: required, a non-empty string",
        ),
        (
            {"action": "continue", "context_hook": "schedule"},
            "context_hook: expected an object, got a string",
        ),
        (
            {"action": "continue", "context_hook": {"packs": ["core"]}},
            "context_hook.domain: required, a non-empty string",
        ),
        (
            {"action": "continue", "context_hook": {"domain": "s", "packs": {"core": 1}}},
            "context_hook.packs: expected an array of strings, got an object",
        ),
        (
            {"action": "continue", "context_hook": {"domain": "s", "packs": [["core"]]}},
            "context_hook.packs[0]: expected a string, got an array",
        ),
        ({"action": "execute"}, "action: expected one of continue, ask_user, plan_done, got 'execute'"),
        ("[]", "plan: expected a JSON object, got an array"),
    ],
)
def test_plan_errors_name_the_field(obj: object, message: str) -> None:
    with pytest.raises(DecisionParseError) as info:
        parse_plan_json(obj if isinstance(obj, str) else json.dumps(obj))
    assert str(info.value) == message
