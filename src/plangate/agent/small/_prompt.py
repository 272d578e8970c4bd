"""The execute prompt's fixed part for small models: short rules, tool signatures, one worked example.

For: the text of the system message an execute round sends in the compact prompt style (``_style.py``),
that of a model that asks for compact prompts (``plangate.models.wants_compact_prompts``; the local default,
SmolLM2-135M, does). Such a model loses the thread in the full rules and the tools' JSON schemas, and it
copies what it is shown more than it follows what it is told. So it gets, in a few hundred tokens: the
decision forms it may write (as the terse grammar of the local model writes them), one line per tool (its
signature, whether it writes, what it does and what its parameters take), and one worked example of a
round, built from the run's own tools: a call to the tool the goal names (else the first tool that writes,
else the first tool), with each argument shown as the place where a value copied from the request goes.
Not for: the layout of the whole prompt (``_style.py``), or the history and the state message
(``plangate.agent._context``), which are the same for every model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from plangate.agent._context import Entry

_RULES = """\
You do the user's request with tools. Each round, write one JSON decision. The runtime runs the tool and \
shows you its observation in the next round.
Call a tool: {"action":"continue","tool_call":{"name":"TOOL","arguments":{...}}}
Copy the arguments' values (ids, names, days, times) from the request. A tool marked "write" asks the user \
first."""

_DONE = 'When the request is done, answer: {"action":"done","speak":"ANSWER"}'

_GOAL = "The runtime checks the goal after every tool call and ends the run itself once it holds."

_OTHERS = """\
Ask the user: {"action":"ask_user","speak":"QUESTION"}
Stop when it cannot be done: {"action":"abort","abort":{"user_message":"WHY"}}"""


def _parameters(entry: Entry) -> tuple[dict[str, Mapping[str, JsonValue]], list[str]]:
    parameters = entry.get("parameters")
    if not isinstance(parameters, Mapping):
        return {}, []
    properties = parameters.get("properties")
    required = parameters.get("required")
    found: dict[str, Mapping[str, JsonValue]] = {
        str(name): schema
        for name, schema in (properties.items() if isinstance(properties, Mapping) else ())
        if isinstance(schema, Mapping)
    }
    return found, [str(name) for name in required] if isinstance(required, list) else []


def _first_sentence(text: str) -> str:
    line = " ".join(text.split())
    end = line.find(". ")
    return line if end < 0 else line[: end + 1]


def signature(entry: Entry) -> str:
    """``place(task, day, slot) write: Put an unplaced task on the calendar. task: the task's id. …``"""
    properties, required = _parameters(entry)
    names = ", ".join(name if name in required else f"{name}?" for name in properties)
    effect = " write" if entry.get("effect") == "write" else ""
    about = _first_sentence(str(entry.get("description") or ""))
    details = [
        f"{name}: {' '.join(str(schema['description']).split())}"
        for name, schema in properties.items()
        if isinstance(schema.get("description"), str)
    ]
    return " ".join(part for part in (f"- {entry.get('name')}({names}){effect}:", about, *details) if part)


def _placeholder(name: str, schema: Mapping[str, JsonValue]) -> JsonValue:
    """An argument's value in the worked example: the schema's own example or default, else its name."""
    for key in ("examples", "enum"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if schema.get("default") is not None:
        return schema["default"]
    return name.upper()


def _example_tool(entries: Sequence[Entry], goal_tools: Sequence[str]) -> Entry | None:
    by_name = {str(entry.get("name")): entry for entry in entries}
    for name in goal_tools:
        if name in by_name:
            return by_name[name]
    writes = [entry for entry in entries if entry.get("effect") == "write"]
    candidates = writes or list(entries)
    return candidates[0] if candidates else None


def worked_example(entries: Sequence[Entry], goal_tools: Sequence[str] = ()) -> str:
    """One round of the protocol with one of ``entries``: the tool ``goal_tools`` names first, else the
    first tool that writes, else the first tool; "" with no tools."""
    entry = _example_tool(entries, goal_tools)
    if entry is None:
        return ""
    properties, required = _parameters(entry)
    arguments = {name: _placeholder(name, properties[name]) for name in required or properties}
    decision = {"action": "continue", "tool_call": {"name": entry.get("name"), "arguments": arguments}}
    about = _first_sentence(str(entry.get("description") or "")).rstrip(".") or f"Use {entry.get('name')}"
    values = ", ".join(f"{name} {value}" for name, value in arguments.items())
    request = f"{about[0].lower()}{about[1:]}" + (f", {values}" if values else "")
    return f"Example. Request: {request}.\nRound 1: {json.dumps(decision, separators=(',', ':'))}"


def small_rules(*, goal: bool, tools: bool) -> str:
    """The rules: the decision forms, ``done`` only for a run without a goal the runtime checks."""
    parts = [_RULES if tools else _RULES.split("\n", 1)[0]]
    parts.append(_GOAL if goal else _DONE)
    parts.append(_OTHERS)
    return "\n".join(parts)


def small_catalogue(entries: Sequence[Entry], goal_tools: Sequence[str] = ()) -> str:
    """The tools as one signature each, then the worked example."""
    if not entries:
        return ""
    lines = "\n".join(signature(entry) for entry in entries)
    example = worked_example(entries, goal_tools)
    return f"Tools:\n{lines}\n\n{example}" if example else f"Tools:\n{lines}"


__all__ = ["Entry", "signature", "small_catalogue", "small_rules", "worked_example"]
