"""JSON schemas of the model outputs, derived from the pydantic models, for the json wire.

The schemas keep to the subset that constrained decoding understands everywhere (OpenAI structured outputs,
vLLM and llama.cpp grammars): ``type`` (a list with ``"null"`` for nullable fields), ``enum``, ``properties``
with every property ``required`` and ``additionalProperties: false``, ``items``, ``anyOf`` for a nullable
object, and ``description``. No ``$ref``, no defaults, no length or pattern keywords: the decoder enforces
those. The one open object is ``tool_call.arguments``, whose shape depends on the tool, so the decision
schema is not *strict* in OpenAI's sense (``is_closed_schema`` tells); route and plan schemas are.

What it is for: telling a provider what to generate. What it is not for: validating what came back (that is
``decode``, which is more tolerant than any schema).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from plangate.decisions.outputs import PlanOutput, RouteDecision
from plangate.decisions.protocol import Decision

JsonSchema = dict[str, object]
"""A JSON schema as a plain dictionary, ready for ``json.dumps``."""

# Inside this module the nested structure is walked freely; only ``JsonSchema`` leaves it.
_Node = dict[str, Any]

_SCALAR_KEYS = frozenset({"type", "enum", "description"})


def _simplify(node: Mapping[str, Any], defs: Mapping[str, Any]) -> _Node:
    """Rewrite one node of pydantic's schema into the portable subset (see the module docstring)."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _simplify(defs[ref.rsplit("/", 1)[-1]], defs)
        if "description" in node:
            target["description"] = node["description"]
        return target
    out: _Node = {}
    if "anyOf" in node:
        options = [_simplify(option, defs) for option in node["anyOf"]]
        out = _nullable(options)
    elif node.get("type") == "object":
        out["type"] = "object"
        properties = node.get("properties")
        if properties:
            out["properties"] = {name: _simplify(sub, defs) for name, sub in properties.items()}
            out["required"] = list(properties)
            out["additionalProperties"] = False
    elif node.get("type") == "array":
        out["type"] = "array"
        out["items"] = _simplify(node.get("items", {}), defs)
    else:
        out.update({key: node[key] for key in ("type", "enum") if key in node})
    # A model's own description is its class docstring, written for developers; fields' are for the model.
    if "description" in node and "properties" not in node:
        out["description"] = node["description"]
    return out


def _nullable(options: list[_Node]) -> _Node:
    """``anyOf [X, null]`` as ``type: [X, "null"]`` where X is a scalar; otherwise kept as ``anyOf``."""
    non_null = [option for option in options if option != {"type": "null"}]
    if len(options) == 2 and len(non_null) == 1:
        only = non_null[0]
        if set(only) <= _SCALAR_KEYS and isinstance(only.get("type"), str):
            merged = dict(only)
            merged["type"] = [only["type"], "null"]
            if "enum" in merged:
                merged["enum"] = [*merged["enum"], None]
            return merged
    return {"anyOf": options}


def model_json_schema(model: type[BaseModel]) -> JsonSchema:
    """The portable wire schema of a pydantic model (see the module docstring for the subset).

    Args:
        model: a model class such as ``Decision``.

    Returns:
        A fresh dictionary; callers may change it.
    """
    raw = model.model_json_schema()
    return _simplify(raw, raw.get("$defs", {}))


def decision_json_schema(
    tool_names: Iterable[str] | None = None, actions: Iterable[str] | None = None
) -> JsonSchema:
    """The schema of a ``Decision`` on the json wire.

    Args:
        tool_names: when given, ``tool_call.name`` is constrained to these names (sorted, deduplicated);
            with no names at all, ``tool_call`` can only be ``null``.
        actions: when given, the actions the decision may take (in protocol order), e.g. without
            ``next_plan`` when the run has no plan. The runtime validates the action either way.

    Returns:
        A fresh dictionary.
    """
    schema: _Node = model_json_schema(Decision)
    if actions is not None:
        allowed = set(actions)
        action = schema["properties"]["action"]
        action["enum"] = [value for value in action["enum"] if value in allowed]
    if tool_names is None:
        return schema
    names = sorted(set(tool_names))
    tool_call = schema["properties"]["tool_call"]
    if not names:
        schema["properties"]["tool_call"] = {"type": "null", "description": tool_call.get("description", "")}
        return schema
    for option in tool_call["anyOf"]:
        if option.get("type") == "object":
            name = option["properties"]["name"]
            option["properties"]["name"] = {**copy.deepcopy(name), "enum": names}
    return schema


def route_json_schema() -> JsonSchema:
    """The schema of a ``RouteDecision`` on the json wire."""
    return model_json_schema(RouteDecision)


def plan_json_schema() -> JsonSchema:
    """The schema of a ``PlanOutput`` on the json wire."""
    return model_json_schema(PlanOutput)


def is_closed_schema(schema: Mapping[str, object]) -> bool:
    """Whether every object in ``schema`` lists its properties, requires them all and allows no others.

    That is what OpenAI's ``strict: true`` structured outputs demand; a provider sends ``strict`` only for a
    closed schema.
    """
    node: Mapping[str, Any] = schema
    if node.get("type") in ("object", ["object", "null"]):
        properties = node.get("properties")
        if not properties or node.get("additionalProperties") is not False:
            return False
        if set(node.get("required", ())) != set(properties):
            return False
    children: list[Mapping[str, object]] = [*node.get("properties", {}).values(), *node.get("anyOf", ())]
    if isinstance(node.get("items"), Mapping):
        children.append(node["items"])
    return all(is_closed_schema(child) for child in children)


__all__ = [
    "JsonSchema",
    "decision_json_schema",
    "is_closed_schema",
    "model_json_schema",
    "plan_json_schema",
    "route_json_schema",
]
