"""Tolerant decoding of model outputs: decoded JSON (or JSON text) into decisions, routes and plans.

Models drift in recoverable ways; these rules recover, and never guess (SPEC §3):

- a field written as ``""``, whitespace or ``null`` is absent, and so is an empty object where an optional
  object (``tool_call``, ``abort``, ``context_hook``) is expected;
- ``goal_check`` written as an object is flattened to one line (``flatten_goal_check``);
- ``tool_call.parameters`` is accepted when ``arguments`` is absent;
- a non-empty string where an object is required is an error, never silently dropped;
- text fields are trimmed (tool arguments are passed on untouched); numbers where text is expected are kept
  as their JSON text; ``action`` and ``route`` are matched without regard to case;
- keys the protocol does not know are ignored; absent items of ``plan_steps`` are skipped, and a lone
  string for ``context_hook.packs`` is a list of one (nothing is lost either way);
- text holding a lone surrogate (smuggled in by a JSON escape) is an error: nothing downstream can encode it;
- JSON nested deeper than ``MAX_DEPTH``, ``NaN`` / ``Infinity``, a number out of a float's range and a key
  written twice in one object are errors (``_json``), never a crash further on.

What it is for: turning what a model wrote into a valid ``Decision`` / ``RouteDecision`` / ``PlanOutput``
or one ``DecisionParseError`` that names the field. What it is not for: the tagged stream format
(``tagged``) or judging a decision against the run's state (the agent runtime).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

from pydantic import BaseModel, ValidationError

from plangate._json import Encoder, json_type
from plangate.decisions._json import check_value, load_object
from plangate.decisions.errors import DecisionParseError
from plangate.decisions.outputs import (
    PLAN_ACTIONS,
    ROUTES,
    ContextHook,
    PlanAction,
    PlanOutput,
    PlanStep,
    Route,
    RouteDecision,
    plan_violation,
)
from plangate.decisions.protocol import (
    ACTIONS,
    AbortIntent,
    Action,
    Decision,
    ToolCallIntent,
    protocol_violation,
)

# one encoder each, for the paths of every decision (``json.dumps`` makes one per call with options)
_UNICODE = Encoder()
_SORTED = Encoder(sort_keys=True)

M = TypeVar("M", bound=BaseModel)

# The goal check's keys that lead the flattened line, in this order.
_GOAL_FIRST = ("done_when", "evidence")


def _absent(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _text(value: object, field: str) -> str | None:
    """A trimmed text field, or ``None`` when absent."""
    if _absent(value):
        return None
    if isinstance(value, str):
        _check_unicode(value, field)
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)
    raise DecisionParseError(field, f"expected a string, got {json_type(value, article=True)}")


def _check_unicode(text: str, field: str) -> None:
    # JSON escapes can smuggle in lone surrogates, which no store or wire can encode later.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DecisionParseError(field, f"invalid text: a lone surrogate at character {exc.start}") from None


def _required_text(value: object, field: str) -> str:
    text = _text(value, field)
    if text is None:
        raise DecisionParseError(field, "required, a non-empty string")
    return text


def _object(value: object, field: str) -> Mapping[str, object] | None:
    """An optional object field, or ``None`` when absent (``""``, ``null`` or ``{}``)."""
    if _absent(value):
        return None
    if not isinstance(value, dict):
        raise DecisionParseError(field, f"expected an object, got {json_type(value, article=True)}")
    return value or None


def _choice(value: object, field: str, allowed: Sequence[str]) -> str:
    text = _text(value, field)
    expected = ", ".join(allowed)
    if text is None:
        raise DecisionParseError(field, f"required, one of {expected}")
    if text.lower() not in allowed:
        raise DecisionParseError(field, f"expected one of {expected}, got {text!r}")
    return text.lower()


def _build(cls: type[M], data: Mapping[str, object], path: str = "") -> M:
    """Build a model from decoded fields; a rule the decoder missed still surfaces as a parse error."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        field = ".".join(part for part in (path, location) if part) or cls.__name__
        message = first["msg"].removeprefix("Value error, ")
        raise DecisionParseError(field, message[:1].lower() + message[1:]) from None


def _scalar_text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return ", ".join(part for part in (_scalar_text(item) for item in value) if part)
    return _SORTED.encode(value)


