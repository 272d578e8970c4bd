"""The active tools of one run: the ``core`` pack, the meta tools, and the domains/packs activated so far.

A :class:`Toolset` wraps a shared :class:`~plangate.tools.registry.ToolRegistry` with per-run state. Its state
is a list of ``(domain, pack)`` names, never tool objects, so a resumed run rebuilds the same view from the
registry. It does not decide consent (the registry does) or hold conversation state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from plangate.errors import ConfigError, SchemaVersionError
from plangate.tools.registry import ToolRegistry, closest_name
from plangate.tools.result import ToolResult
from plangate.tools.tool import Tool, tool

ADD_TOOL = "context_tools_add"
REMOVE_TOOL = "context_tools_remove"
CORE = "core"
STATE_VERSION = 1

Mode = Literal["replace", "merge"]


class PackRef(BaseModel):
    """One activated pack of a domain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    domain: str
    pack: str


class ToolsetState(BaseModel):
    """The serialisable state of a :class:`Toolset`: the activated packs, besides ``core``, in order.

    Attributes:
        version: the state's schema version; a newer one than this code knows is refused.
        active: the activated packs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = STATE_VERSION
    active: tuple[PackRef, ...] = ()


class Toolset:
    """The tools a run may call now.

    A run starts with the ``core`` pack of the ``core`` domain and the two meta tools, ``context_tools_add``
    and ``context_tools_remove``, which the model calls to change what is active. Both are read tools: they
    change only which tools are offered, never data.

    Args:
        registry: the tools that exist.
        state: a previous :meth:`state` to resume from (a model or its JSON form).
    """

    def __init__(self, registry: ToolRegistry, state: ToolsetState | Mapping[str, Any] | None = None) -> None:
        for name in (ADD_TOOL, REMOVE_TOOL):
            if name in registry:
                raise ConfigError(f"the tool name {name!r} is reserved for the toolset's meta tools")
        self.registry = registry
        self._active: list[PackRef] = list(_load_state(state).active) if state is not None else []
        self._meta = {item.name: item for item in self._build_meta_tools()}
        # the active tools, for the registry's size and the packs active (a registry only grows)
        self._kept: tuple[tuple[int, tuple[PackRef, ...]], tuple[Tool, ...]] | None = None

    def state(self) -> ToolsetState:
        """The current state, to persist with the run."""
        return ToolsetState(active=tuple(self._active))

    def activate(self, domain: str, packs: Iterable[str] | None = None, mode: Mode = "merge") -> list[str]:
        """Activate ``packs`` of ``domain`` (all its packs when ``None``) and return the active tool names.

        ``merge`` adds to what is active; ``replace`` first deactivates every other domain's packs.

        Raises:
            ConfigError: the domain or a pack does not exist, or ``mode`` is not ``replace`` or ``merge``.
        """
        if mode not in ("replace", "merge"):
            raise ConfigError(f"expected mode 'replace' or 'merge', got {mode!r}")
        wanted = [PackRef(domain=domain, pack=pack) for pack in self._resolve_packs(domain, packs)]
        if mode == "replace":
            self._active = []
        for ref in wanted:
            if ref not in self._active and ref != PackRef(domain=CORE, pack=CORE):
                self._active.append(ref)
        return self.active_names()

    def deactivate(self, domain: str, packs: Iterable[str] | None = None) -> list[str]:
        """Deactivate ``packs`` of ``domain`` (all of them when ``None``) and return the active tool names.

        Raises:
            ConfigError: the domain or a pack does not exist, or the ``core`` pack was named.
        """
        chosen = set(self._resolve_packs(domain, packs))
        if domain == CORE and CORE in chosen:
            raise ConfigError("the core pack is always active and cannot be removed")
        self._active = [ref for ref in self._active if not (ref.domain == domain and ref.pack in chosen)]
        return self.active_names()

    def _offered_meta_tools(self) -> list[Tool]:
        # Offered only when there is something to activate: with core tools alone they could only fail.
        if all(item.domain == CORE for item in self.registry):
            return []
        return list(self._meta.values())

    def is_active(self, name: str) -> bool:
        """Whether the tool called ``name`` may be called now (unknown names are not active; the meta tools
        are active when some tool belongs to a domain other than ``core``)."""
        if name in self._meta:
            return bool(self._offered_meta_tools())
        if name not in self.registry:
            return False
        found = self.registry.get(name)
        return self._pack_active(found.domain, found.pack)

    def active_tools(self) -> list[Tool]:
        """The tools that may be called now: active registry tools, then the meta tools (when some tool
        belongs to a domain other than ``core``)."""
        key = (len(self.registry), tuple(self._active))
        kept = self._kept
        if kept is None or kept[0] != key:
            found = [item for item in self.registry if self._pack_active(item.domain, item.pack)]
            kept = self._kept = (key, (*found, *self._offered_meta_tools()))
        return list(kept[1])

    def active_names(self) -> list[str]:
        """The names of :meth:`active_tools`."""
        return [item.name for item in self.active_tools()]

    def get(self, name: str) -> Tool:
        """A meta tool or a registered tool, active or not.

        Raises:
            UnknownToolError: no such tool.
        """
        return self._meta[name] if name in self._meta else self.registry.get(name)

    def catalogue(self) -> list[dict[str, JsonValue]]:
        """The catalogue entries of the active tools, for the system prompt."""
        return [item.catalogue_entry() for item in self.active_tools()]

    def correction_for(self, name: str) -> str:
        """What to tell the model that called ``name`` when it may not; empty when the tool is active.

        Examples: ``unknown tool 'plcae' (did you mean 'place'?)`` and ``tool 'place' is not active: call
        context_tools_add {"domain": "schedule", "packs": ["edit"]} first``.
        """
        if self.is_active(name):
            return ""
        if name in self._meta:
            # Offered only when some tool belongs to another domain; here none does, so all are active.
            return (
                f"{name!r} is not available: there is no tool domain to activate or remove, every tool is "
                f"active already (active tools: {', '.join(self.active_names()) or 'none'})"
            )
        if name in self.registry:
            found = self.registry.get(name)
            hint = json.dumps({"domain": found.domain, "packs": [found.pack]}, ensure_ascii=False)
            return f"tool {name!r} is not active: call {ADD_TOOL} {hint} first"
        offered = [*self.registry.names(), *(item.name for item in self._offered_meta_tools())]
        suggestion = closest_name(name, offered)
        if suggestion:
            return f"unknown tool {name!r} (did you mean {suggestion!r}?)"
        return f"unknown tool {name!r} (active tools: {', '.join(self.active_names())})"

    async def call(self, name: str, arguments: object, *, idempotency_key: str | None = None) -> ToolResult:
        """Run a call if the tool is active, else return a ``blocked`` result whose observation says why."""
        correction = self.correction_for(name)
        if correction:
            code = "inactive_tool" if name in self.registry else "unknown_tool"
            return ToolResult.blocked(code, correction, observation=correction)
        return await self.get(name).invoke(arguments, idempotency_key=idempotency_key)

    def describe_active(self) -> str:
        """One line listing the active tools by pack, as the meta tools report it."""
        groups: dict[str, list[str]] = {}
        for item in self.registry:
            if self._pack_active(item.domain, item.pack):
                label = CORE if (item.domain, item.pack) == (CORE, CORE) else f"{item.domain}/{item.pack}"
                groups.setdefault(label, []).append(item.name)
        parts = [f"{label} ({', '.join(names)})" for label, names in groups.items()]
        parts.append(f"{ADD_TOOL}, {REMOVE_TOOL}")
        return "active tools: " + "; ".join(parts)

    def _pack_active(self, domain: str, pack: str) -> bool:
        return (domain, pack) == (CORE, CORE) or PackRef(domain=domain, pack=pack) in self._active

    def _resolve_packs(self, domain: str, packs: Iterable[str] | None) -> list[str]:
        known = self.registry.domains()
        if domain not in known:
            suggestion = closest_name(domain, known)
            hint = f"did you mean {suggestion!r}?" if suggestion else f"known: {', '.join(known) or 'none'}"
            raise ConfigError(f"unknown domain {domain!r} ({hint})")
        if packs is None:
            return list(known[domain])
        chosen = list(packs)
        for pack in chosen:
            if pack not in known[domain]:
                raise ConfigError(
                    f"domain {domain!r} has no pack {pack!r} (packs: {', '.join(known[domain])})"
                )
        return chosen

    def _build_meta_tools(self) -> list[Tool]:
        catalogue = "; ".join(
            f"{domain} (packs: {', '.join(packs)})" for domain, packs in self.registry.domains().items()
        )
        add, remove = _meta_templates()
        # The argument schemas are built once per process; each toolset only binds its own functions.
        return [
            replace(
                add,
                function=self._add,
                description=f"Activate a domain's tools. Domains: {catalogue or 'none'}.",
            ),
            replace(remove, function=self._remove),
        ]

    async def _add(self, domain: str, packs: list[str] | None = None, mode: Mode = "merge") -> ToolResult:
        try:
            self.activate(domain, packs, mode)
        except ConfigError as exc:
            return ToolResult.failed("unknown_domain_or_pack", str(exc))
        return ToolResult.done(self.describe_active(), summary=f"activated {domain}")

    async def _remove(self, domain: str, packs: list[str] | None = None) -> ToolResult:
        try:
            self.deactivate(domain, packs)
        except ConfigError as exc:
            return ToolResult.failed("unknown_domain_or_pack", str(exc))
        return ToolResult.done(self.describe_active(), summary=f"deactivated {domain}")


@cache
def _meta_templates() -> tuple[Tool, Tool]:
    """The meta tools' schemas and docs; their functions are bound per toolset with ``replace``."""

    @tool(name=ADD_TOOL, description="Activate a domain's tools.")
    async def add(domain: str, packs: list[str] | None = None, mode: Mode = "merge") -> ToolResult:
        """Activate tools.

        Args:
            domain: the domain whose tools to activate.
            packs: the packs to activate; all of the domain's packs when omitted.
            mode: 'merge' adds to the active tools; 'replace' first deactivates other domains.
        """
        raise NotImplementedError  # never called: each toolset binds its own function

    @tool(name=REMOVE_TOOL, description="Deactivate a domain's tools that are no longer needed.")
    async def remove(domain: str, packs: list[str] | None = None) -> ToolResult:
        """Deactivate tools.

        Args:
            domain: the domain whose tools to deactivate.
            packs: the packs to deactivate; all of the domain's packs when omitted.
        """
        raise NotImplementedError  # never called: each toolset binds its own function

    return add, remove


def _load_state(state: ToolsetState | Mapping[str, Any]) -> ToolsetState:
    raw = state.model_dump() if isinstance(state, ToolsetState) else dict(state)
    version = raw.get("version", STATE_VERSION)
    if isinstance(version, int) and version > STATE_VERSION:
        raise SchemaVersionError(
            f"toolset state: expected version {STATE_VERSION} or older, got {version} "
            "(written by a newer plangate)"
        )
    return ToolsetState.model_validate(raw)


__all__ = ["ADD_TOOL", "REMOVE_TOOL", "Mode", "PackRef", "Toolset", "ToolsetState"]
