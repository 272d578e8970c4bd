"""Dependencies for tools: ``RunContext[Deps]``, the typed context a tool's first parameter may ask for.

For: passing the caller's own objects (a database connection, an HTTP client, the user's settings) to the
tools of a run without globals, as PydanticAI's ``RunContext`` does: ``agent.run(prompt, deps=MyDeps(...))``
and a tool ``def lookup(ctx: RunContext[MyDeps], query: str)`` reads ``ctx.deps``, typed for mypy. The
context parameter never enters the tool's JSON schema (the model never sees or fills it); the runtime fills
it at each call from the run being advanced (``deps_scope``). Deps live in the process only, never in the
store: a run resumed elsewhere gets the deps its resuming caller passes. Not for: what a tool knows of the
call itself without asking for a context (``current_call``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic import JsonValue
from typing_extensions import TypeVar

DepsT = TypeVar("DepsT", default=None)
"""The type of a run's dependencies (None when the agent takes none)."""


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """What a tool that takes a context as its first parameter receives at each call.

    Attributes:
        deps: the dependencies the caller passed to ``run`` / ``resume`` (None when it passed none).
        run_id: the run being advanced, or None for a call outside any run.
        tool: the tool's name.
        arguments: the call's validated arguments, as JSON.
        idempotency_key: the key of an exactly-once write, when the runtime gave one.
    """

    deps: DepsT
    run_id: str | None = None
    tool: str = ""
    arguments: dict[str, JsonValue] = field(default_factory=dict)
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class _Scope:
    deps: Any
    run_id: str | None


_scope: ContextVar[_Scope | None] = ContextVar("plangate_run_deps", default=None)


@contextmanager
def deps_scope(deps: object, run_id: str | None = None) -> Iterator[None]:
    """Within the block, tools that take a ``RunContext`` get ``deps`` (and ``run_id``) in it."""
    token = _scope.set(_Scope(deps, run_id))
    try:
        yield
    finally:
        _scope.reset(token)


def run_context(tool: str, arguments: dict[str, JsonValue], idempotency_key: str | None) -> RunContext[Any]:
    """The context of a call of ``tool`` made now (in the innermost ``deps_scope``, or with no deps)."""
    scope = _scope.get()
    return RunContext(
        deps=None if scope is None else scope.deps,
        run_id=None if scope is None else scope.run_id,
        tool=tool,
        arguments=arguments,
        idempotency_key=idempotency_key,
    )


__all__ = ["DepsT", "RunContext", "deps_scope", "run_context"]
