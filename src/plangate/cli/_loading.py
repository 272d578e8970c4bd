"""Finding what a command needs from the user's project: the store, the tools and the model.

For: ``--store`` / ``PLANGATE_STORE`` and ``--tools module:attr`` / ``path.py:attr`` / ``PLANGATE_TOOLS``.
Not for: the store or the registry themselves.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from plangate.cli._console import err
from plangate.errors import ConfigError
from plangate.models import Model
from plangate.models.registry import default_model_spec, describe_model, resolve_model
from plangate.store import Store, open_store
from plangate.tools import Tool, ToolRegistry

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store URL (sqlite:///path.db or postgresql://user@host/db); default $PLANGATE_STORE or "
        ".plangate/plangate.db.",
    ),
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        help="Tools to offer, as module:attr or file.py:attr (a ToolRegistry, a Tool, or a list of them); "
        "repeatable; default $PLANGATE_TOOLS (comma-separated).",
    ),
]


def store_from(url: str | None) -> Store:
    """Open the store named on the command line (or the default one)."""
    return open_store(url)


def _import_target(spec: str) -> object:
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise ConfigError(f"--tools expects module:attr or file.py:attr, got {spec!r}")
    if module_part.endswith(".py") or "/" in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise ConfigError(f"--tools {spec}: no such file {module_part!r}")
        name = f"plangate_user_tools_{abs(hash(path.resolve()))}"
        loaded = importlib.util.spec_from_file_location(name, path)
        if loaded is None or loaded.loader is None:
            raise ConfigError(f"--tools {spec}: cannot import {module_part!r}")
        module = importlib.util.module_from_spec(loaded)
        sys.modules[name] = module
        loaded.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise ConfigError(f"--tools {spec}: cannot import {module_part!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"--tools {spec}: {module_part!r} has no attribute {attr!r}") from None


def tool_specs(specs: Iterable[str] | None) -> list[str]:
    """The ``--tools`` specs (or ``PLANGATE_TOOLS``), file paths made absolute so they work from anywhere."""
    given = list(specs or [])
    if not given and os.environ.get("PLANGATE_TOOLS"):
        given = [s.strip() for s in os.environ["PLANGATE_TOOLS"].split(",") if s.strip()]
    resolved = []
    for spec in given:
        module_part, sep, attr = spec.rpartition(":")
        if sep and (module_part.endswith(".py") or "/" in module_part) and Path(module_part).is_file():
            spec = f"{Path(module_part).resolve()}:{attr}"
        resolved.append(spec)
    return resolved


def run_tool_specs(store: Store, run_id: str) -> list[str]:
    """The tool specs a run was started with (its root run's), for resuming it in another process."""
    run = store.get_run(run_id)
    while run.parent_run_id is not None:
        run = store.get_run(run.parent_run_id)
    specs = run.input.get("tools")
    return [s for s in specs if isinstance(s, str)] if isinstance(specs, list) else []


def tools_from(specs: Iterable[str] | None) -> ToolRegistry:
    """A registry with every tool the ``--tools`` specs name."""
    given = tool_specs(specs)
    registry = ToolRegistry()
    for spec in given:
        target = _import_target(spec)
        items: Iterable[object]
        if isinstance(target, ToolRegistry):
            items = target.tools()
        elif isinstance(target, Tool):
            items = [target]
        elif isinstance(target, list | tuple):
            items = target
        else:
            raise ConfigError(
                f"--tools {spec}: expected a ToolRegistry, a Tool or a list of tools, "
                f"got {type(target).__name__}"
            )
        for item in items:
            if not isinstance(item, Tool):
                raise ConfigError(f"--tools {spec}: {item!r} is not a tool (decorate it with @tool)")
            if item.name not in registry:
                registry.register(item)
    return registry


__all__ = ["StoreOpt", "ToolsOpt", "run_tool_specs", "store_from", "tool_specs", "tools_from"]


def model_from(spec: str | None, *, of: str = "model") -> Model:
    """The model ``--model`` names, else the default one; says on stderr which it is and why.

    Args:
        spec: the ``--model`` option, if given.
        of: what the model is for, as the line starts (``model``, ``model of agent and llm steps``).

    Raises:
        ConfigError: the spec names no usable model (the message says where the spec came from).
    """
    chosen, origin = (spec, "--model") if spec else default_model_spec()
    model = resolve_model(chosen)
    err.print(f"{of}: {escape(describe_model(model))} [dim]({escape(origin)})[/]")
    return model
