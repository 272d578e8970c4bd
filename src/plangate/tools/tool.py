"""A tool definition (:class:`Tool`) and the ``@tool`` decorator that builds one from a typed function.

A ``Tool`` knows its schema, validates arguments and runs its function, turning every outcome into a
:class:`~plangate.tools.result.ToolResult`. Which tools exist, which are active in a run and which need
consent is decided elsewhere (``registry.py``, ``toolset.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pydantic import BaseModel, JsonValue, ValidationError

from plangate.tools._schema import derive_schema
from plangate.tools._validation import (
    apply_defaults,
    check_json_schema,
    describe_value,
    issues_from_pydantic,
)
from plangate.tools.context import run_context
from plangate.tools.errors import ArgumentIssue, ToolArgumentsError, ToolDefinitionError
from plangate.tools.result import ToolResult, result_from_value

Effect = Literal["read", "write"]
Reconciler = Callable[[str], ToolResult | None]
"""Given an idempotency key, return the result of the write if it already happened, else ``None``."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


@dataclass(frozen=True, slots=True)
class ToolCallContext:
    """What a running tool may know about the call it serves.

    Attributes:
        tool: the tool's name.
        arguments: the validated arguments, as JSON.
        idempotency_key: the key of an exactly-once write (the consent's interaction id), when the runtime
            gave one; a write tool records it so that ``reconcile`` can later answer for it.
    """

    tool: str
    arguments: dict[str, JsonValue]
    idempotency_key: str | None


_current_call: ContextVar[ToolCallContext | None] = ContextVar("plangate_tool_call", default=None)


def current_call() -> ToolCallContext | None:
    """The call being served, from inside a tool function (sync or async); ``None`` outside a tool call."""
    return _current_call.get()


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may ask for, with everything the runtime needs to decide about the call.

    Build one with :func:`tool`; construct it directly for tools that come with a ready JSON Schema (MCP
    servers), in which case arguments are checked against ``parameters`` and passed as keyword arguments.

    Attributes:
        name: unique name, ``[A-Za-z0-9_-]{1,64}`` (what provider APIs accept).
        description: what the tool does, for the model.
        parameters: JSON Schema of the arguments object.
        function: the sync or async callable; sync ones run in a worker thread so the loop is never blocked.
        effect: ``read`` or ``write``; every write needs consent unless the run says ``always_execute``.
        domain: the group the tool belongs to (``core``, ``schedule``, ``data``).
        pack: the subgroup inside the domain that is activated as a unit.
        idempotent: whether running the same call twice is harmless; ``None`` when unknown.
        reconcile: for exactly-once writes, tells whether the write with a given idempotency key happened.
        timeout: seconds after which the call is reported as failed; ``None`` for no limit.
        arguments_model: the pydantic model arguments are validated with (set by ``@tool``).
        argument_fields: parameter name → field of ``arguments_model`` (set by ``@tool``).
        context_parameter: the parameter that receives the call's ``RunContext`` (its first, when its hint
            asks for one; set by ``@tool``), or None.
    """

    name: str
    description: str
    parameters: dict[str, JsonValue]
    function: Callable[..., Any] = field(repr=False)
    effect: Effect = "read"
    domain: str = "core"
    pack: str = "core"
    idempotent: bool | None = None
    reconcile: Reconciler | None = field(default=None, repr=False)
    timeout: float | None = None
    arguments_model: type[BaseModel] | None = field(default=None, repr=False, compare=False)
    argument_fields: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    context_parameter: str | None = field(default=None, repr=False, compare=False)
    # whether ``function`` is a coroutine function, asked once rather than on every call
    _asynchronous: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_asynchronous", inspect.iscoroutinefunction(self.function))
        for label, value in (("name", self.name), ("domain", self.domain), ("pack", self.pack)):
            if not _NAME.match(value):
                raise ToolDefinitionError(
                    f"tool {self.name!r}: expected a {label} of 1-64 letters, digits, '_' or '-', "
                    f"got {value!r}"
                )
        if self.effect not in ("read", "write"):
            raise ToolDefinitionError(
                f"tool {self.name!r}: expected effect 'read' or 'write', got {self.effect!r}"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise ToolDefinitionError(
                f"tool {self.name!r}: expected a positive timeout, got {self.timeout!r}"
            )

    def validate(self, arguments: object) -> dict[str, JsonValue]:
        """Validate ``arguments`` and return them normalised: coerced, defaults filled, as JSON.

        Raises:
            ToolArgumentsError: with one issue per problem, each naming its path.
        """
        return self._prepare(arguments)[0]

    def catalogue_entry(self) -> dict[str, JsonValue]:
        """The tool as a prompt's catalogue lists it: name, description, parameters and effect."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "effect": self.effect,
        }

    async def invoke(self, arguments: object, *, idempotency_key: str | None = None) -> ToolResult:
        """Validate ``arguments``, run the function and report every outcome as a :class:`ToolResult`.

        Invalid arguments give a ``blocked`` result (nothing ran); an exception or a timeout gives a
        ``failed`` one. Only cancellation and exceptions outside ``Exception`` (such as ``KeyboardInterrupt``)
        propagate.
        """
        try:
            normalised, kwargs = self._prepare(arguments)
        except ToolArgumentsError as exc:
            return ToolResult.blocked(
                "invalid_arguments",
                str(exc),
                observation=f"tool {self.name!r} was not run: {exc}",
            )
        token = _current_call.set(ToolCallContext(self.name, normalised, idempotency_key))
        if self.context_parameter is not None:
            kwargs = {self.context_parameter: run_context(self.name, normalised, idempotency_key), **kwargs}
        try:
            return await self._run(kwargs)
        finally:
            _current_call.reset(token)

    async def _run(self, kwargs: dict[str, Any]) -> ToolResult:
        if self.timeout is None:  # no scope to enter and leave on every call: nothing can expire
            try:
                value = await self._call(kwargs)
            except Exception as exc:
                return _raised(self.name, exc)
            return result_from_value(value)
        try:
            async with asyncio.timeout(self.timeout) as scope:
                value = await self._call(kwargs)
        except TimeoutError as exc:
            if scope.expired():
                message = f"tool {self.name!r} stopped after {self.timeout:g} s"
                return ToolResult.failed("tool_timeout", message, observation=message)
            return _raised(self.name, exc)
        except Exception as exc:
            return _raised(self.name, exc)
        return result_from_value(value)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        if self._asynchronous:
            value = await self.function(**kwargs)
        else:
            # A thread keeps the event loop responsive; on timeout the thread is left to finish, so long
            # sync tools should also bound themselves (the data tools do).
            value = await asyncio.to_thread(self.function, **kwargs)
        # what most tools return is plain data, which is never awaitable: no ABC check for it
        if type(value) not in _PLAIN and inspect.isawaitable(value):
            value = await value
        return value

    def _prepare(self, arguments: object) -> tuple[dict[str, JsonValue], dict[str, Any]]:
        if not isinstance(arguments, Mapping):
            issue = ArgumentIssue("arguments", f"expected an object, got {describe_value(arguments)}")
            raise ToolArgumentsError(self.name, [issue])
        if self.arguments_model is None:
            issues = check_json_schema(self.parameters, dict(arguments))
            if issues:
                raise ToolArgumentsError(self.name, issues)
            filled = apply_defaults(self.parameters, arguments)
            return filled, dict(filled)
        # pydantic-core's validator and serialiser called directly: the wrappers' per-call work is most of
        # what a small argument object costs, on the path of every call
        model_class = self.arguments_model
        try:
            model = model_class.__pydantic_validator__.validate_python(dict(arguments))
        except ValidationError as exc:
            issues = issues_from_pydantic(exc, list(self.argument_fields))
            raise ToolArgumentsError(self.name, issues) from None
        kwargs = {param: getattr(model, name) for param, name in self.argument_fields.items()}
        normalised: dict[str, JsonValue] = model_class.__pydantic_serializer__.to_python(
            model, mode="json", by_alias=True
        )
        return normalised, kwargs