def flatten_goal_check(value: object, field: str = "goal_check") -> str | None:
    """Flatten a goal check to one line; ``None`` when it is absent.

    An object becomes ``satisfied done_when: …; evidence: …; key=value; …``: ``done_when`` and ``evidence``
    first, the other keys sorted, arrays joined with ``, ``, absent values dropped. A boolean ``satisfied``
    key sets the leading word (``not satisfied`` when false) instead of becoming a pair. An array becomes its
    items joined with ``; ``.

    Raises:
        DecisionParseError: when the value is neither text, a number, an array nor an object, or nests
            deeper than ``MAX_DEPTH``.
    """
    check_value(value, field)
    if isinstance(value, list):
        joined = "; ".join(part for part in (_scalar_text(item) for item in value) if part)
        _check_unicode(joined, field)
        return joined or None
    if not isinstance(value, dict):
        return _text(value, field)
    fields = {key: item for key, item in value.items() if not _absent(item) and item != [] and item != {}}
    verdict = "satisfied"
    satisfied = fields.pop("satisfied", None)
    if satisfied is False:
        verdict = "not satisfied"
    elif satisfied is not None and satisfied is not True:
        fields["satisfied"] = satisfied
    if not fields:
        return None
    parts = [f"{key}: {_scalar_text(fields.pop(key))}" for key in _GOAL_FIRST if key in fields]
    parts += [f"{key}={_scalar_text(fields[key])}" for key in sorted(fields)]
    line = f"{verdict} " + "; ".join(parts)
    _check_unicode(line, field)
    return line


def _tool_call(value: object) -> ToolCallIntent | None:
    raw = _object(value, "tool_call")
    if raw is None:
        return None
    name = _required_text(raw.get("name"), "tool_call.name")
    field = "tool_call.arguments"
    arguments = raw.get("arguments")
    if _absent(arguments) and "parameters" in raw:
        field, arguments = "tool_call.parameters", raw.get("parameters")
    if _absent(arguments):
        arguments = {}
    if not isinstance(arguments, dict):
        raise DecisionParseError(field, f"expected an object, got {json_type(arguments, article=True)}")
    _check_unicode(_UNICODE.encode(arguments), field)
    return _build(ToolCallIntent, {"name": name, "arguments": arguments}, "tool_call")


def _abort(value: object) -> AbortIntent | None:
    raw = _object(value, "abort")
    if raw is None:
        return None
    data = {
        "code": _text(raw.get("code"), "abort.code"),
        "user_message": _required_text(raw.get("user_message"), "abort.user_message"),
        "internal_reason": _text(raw.get("internal_reason"), "abort.internal_reason"),
    }
    return _build(AbortIntent, data, "abort")


def _top(value: object, what: str) -> Mapping[str, object]:
    # Values may come decoded from elsewhere than ``load_object``: the limits hold for them too.
    check_value(value, what)
    if not isinstance(value, dict):
        raise DecisionParseError(what, f"expected a JSON object, got {json_type(value, article=True)}")
    return value


def decode_decision(value: object) -> Decision:
    """Decode a decision from decoded JSON, applying every tolerant rule.

    Args:
        value: what ``json.loads`` returned for the model's decision.

    Raises:
        DecisionParseError: naming the field and the reason, usable verbatim as a correction.
    """
    return _decision(_top(value, "decision"))


def _decision(raw: Mapping[str, object]) -> Decision:
    """``decode_decision`` of an object already checked (``_top``, ``load_object``)."""
    action = cast(Action, _choice(raw.get("action"), "action", ACTIONS))
    tool_call = _tool_call(raw.get("tool_call"))
    abort = _abort(raw.get("abort"))
    broken = protocol_violation(action, has_tool_call=tool_call is not None, has_abort=abort is not None)
    if broken is not None:
        raise DecisionParseError(*broken)
    data = {
        "action": action,
        "speak": _text(raw.get("speak"), "speak"),
        "reason": _text(raw.get("reason"), "reason"),
        "goal_check": flatten_goal_check(raw.get("goal_check")),
        "tool_call": tool_call,
        "abort": abort,
    }
    return _build(Decision, data)


