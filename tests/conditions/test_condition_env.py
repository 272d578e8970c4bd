"""env.NAME: read only from the context, allow-listed by default, and never printed in a reason."""

from __future__ import annotations

import pytest
from condition_contexts import SECRET, pipeline

from plangate.conditions import ConditionContext, StepState, compile_condition, default_env, evaluate


def test_env_is_read_from_the_context_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert not evaluate("env.CI == 'true'", ConditionContext(env={})).satisfied
    assert evaluate("env.CI == 'yes'", ConditionContext(env={"CI": "yes"})).satisfied


def test_the_default_env_is_the_allow_listed_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANGATE_ENV_ALLOW", raising=False)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("HOME_TOKEN", "abc")
    assert default_env().keys() <= {"CI"}
    assert evaluate("env.CI == 'true'", ConditionContext()).satisfied
    assert evaluate("env.HOME_TOKEN", ConditionContext()).reason == "env.HOME_TOKEN is not set"

    monkeypatch.setenv("PLANGATE_ENV_ALLOW", " HOME_TOKEN , DEPLOY_TARGET,")
    assert default_env() == {"HOME_TOKEN": "abc"}
    assert evaluate("env.HOME_TOKEN == 'abc'", ConditionContext()).satisfied
    assert not evaluate("env.CI", ConditionContext()).satisfied


def test_no_reason_ever_contains_an_env_value() -> None:
    ctx = pipeline()
    steps = dict(ctx.steps)
    # A step output that happens to hold the same text must not be mistaken for a leak either.
    steps["holder"] = StepState("holder", "complete", {"note": "plain"})
    ctx = ConditionContext(steps, ctx.current_step, ctx.vars, ctx.env)
    expressions = [
        "env.TOKEN",
        "not env.TOKEN",
        "env.TOKEN == 'guess'",
        "env.TOKEN != 'guess'",
        f"env.TOKEN == '{SECRET}'",
        f"env.TOKEN != '{SECRET}'",
        f"'{SECRET}' == env.TOKEN",
        "env.TOKEN > 'a'",
        "env.TOKEN < 'a'",
        "env.TOKEN >= 3",
        "env.TOKEN == env.CI",
        "env.TOKEN == vars.environment",
        "vars.environment != env.TOKEN",
        "env.TOKEN == holder.output.note",
        "build.status == 'complete' and env.TOKEN == 'x'",
        "build.status == 'running' or env.TOKEN == 'x' or env.TOKEN",
        "not (env.TOKEN == 'x' and env.CI)",
        "(env.TOKEN == 'x') == false",
        f"children(tests).all(env.TOKEN == '{SECRET}')",
        f"children(tests).any(env.TOKEN != '{SECRET}')",
        f"children(tests).count(env.TOKEN == '{SECRET}') > 1",
        f"steps.count(env.TOKEN == '{SECRET}' and status == 'complete') >= 0",
        "unknown.status == env.TOKEN",
        "env.TOKEN and file.exists('x')",
    ]
    for expression in expressions:
        for result in (evaluate(expression, ctx), compile_condition(expression).explain(ctx)):
            assert SECRET not in result.reason, expression
            assert SECRET not in repr(result), expression
            assert "hunter2" not in result.reason, expression


def test_env_reasons_say_set_or_not_and_the_outcome() -> None:
    ctx = ConditionContext(env={"CI": "true", "EMPTY": ""})
    cases = {
        "env.CI == 'true'": "env.CI is set and equals the expected value",
        "env.CI == 'no'": "env.CI is set and does not equal the expected value",
        "env.CI != 'no'": "env.CI is set and does not equal the expected value",
        "env.NOPE == 'x'": "env.NOPE is not set",
        "env.EMPTY": "env.EMPTY is set but empty",
        "env.CI > 3": "type mismatch: env.CI (string) > the expected value (number)",
    }
    for expression, reason in cases.items():
        assert evaluate(expression, ctx).reason == reason


def test_an_env_value_echoed_through_another_comparison_is_hidden_everywhere() -> None:
    ctx = ConditionContext(
        {
            "s": StepState("s", "complete", {"x": SECRET, "note": f"token={SECRET};", "list": [SECRET]}),
        },
        env={"TOKEN": SECRET, "CI": "true"},
    )
    expressions = [
        f"s.output.x == '{SECRET}'",  # a literal equal to the value, compared with something else
        f"'{SECRET}' == 'z'",
        f"'{SECRET}' < 'a' and env.CI",
        "s.output.x == 'z'",  # a step output holding the value
        "s.output.note != 'z'",  # the value inside a longer text
        "s.output.list == 'z'",
        f"s.output.x > 3 or '{SECRET}' == s.output.x",
        f"children(s).count(status == '{SECRET}') > 0",
        f"file.exists('{SECRET}/x')",
    ]
    for expression in expressions:
        for result in (evaluate(expression, ctx), compile_condition(expression).explain(ctx)):
            assert SECRET not in result.reason, expression
            assert "***" in result.reason, expression
    # Nothing else is hidden: a boolean true is not the string 'true' of env.CI, and other text stays.
    assert evaluate("s.output.x == 'z'", ctx).reason == "s.output.x is '***', not 'z'"
    assert evaluate("s.status == 'complete'", ctx).reason == "s.status is 'complete'"
