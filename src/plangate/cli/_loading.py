"""Finding what a command needs from the user's project: the store's URL, the tools and the model, as
``plangate.toml`` and the command line say.

For: plain functions of a loaded :class:`~plangate.config.Config` and the command's flags — the store
(``--store``, ``$PLANGATE_STORE``, the file's ``store``, ``.plangate/plangate.db``); the tools
(``--tools module:attr`` / ``file.py:attr`` or ``$PLANGATE_TOOLS``, else the file's ``tools``; plus the
file's ``[[mcp]]`` servers); the model (``--model``, ``$PLANGATE_MODEL``, the file's ``model``, then the
default rule). A flag wins over the environment, the environment over the file. Not for: holding any of it
for a command (``_session.py`` does, and closes what it opened), or the store, the registry and the MCP
sessions themselves.

Nothing stored is executed. A run records where its tools came from, but continuing it never imports a
module or a file that the run's stored input names: anyone who can write the database would otherwise run
code as whoever answers next. Its tools come from what the person running the command names (flags,
``$PLANGATE_TOOLS``, ``plangate.toml``), or from the ``plangate.tools`` entry points of installed packages
(the allow-list: a stored spec may pick one of those, by name or value, and nothing else).
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from rich.markup import escape

from plangate.cli._console import err
from plangate.config import Config
from plangate.errors import ConfigError, NotFoundError, PlangateError
from plangate.models import Model
from plangate.models.registry import ENV_VAR as MODEL_ENV
from plangate.models.registry import default_model_spec, describe_model, resolve_model
from plangate.store import Store
from plangate.store.sqlite import MEMORY
from plangate.store.url import STORE_ENV, postgres_url, sqlite_target
from plangate.tools import Tool, ToolRegistry
from plangate.tools.specs import import_target, tools_in

ENTRY_POINTS = "plangate.tools"
"""The entry-point group whose tools a stored run may name: installed packages, not stored paths."""

TOOLS_ENV = "PLANGATE_TOOLS"


# -- the store ----------------------------------------------------------------------------------------------


def store_url(config: Config, flag: str | None) -> str | None:
    """The store to open: ``--store``, else ``$PLANGATE_STORE`` (None: the store layer reads it), else the
    file's ``store`` (a SQLite path made relative to the file's folder), else None (the default one)."""
    if flag is not None or os.environ.get(STORE_ENV, "").strip():
        return flag
    if config.store is None:
        return None
    url = config.store
    if url.strip() in (":memory:", "sqlite://", "sqlite://:memory:", "sqlite:///:memory:"):
        return url
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return f"sqlite:///{config.resolve(url.removeprefix('sqlite:///'))}"
    if "://" not in url and not url.lower().startswith("sqlite:"):
        return str(config.resolve(url))
    return url


def require_store(url: str | None) -> None:
    """Refuse a SQLite store that does not exist yet (a command that reads runs creates none).

    Raises:
        NotFoundError: no file at the store's path, or an empty one; the message names it and where a store
            is named.
    """
    if postgres_url(url) is not None:
        return
    target = sqlite_target(url)
    if target == MEMORY:
        return
    path = Path(target)
    is_file = path.is_file()
    if is_file and path.stat().st_size > 0:
        return
    empty = " (an empty file)" if is_file else ""
    raise NotFoundError(
        f"no store at {path.resolve()}{empty} (nothing was created there): name the store your runs "
        f"are in with --store, ${STORE_ENV} or store = ... in plangate.toml (default: .plangate/plangate.db "
        "under the folder the command runs in)"
    )


# -- the model ----------------------------------------------------------------------------------------------


def model_spec(config: Config, flag: str | None) -> tuple[str, str]:
    """The model spec to use and where it came from: ``--model``, ``$PLANGATE_MODEL``, ``plangate.toml``,
    else the default rule (an API key, or the local model)."""
    if flag:
        return flag, "--model"
    chosen = os.environ.get(MODEL_ENV, "").strip()
    if chosen:
        return chosen, MODEL_ENV
    if config.model is not None:
        return config.model, f"model in {config.source or 'plangate.toml'}"
    return default_model_spec()


def step_model(config: Config, flag: str | None) -> str | None:
    """The model spec for formula steps and runs that name none: ``--model``, else the file's ``model``
    unless ``$PLANGATE_MODEL`` is set (None: the runtime's default rule)."""
    if flag:
        return flag
    if os.environ.get(MODEL_ENV, "").strip():
        return None
    return config.model


def announced_model(config: Config, flag: str | None, *, of: str = "model") -> Model:
    """The model ``--model`` names, else the project's or the default one; says on stderr which and why.

    Args:
        config: the project's configuration.
        flag: the ``--model`` option, if given.
        of: what the model is for, as the line starts (``model``, ``model of agent and llm steps``).

    Raises:
        ConfigError: the spec names no usable model (the message says where the spec came from).
    """
    chosen, origin = model_spec(config, flag)
    try:
        model = resolve_model(chosen)
    except ConfigError as exc:
        if origin == "--model":
            raise
        raise ConfigError(f"{origin}: {chosen!r}: {exc}") from None
    err.print(f"{of}: {escape(describe_model(model))} [dim]({escape(origin)})[/]")
    return model


# -- tools ---------------------------------------------------------------------------------------------------


def tool_specs(flags: Iterable[str] | None) -> list[str]:
    """The ``--tools`` specs (or ``PLANGATE_TOOLS``), file paths made absolute so they work from anywhere."""
    given = list(flags or [])
    if not given and os.environ.get(TOOLS_ENV):
        given = [s.strip() for s in os.environ[TOOLS_ENV].split(",") if s.strip()]
    return [_absolute(spec, Path.cwd()) for spec in given]


def _absolute(spec: str, base: Path) -> str:
    module_part, sep, attr = spec.rpartition(":")
    if sep and (module_part.endswith(".py") or "/" in module_part):
        path = Path(module_part).expanduser()
        path = path if path.is_absolute() else base / path
        if path.is_file():
            return f"{path.resolve()}:{attr}"
    return spec


def project_tool_specs(config: Config, flags: Iterable[str] | None) -> list[str]:
    """The tool specs of a command: ``--tools`` or ``$PLANGATE_TOOLS``, else ``plangate.toml``'s ``tools``
    (file paths there relative to the file's folder), file paths made absolute."""
    given = tool_specs(flags)
    if given:
        return given
    return [_absolute(spec, config.folder) for spec in config.tools]


def tools_from(specs: Iterable[str] | None) -> ToolRegistry:
    """A registry with every tool the ``--tools`` specs name (imported here: the person named them)."""
    registry = ToolRegistry()
    for spec in tool_specs(specs):
        add_tools(registry, tools_in(import_target(spec), f"--tools {spec}"), f"--tools {spec}")
    return registry


def named_tools(config: Config, flags: Iterable[str] | None) -> tuple[ToolRegistry, list[str]]:
    """The registry of the tools a command names (its flags, else the file's ``tools``) and their specs.

    Raises:
        ConfigError: a spec cannot be imported, or two tools share a name.
    """
    specs = project_tool_specs(config, flags)
    label = "--tools" if tool_specs(flags) else f"{config.source or 'plangate.toml'}: tools"
    registry = ToolRegistry()
    for spec in specs:
        where = f"{label} {spec}"
        add_tools(registry, tools_in(import_target(spec, label=label), where), where)
    return registry, specs


def add_tools(registry: ToolRegistry, tools: Iterable[Tool], where: str) -> None:
    """Register ``tools``; one whose name another tool has already is an error naming ``where``."""
    for item in tools:
        if item.name not in registry:
            registry.register(item)
        elif registry.get(item.name) is not item:
            raise ConfigError(
                f"{where}: a tool named {item.name!r} is offered already; tool names must be unique"
            )


def stored_tool_specs(store: Store, run_id: str) -> list[str]:
    """What a run (its root run) recorded as the origin of its tools: text to show, never to import."""
    run = store.get_run(store.root_of(run_id))
    specs = run.input.get("tools")
    return [s for s in specs if isinstance(s, str)] if isinstance(specs, list) else []


def entry_point_tools(stored: Iterable[str], registry: ToolRegistry) -> None:
    """Add the tools of installed ``plangate.tools`` entry points that the stored specs name."""
    wanted = set(stored)
    if not wanted:
        return
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        if entry.name in wanted or entry.value in wanted:
            where = f"entry point {entry.name} ({entry.value})"
            try:
                target = entry.load()
            except Exception as exc:
                raise ConfigError(f"{where}: cannot be loaded: {type(exc).__name__}: {exc}") from None
            add_tools(registry, tools_in(target, where), where)


def entry_points_offering(names: Iterable[str], registry: ToolRegistry) -> None:
    """Add the installed ``plangate.tools`` entry points that offer a tool of ``names`` (a run's recorded
    tool names), each whole; one that cannot be loaded is passed over (it is not what the run named)."""
    wanted = {name for name in names if name not in registry}
    if not wanted:
        return
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        try:
            offered = list(tools_in(entry.load(), f"entry point {entry.name}"))
        except Exception:  # a broken package's entry point is not this run's tools
            continue
        if wanted & {item.name for item in offered}:
            add_tools(registry, offered, f"entry point {entry.name} ({entry.value})")
            wanted -= {item.name for item in offered}
        if not wanted:
            return


class Servers(Protocol):
    """MCP servers started for a command."""

    def close(self) -> None:
        """Stop them."""
        ...


def start_mcp(config: Config, registry: ToolRegistry) -> Servers:
    """Start the file's ``[[mcp]]`` servers and add their tools to ``registry``.

    Raises:
        ConfigError: the MCP SDK is missing, or a server does not start (the message names it and the file).
    """
    try:
        from plangate.tools.mcp import McpServersThread
    except ImportError as exc:
        raise ConfigError(f"{config.source}: [[mcp]] servers need the MCP SDK: {exc}") from None
    servers = McpServersThread(config)
    try:
        servers.start()
    except PlangateError as exc:
        raise ConfigError(f"{config.source or 'plangate.toml'}: {exc}") from None
    try:
        add_tools(registry, servers.tools(), f"{config.source}: [[mcp]]")
    except BaseException:
        servers.close()
        raise
    return servers


def missing_tools(run_id: str, missing: list[str], stored: list[str], config: Config) -> ConfigError:
    """The error of a run that needs tools none of this command's sources (its flags, the plangate.toml
    read, the installed entry points) provide: which, where it looked, and how to name them."""
    started = f" (it was started with --tools {' --tools '.join(stored)})" if stored else ""
    looked = f"{config.source}'s tools" if config.source is not None else "no plangate.toml here"
    return ConfigError(
        f"run {run_id!r} needs tools that are not available here: {', '.join(missing)}{started}; looked in "
        f"--tools, ${TOOLS_ENV}, {looked} and the installed plangate.tools entry points. Name them when you "
        "run this command: --tools MODULE:ATTR or --tools FILE.py:ATTR, $PLANGATE_TOOLS, or run it in the "
        "folder of the plangate.toml that lists them (or --config it); a run's stored tool specs are never "
        "imported (approve, reject and answer with --no-resume only record the answer, and need none)"
    )


__all__ = [
    "ENTRY_POINTS",
    "TOOLS_ENV",
    "Servers",
    "add_tools",
    "announced_model",
    "entry_point_tools",
    "entry_points_offering",
    "missing_tools",
    "model_spec",
    "named_tools",
    "project_tool_specs",
    "require_store",
    "start_mcp",
    "step_model",
    "store_url",
    "stored_tool_specs",
    "tool_specs",
    "tools_from",
]