def _raised(name: str, exc: Exception) -> ToolResult:
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ToolResult.failed("tool_error", message, observation=f"tool {name!r} failed: {message}")


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read",
    domain: str = "core",
    pack: str = "core",
    idempotent: bool | None = None,
    reconcile: Reconciler | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read",
    domain: str = "core",
    pack: str = "core",
    idempotent: bool | None = None,
    reconcile: Reconciler | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function: bare ``@tool`` or with options, ``@tool(effect="write")``.

    A first parameter typed ``RunContext[Deps]`` receives the call's context (the run's ``deps``) and is not
    part of the schema. The other parameters' type hints and defaults become the JSON Schema (through
    pydantic); the docstring's text before its sections becomes the description and its google-style
    ``Args:`` entries the parameter descriptions. Arguments are validated before every call and the
    function receives the validated values (nested pydantic models arrive as model instances).

    Args:
        function: the function, when used bare.
        name: the tool's name; the function's name when omitted.
        description: overrides the docstring's description.
        effect: ``read`` or ``write``.
        domain: the tool's domain.
        pack: the tool's pack inside its domain.
        idempotent: whether repeating the call is harmless.
        reconcile: the exactly-once hook of a write tool.
        timeout: seconds before the call is reported as failed.

    Raises:
        ToolDefinitionError: the function has variadic or positional-only parameters, an unresolvable type
            hint, or an option has an invalid value.
    """

    def build(target: Callable[..., Any], local_names: Mapping[str, Any]) -> Tool:
        tool_name: str = name or str(getattr(target, "__name__", ""))
        derived = derive_schema(target, tool_name, local_names)
        return Tool(
            name=tool_name,
            description=description if description is not None else derived.description,
            parameters=derived.parameters,
            function=target,
            effect=effect,
            domain=domain,
            pack=pack,
            idempotent=idempotent,
            reconcile=reconcile,
            timeout=timeout,
            arguments_model=derived.model,
            argument_fields=derived.fields,
            context_parameter=derived.context,
        )

    # The caller's frame is where the function was defined: its locals resolve hints on local classes.
    if function is not None:
        return build(function, sys._getframe(1).f_locals)

    def decorate(target: Callable[..., Any]) -> Tool:
        return build(target, sys._getframe(1).f_locals)

    return decorate


__all__ = ["Effect", "Reconciler", "Tool", "ToolCallContext", "current_call", "tool"]
