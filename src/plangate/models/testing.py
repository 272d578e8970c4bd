"""Test doubles that need no hand-written protocol JSON: ``TestModel`` and ``FunctionModel``.

For: testing an agent's tools, consent and typed output without a model, a network or a script of
decisions, as PydanticAI's ``TestModel`` / ``FunctionModel`` do. ``TestModel`` derives every answer from the
request: it routes to acting, plans one step, calls each offered tool once with arguments built from the
tool's JSON schema (``arguments_for``), then declares ``done`` with its evidence (an answer that fits the
run's ``output_type`` when it has one). ``FunctionModel`` computes each answer with a function of the
request. Both are test doubles, named as such; neither calls anything outside the process. Not for: judging
what a real model would do, or replaying recorded answers (``ScriptedModel``).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.models.base import ModelChunk, ModelRequest, TextDelta, Usage, Wire

ModelFunction = Callable[[ModelRequest], str | Awaitable[str]]
"""What ``FunctionModel`` calls: the request in, the model's answer (text, on the request's wire) out."""


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


async def _answer(text: str, request: ModelRequest) -> AsyncIterator[ModelChunk]:
    if text:
        yield TextDelta(text)
    prompt = sum(_tokens(message.content) for message in request.messages)
    yield Usage(input_tokens=prompt, output_tokens=_tokens(text))


class FunctionModel:
    """A test double whose every answer is ``function(request)`` (a plain or an ``async`` function).

    Args:
        function: computes the answer from the ``ModelRequest`` (its ``purpose``, ``messages``,
            ``tool_names``, ``tool_parameters``, ``output_schema``, ...), written on ``wire``.
        wire: ``json`` (the default) or ``tagged``.
        name: the model's name as runs record it (default ``function:<the function's name>``).

    Example::

        def reply(request: ModelRequest) -> str:
            if request.purpose == "route":
                return '{"route": "reply", "reply": "Hello"}'
            return ""

        agent = Agent(model=FunctionModel(reply), store="sqlite:///:memory:")
    """

    def __init__(self, function: ModelFunction, *, wire: Wire = "json", name: str | None = None) -> None:
        if not callable(function):
            raise ConfigError(f"FunctionModel: expected a function of the request; found {function!r}")
        if wire not in ("json", "tagged"):
            raise ConfigError(f"FunctionModel wire: expected 'json' or 'tagged', got {wire!r}")
        self.function = function
        self.wire: Wire = wire
        self.name = name or f"function:{getattr(function, '__name__', 'function')}"
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the function's answer to ``request``."""
        self.requests.append(request)
        answer = self.function(request)
        text = await answer if inspect.isawaitable(answer) else answer
        if not isinstance(text, str):
            raise ConfigError(
                f"FunctionModel {self.name}: expected the function to return text; got {text!r}"
            )
        async for chunk in _answer(text, request):
            yield chunk


class TestModel:
    """A test double that answers every request from its schemas, with no protocol JSON written by hand.

    Routing: it acts (``execute``). Planning: one step. Each execute round: the next offered tool it has not
    called yet in the run (it reads the ``call: <tool>`` lines of the conversation, so it goes on where a
    resumed run is), with arguments built from the tool's parameter schema; then ``done``, with a
    ``goal_check`` and, as its answer, ``output`` or one built from the run's ``output_schema``. The closing
    summary names the tools it called.

    Args:
        call_tools: ``"all"`` (every offered tool, in the order offered) or the names of the tools to call.
        output: the final answer: text, or a JSON value sent as JSON (an object for an ``output_type``);
            None: built from the output schema, else ``"done"``.
        name: the model's name as runs record it.

    Attributes:
        requests: every request, in order (for assertions).
    """

    __test__ = False  # not a pytest test class, whatever its name
    wire: Wire = "json"

    def __init__(
        self,
        *,
        call_tools: Sequence[str] | str = "all",
        output: JsonValue = None,
        name: str = "test",
    ) -> None:
        if isinstance(call_tools, str) and call_tools != "all":
            raise ConfigError(
                f"TestModel call_tools: expected 'all' or a list of names; found {call_tools!r}"
            )
        self.call_tools = call_tools
        self.output = output
        self.name = name
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the answer this request calls for."""
        self.requests.append(request)
        async for chunk in _answer(self.answer(request), request):
            yield chunk

    def answer(self, request: ModelRequest) -> str:
        """The answer to ``request``, as text on the json wire."""
        if request.purpose == "route":
            return json.dumps({"route": "execute"})
        if request.purpose == "plan":
            step = {"content": "Call the tools and answer from what they return.", "done_when": "answered"}
            return json.dumps({"action": "plan_done", "plan_steps": [step]})
        if request.purpose == "execute":
            return json.dumps(self._decision(request))
        if request.purpose == "deliver":
            text = "\n".join(message.content for message in request.messages)
            called = list(dict.fromkeys(re.findall(r"^call: (\S+)", text, re.MULTILINE)))
            return f"Done; called {', '.join(called)}." if called else "Done."
        return ""

    def _decision(self, request: ModelRequest) -> dict[str, Any]:
        offered = list(request.tool_names or ())
        wanted = offered if self.call_tools == "all" else [n for n in offered if n in self.call_tools]
        called = set(_called(request, wanted))
        parameters = request.tool_parameters or {}
        for name in wanted:
            if name not in called:
                arguments = arguments_for(parameters.get(name, {"type": "object"}))
                return {"action": "continue", "tool_call": {"name": name, "arguments": arguments}}
        return {"action": "done", "speak": self._final(request), "goal_check": "each tool was called once"}

    def _final(self, request: ModelRequest) -> str:
        output = self.output
        if output is None and request.output_schema is not None:
            output = arguments_for(request.output_schema)
        if output is None:
            return "done"
        return output if isinstance(output, str) else json.dumps(output)


def _called(request: ModelRequest, names: Sequence[str]) -> list[str]:
    """The tools among ``names`` the conversation shows a call of (``call: <tool>`` lines)."""
    text = "\n".join(message.content for message in request.messages)
    return [name for name in names if f"call: {name} " in text or f"call: {name}\n" in text]


def arguments_for(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """A value that fits the JSON ``schema`` (its required properties only): the default or first enum value
    where there is one, else the smallest value of its type (``"a"``, 0, ``False``, a list of ``minItems``).

    For: arguments of a tool call, and a typed output, built from their schemas (``TestModel``).
    """
    defs = defs if defs is not None else schema.get("$defs", {})
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return arguments_for(defs.get(ref.removeprefix("#/$defs/"), {}), defs)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, ()) if o.get("type") != "null"] or schema.get(key, ())
        if options:
            return arguments_for(options[0], defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _smallest(kind, schema, defs)


def _smallest(kind: str, schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: arguments_for(properties[name], defs) for name in schema.get("required", ())}
    if kind == "array":
        items = schema.get("items", {})
        return [arguments_for(items, defs) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "a" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    return None


__all__ = ["FunctionModel", "ModelFunction", "TestModel", "arguments_for"]
