"""The decision protocol: what a model declares each round, how its text is read, and what is recorded.

What it is for: the protocol's data (``Decision``, ``ToolCallIntent``, ``AbortIntent``, ``RoundValidation``;
the route and plan outputs), tolerant decoding of model text on the two wire formats
(json: ``parse_decision_json``; tagged: ``TaggedStreamParser``), and the JSON schemas a provider is asked to
follow. What it is not for: acting on a decision or judging it against a run's state; that is the agent
runtime's job, and this package imports nothing above the foundations.

Layout: ``protocol`` (the execute decision and the records), ``outputs`` (route and plan), ``decode``
(tolerant decoding, json wire), ``tagged`` (the streaming tagged wire), ``schema`` (wire schemas),
``errors`` (``DecisionParseError``).
"""

from __future__ import annotations

from plangate.decisions._json import MAX_DEPTH
from plangate.decisions._json import loads as load_json
from plangate.decisions.decode import (
    decode_decision,
    decode_plan,
    decode_route,
    flatten_goal_check,
    parse_decision_json,
    parse_plan_json,
    parse_route_json,
    try_parse_route,
)
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
)
from plangate.decisions.protocol import (
    ACTIONS,
    AbortIntent,
    Action,
    Decision,
    RoundValidation,
    ToolCallIntent,
    digest_arguments,
    protocol_violation,
)
from plangate.decisions.schema import (
    JsonSchema,
    decision_json_schema,
    is_closed_schema,
    model_json_schema,
    plan_json_schema,
    route_json_schema,
)
from plangate.decisions.tagged import (
    PLAIN_REPLY_WINDOW,
    TaggedResult,
    TaggedStreamParser,
    parse_tagged,
)

__all__ = [
    "ACTIONS",
    "MAX_DEPTH",
    "PLAIN_REPLY_WINDOW",
    "PLAN_ACTIONS",
    "ROUTES",
    "AbortIntent",
    "Action",
    "ContextHook",
    "Decision",
    "DecisionParseError",
    "JsonSchema",
    "PlanAction",
    "PlanOutput",
    "PlanStep",
    "RoundValidation",
    "Route",
    "RouteDecision",
    "TaggedResult",
    "TaggedStreamParser",
    "ToolCallIntent",
    "decision_json_schema",
    "decode_decision",
    "decode_plan",
    "decode_route",
    "digest_arguments",
    "flatten_goal_check",
    "is_closed_schema",
    "load_json",
    "model_json_schema",
    "parse_decision_json",
    "parse_plan_json",
    "parse_route_json",
    "parse_tagged",
    "plan_json_schema",
    "protocol_violation",
    "route_json_schema",
    "try_parse_route",
]
