"""Tools named by spec: ``module:attr`` or ``path/to/file.py:attr`` (a ToolRegistry, a Tool, or a list).

For: turning the specs a person gives a command (``--tools``, ``plangate.toml``'s ``tools``, a worker's
flags) into one registry, with a clear error for a spec that names nothing usable. Specs come only from the
person running the process, never from stored data: a run records the names of its tools, and whoever
advances it resolves those names in its own registry. Not for: the registry itself (``registry.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path

from plangate.errors import ConfigError
from plangate.tools.registry import ToolRegistry
from plangate.tools.tool import Tool


def resolve_specs(specs: Iterable[str]) -> list[str]:
    """The specs with file paths made absolute, so that they work from any directory."""
    resolved = []
    for spec in specs:
        module_part, sep, attr = spec.rpartition(":")
        if sep and (module_part.endswith(".py") or "/" in module_part) and Path(module_part).is_file():
            spec = f"{Path(module_part).resolve()}:{attr}"
        resolved.append(spec)
    return resolved


def import_target(spec: str, *, base: Path | None = None, label: str = "--tools") -> object:
    """What ``spec`` names: ``attr`` of the module or of the Python file (a relative file path is read from
    ``base`` when given); ``label`` starts every error message (the flag or the file's key).

    Raises:
        ConfigError: the spec is malformed, or its module, file or attribute cannot be found or imported.
    """
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise ConfigError(f"{label} expects module:attr or file.py:attr, got {spec!r}")
    if module_part.endswith(".py") or "/" in module_part:
        path = Path(module_part).expanduser()
        if base is not None and not path.is_absolute():
            path = base / path
        if not path.is_file():
            raise ConfigError(f"{label} {spec}: no such file {str(path)!r}")
        name = f"plangate_user_tools_{abs(hash(path.resolve()))}"
        loaded = importlib.util.spec_from_file_location(name, path)
        if loaded is None or loaded.loader is None:
            raise ConfigError(f"{label} {spec}: cannot import {module_part!r}")
        module = importlib.util.module_from_spec(loaded)
        sys.modules[name] = module
        loaded.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise ConfigError(f"{label} {spec}: cannot import {module_part!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{label} {spec}: {module_part!r} has no attribute {attr!r}") from None


def tools_in(target: object, where: str) -> list[Tool]:
    """The tools ``target`` holds (a ToolRegistry, a Tool, or a list of tools); ``where`` starts the error.

    Raises:
        ConfigError: ``target`` is something else, or a list holds something that is not a tool.
    """
    items: Iterable[object]
    if isinstance(target, ToolRegistry):
        items = target.tools()
    elif isinstance(target, Tool):
        items = [target]
    elif isinstance(target, list | tuple):
        items = target
    else:
        raise ConfigError(
            f"{where}: expected a ToolRegistry, a Tool or a list of tools, got {type(target).__name__}"
        )
    found: list[Tool] = []
    for item in items:
        if not isinstance(item, Tool):
            raise ConfigError(f"{where}: {item!r} is not a tool (decorate it with @tool)")
        found.append(item)
    return found


def load_tools(specs: Iterable[str]) -> ToolRegistry:
    """A registry with every tool the specs name (the first of two tools with one name wins).

    Raises:
        ConfigError: a spec that cannot be imported, or that names something other than tools.
    """
    registry = ToolRegistry()
    for spec in resolve_specs(specs):
        for item in tools_in(import_target(spec), f"--tools {spec}"):
            if item.name not in registry:
                registry.register(item)
    return registry


__all__ = ["import_target", "load_tools", "resolve_specs", "tools_in"]