def decode_route(value: object) -> RouteDecision:
    """Decode the route phase's output (``{route, reply?}``) from decoded JSON.

    Raises:
        DecisionParseError: naming the field and the reason.
    """
    return _route(_top(value, "route"))


def _route(raw: Mapping[str, object]) -> RouteDecision:
    """``decode_route`` of an object already checked."""
    route = cast(Route, _choice(raw.get("route"), "route", ROUTES))
    return _build(RouteDecision, {"route": route, "reply": _text(raw.get("reply"), "reply")})


def _plan_steps(value: object) -> list[PlanStep]:
    if _absent(value):
        return []
    if not isinstance(value, list):
        raise DecisionParseError("plan_steps", f"expected an array, got {json_type(value, article=True)}")
    steps: list[PlanStep] = []
    for index, item in enumerate(value):
        path = f"plan_steps[{index}]"
        if _absent(item):
            continue
        if not isinstance(item, dict):
            raise DecisionParseError(path, f"expected an object, got {json_type(item, article=True)}")
        data = {
            "content": _required_text(item.get("content"), f"{path}.content"),
            "done_when": _text(item.get("done_when"), f"{path}.done_when"),
        }
        steps.append(_build(PlanStep, data, path))
    return steps


def _context_hook(value: object) -> ContextHook | None:
    raw = _object(value, "context_hook")
    if raw is None:
        return None
    packs_raw = raw.get("packs")
    if _absent(packs_raw):
        packs_raw = []
    # A lone pack name loses nothing when read as a list of one.
    if isinstance(packs_raw, str):
        packs_raw = [packs_raw]
    if not isinstance(packs_raw, list):
        reason = f"expected an array of strings, got {json_type(packs_raw, article=True)}"
        raise DecisionParseError("context_hook.packs", reason)
    packs = [
        text
        for index, item in enumerate(packs_raw)
        if (text := _text(item, f"context_hook.packs[{index}]")) is not None
    ]
    domain = _required_text(raw.get("domain"), "context_hook.domain")
    return _build(ContextHook, {"domain": domain, "packs": packs}, "context_hook")


def decode_plan(value: object) -> PlanOutput:
    """Decode the planner's output from decoded JSON, with the same tolerant rules as decisions.

    Raises:
        DecisionParseError: naming the field and the reason.
    """
    return _plan(_top(value, "plan"))


def _plan(raw: Mapping[str, object]) -> PlanOutput:
    """``decode_plan`` of an object already checked."""
    action = cast(PlanAction, _choice(raw.get("action"), "action", PLAN_ACTIONS))
    steps = _plan_steps(raw.get("plan_steps"))
    question = _text(raw.get("question"), "question")
    broken = plan_violation(action, has_steps=bool(steps), has_question=question is not None)
    if broken is not None:
        raise DecisionParseError(*broken)
    data = {
        "action": action,
        "reason": _text(raw.get("reason"), "reason"),
        "plan_steps": steps,
        "context_hook": _context_hook(raw.get("context_hook")),
        "question": question,
    }
    return _build(PlanOutput, data)


def parse_decision_json(text: str) -> Decision:
    """Parse a decision written on the json wire (code fences and text around the object tolerated).

    Raises:
        DecisionParseError: the text holds no usable JSON object, or the object is not a valid decision.
    """
    return _decision(load_object(text, "decision"))


def parse_route_json(text: str) -> RouteDecision:
    """Parse the route phase's output.

    Raises:
        DecisionParseError: the text holds no usable route.
    """
    return _route(load_object(text, "route"))


def try_parse_route(text: str) -> RouteDecision | None:
    """Parse the route phase's output, or ``None`` when it is unusable (the runtime then routes to ``plan``).

    The object is looked for anywhere in the text, so a tagged output (``<decision>{…}</decision>…``) works
    as well as a json one.
    """
    try:
        return parse_route_json(text)
    except DecisionParseError:
        return None


def parse_plan_json(text: str) -> PlanOutput:
    """Parse the planner's output.

    Raises:
        DecisionParseError: the text holds no usable plan.
    """
    return _plan(load_object(text, "plan"))


__all__ = [
    "decode_decision",
    "decode_plan",
    "decode_route",
    "flatten_goal_check",
    "parse_decision_json",
    "parse_plan_json",
    "parse_route_json",
    "try_parse_route",
]
