"""The tool registry: every tool a program offers, looked up by name, validated, digested and called.

The registry is static (shared by many runs); which tools a particular run may use right now is the job of
:class:`~plangate.tools.toolset.Toolset`. The registry also owns the consent rule: the model never decides
whether a call needs a person's approval.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Iterator

from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.tools.errors import UnknownToolError
from plangate.tools.result import ToolResult
from plangate.tools.tool import Tool


def needs_consent(tool: Tool, always_execute: bool = False) -> bool:
    """Whether a call of ``tool`` must wait for a person's approval.

    Every write does, unless the run was started with ``always_execute``; reads never do.
    """
    return tool.effect == "write" and not always_execute


def canonical_json(value: object) -> str:
    """JSON with sorted keys, no whitespace and unescaped non-ASCII: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest_json(value: object) -> str:
    """The sha256 (hex) of :func:`canonical_json` of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def closest_name(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` when one is close enough to be a likely typo, else ``None``."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


class ToolRegistry:
    """Every tool known to a program, by name.

    Example::

        registry = ToolRegistry([get_overview, place])
        result = await registry.call("place", {"task": "t1", "slot": 3})
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``; returns it, so the method can also serve as a decorator on ``@tool`` results.

        Raises:
            ConfigError: another tool already has that name.
        """
        if not isinstance(tool, Tool):
            raise ConfigError(
                f"expected a Tool (decorate the function with @tool), got {type(tool).__name__}"
            )
        if tool.name in self._tools:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool:
        """The tool called ``name``.

        Raises:
            UnknownToolError: none is registered; the message suggests the closest name.
        """
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, closest_name(name, self._tools)) from None

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._tools)

    def tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        return list(self._tools.values())

    def domains(self) -> dict[str, list[str]]:
        """Domain → its packs, each in the order first seen."""
        found: dict[str, list[str]] = {}
        for item in self._tools.values():
            packs = found.setdefault(item.domain, [])
            if item.pack not in packs:
                packs.append(item.pack)
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def validate(self, name: str, arguments: object) -> dict[str, JsonValue]:
        """Validate a call's arguments and return them normalised (coerced, defaults filled, as JSON).

        Raises:
            UnknownToolError: no tool has that name.
            ToolArgumentsError: the arguments do not fit the schema; the message names each path.
        """
        return self.get(name).validate(arguments)

    def arguments_digest(self, name: str, arguments: object) -> str:
        """The sha256 of the canonical JSON of the *validated* arguments.

        Normalising first means ``{"slot": "3"}`` and ``{"slot": 3}``, or an omitted default and the default
        written out, are the same call and get the same digest, which consent and stall detection rely on.

        Raises:
            UnknownToolError: no tool has that name.
            ToolArgumentsError: the arguments do not fit the schema.
        """
        return digest_json(self.validate(name, arguments))

    def needs_consent(self, name: str, always_execute: bool = False) -> bool:
        """:func:`needs_consent` for the tool called ``name``."""
        return needs_consent(self.get(name), always_execute)

    def schema_catalogue(self, active: Iterable[str] | None = None) -> list[dict[str, JsonValue]]:
        """Name, description, parameters and effect of each tool in ``active`` (all when ``None``).

        Raises:
            UnknownToolError: a name in ``active`` is not registered.
        """
        names = self.names() if active is None else list(active)
        return [self.get(name).catalogue_entry() for name in names]

    async def call(
        self, name: str, arguments: object, *, idempotency_key: str | None = None
    ) -> ToolResult:
        """Validate and run one call. Never raises for a bad call or a failing tool: the result says so.

        Args:
            name: the tool's name.
            arguments: the arguments object as the model wrote it.
            idempotency_key: for a write run under consent, the key its ``reconcile`` hook answers for.

        Returns:
            ``blocked`` with ``unknown_tool`` or ``invalid_arguments`` when nothing ran; otherwise the tool's
            result (``failed`` with ``tool_error`` or ``tool_timeout`` when it raised or ran too long).
        """
        if name not in self._tools:
            message = str(UnknownToolError(name, closest_name(name, self._tools)))
            return ToolResult.blocked("unknown_tool", message, observation=message)
        return await self._tools[name].invoke(arguments, idempotency_key=idempotency_key)


__all__ = ["ToolRegistry", "canonical_json", "closest_name", "digest_json", "needs_consent"]
