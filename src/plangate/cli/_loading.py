"""Finding what a command needs from the user's project: its configuration, store, tools and model.

For: ``plangate.toml`` (``--config PATH``, given to the command or before it, else ``$PLANGATE_CONFIG``,
else ``./plangate.toml`` when there is one) and what it sets; the store (``--store``, ``$PLANGATE_STORE``,
the file's ``store``, ``.plangate/plangate.db``); the tools (``--tools module:attr`` / ``file.py:attr`` or
``$PLANGATE_TOOLS``, else the file's ``tools``; plus the file's ``[[mcp]]`` servers, started for the
command and stopped after it); the model (``--model``, ``$PLANGATE_MODEL``, the file's ``model``, then the
default rule), and the file's ``model_timeout``. A flag wins over the environment, the environment over the
file. Not for: the store, the registry or the MCP sessions themselves.

Nothing stored is executed. A run records where its tools came from, but continuing it (``resume``,
``approve``, ``reject``, ``answer``, ``complete``) never imports a module or a file that the run's stored
input names: anyone who can write the database would otherwise run code as whoever answers next. Its tools
come from what the person running the command names (flags, ``$PLANGATE_TOOLS``, ``plangate.toml``), or
from the ``plangate.tools`` entry points of installed packages (the allow-list: a stored spec may pick one
of those, by name or value, and nothing else). When the run needs a tool that none of these provide, the
command says which, and how to provide them, before anything changes.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Protocol

import typer
from rich.markup import escape

from plangate.cli._console import err
from plangate.config import CONFIG_ENV, Config, load_config
from plangate.errors import ConfigError, NotFoundError, PlangateError
from plangate.models import Model
from plangate.models._requests import set_default_timeout
from plangate.models.registry import ENV_VAR as MODEL_ENV
from plangate.models.registry import default_model_spec, describe_model, resolve_model
from plangate.store import Store, open_store
from plangate.store.url import STORE_ENV
from plangate.tools import Tool, ToolRegistry
from plangate.tools.specs import import_target, tools_in

ENTRY_POINTS = "plangate.tools"
"""The entry-point group whose tools a stored run may name: installed packages, not stored paths."""

TOOLS_ENV = "PLANGATE_TOOLS"


@dataclass
class _Chosen:
    """The configuration of this invocation: the path named, and the file once read (with what it was
    read for: the path, the working directory and ``$PLANGATE_CONFIG``)."""

    path: Path | None = None
    config: Config | None = None
    key: tuple[str, ...] = ()


_chosen = _Chosen()


def start_invocation(path: Path | None = None) -> None:
    """Forget the configuration of an earlier invocation in this process, and read ``path`` (when given)
    in this one; the root command calls it."""
    _chosen.path = path
    _chosen.config = None
    set_default_timeout(None)


def _choose(value: Path | None) -> Path | None:
    if value is not None:
        _chosen.path = value
        _chosen.config = None
    return value


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="The plangate.toml to read (default $PLANGATE_CONFIG, else ./plangate.toml when present).",
        callback=_choose,
        is_eager=True,
    ),
]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store URL (sqlite:///path.db or postgresql://user@host/db); default $PLANGATE_STORE, "
        "plangate.toml's store, or "
        ".plangate/plangate.db.",
    ),
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        help="Tools to offer, as module:attr or file.py:attr (a ToolRegistry, a Tool, or a list of them); "
        "repeatable; default $PLANGATE_TOOLS (comma-separated), else plangate.toml's tools. The MCP servers "
        "of plangate.toml are added either way.",
    ),
]


def project() -> Config:
    """The configuration of this invocation (read once; defaults when there is no file).

    Raises:
        ConfigFileError: the file named (or ``./plangate.toml``) cannot be read or does not validate.
    """
    key = (str(_chosen.path), os.getcwd(), os.environ.get(CONFIG_ENV, ""))
    if _chosen.config is None or _chosen.key != key:
        config = load_config(_chosen.path)
        set_default_timeout(config.model_timeout)
        _chosen.config, _chosen.key = config, key
    return _chosen.config


def config_hint() -> str:
    """``--config PATH`` when this invocation named a file, for commands printed to run later."""
    return f"--config {_chosen.path}" if _chosen.path is not None else ""


# -- the store ----------------------------------------------------------------------------------------------


def store_from(url: str | None) -> Store:
    """Open the store named on the command line, else by ``$PLANGATE_STORE``, else by ``plangate.toml``,
    else the default one."""
    if url is None and not os.environ.get(STORE_ENV, "").strip():
        config = project()
        if config.store is not None:
            url = _store_url(config, config.store)
    return open_store(url)


def _store_url(config: Config, url: str) -> str:
    """A SQLite path of the file made relative to the file's folder; other forms as they are."""
    if url.strip() in (":memory:", "sqlite://", "sqlite://:memory:", "sqlite:///:memory:"):
        return url
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return f"sqlite:///{config.resolve(url.removeprefix('sqlite:///'))}"
    if "://" not in url and not url.lower().startswith("sqlite:"):
        return str(config.resolve(url))
    return url


# -- the model ----------------------------------------------------------------------------------------------


def model_spec(spec: str | None) -> tuple[str, str]:
    """The model spec to use and where it came from: ``--model``, ``$PLANGATE_MODEL``, ``plangate.toml``,
    else the default rule (an API key, or the local model)."""
    if spec:
        return spec, "--model"
    chosen = os.environ.get(MODEL_ENV, "").strip()
    if chosen:
        return chosen, MODEL_ENV
    config = project()
    if config.model is not None:
        return config.model, f"model in {config.source or 'plangate.toml'}"
    return default_model_spec()


def step_model(spec: str | None) -> str | None:
    """The model spec for formula steps and runs that name none: ``--model``, else the file's ``model``
    unless ``$PLANGATE_MODEL`` is set (None: the runtime's default rule)."""
    if spec:
        return spec
    if os.environ.get(MODEL_ENV, "").strip():
        return None
    return project().model


def model_from(spec: str | None, *, of: str = "model") -> Model:
    """The model ``--model`` names, else the project's or the default one; says on stderr which and why.

    Args:
        spec: the ``--model`` option, if given.
        of: what the model is for, as the line starts (``model``, ``model of agent and llm steps``).

    Raises:
        ConfigError: the spec names no usable model (the message says where the spec came from).
    """
    chosen, origin = model_spec(spec)
    try:
        model = resolve_model(chosen)
    except ConfigError as exc:
        if origin == "--model":
            raise
        raise ConfigError(f"{origin}: {chosen!r}: {exc}") from None
    err.print(f"{of}: {escape(describe_model(model))} [dim]({escape(origin)})[/]")
    return model


# -- tools ---------------------------------------------------------------------------------------------------


def tool_specs(specs: Iterable[str] | None) -> list[str]:
    """The ``--tools`` specs (or ``PLANGATE_TOOLS``), file paths made absolute so they work from anywhere."""
    given = list(specs or [])
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


def project_tool_specs(flags: Iterable[str] | None) -> list[str]:
    """The tool specs of this invocation: ``--tools`` or ``$PLANGATE_TOOLS``, else ``plangate.toml``'s
    ``tools`` (file paths there relative to the file's folder), file paths made absolute."""
    given = tool_specs(flags)
    if given:
        return given
    config = project()
    return [_absolute(spec, config.folder) for spec in config.tools]


def tools_from(specs: Iterable[str] | None) -> ToolRegistry:
    """A registry with every tool the ``--tools`` specs name (imported here: the person named them)."""
    registry = ToolRegistry()
    for spec in tool_specs(specs):
        _add(registry, tools_in(import_target(spec), f"--tools {spec}"), f"--tools {spec}")
    return registry


def _add(registry: ToolRegistry, tools: Iterable[Tool], where: str) -> None:
    for item in tools:
        if item.name not in registry:
            registry.register(item)
        elif registry.get(item.name) is not item:
            raise ConfigError(
                f"{where}: a tool named {item.name!r} is offered already; tool names must be unique"
            )


def stored_tool_specs(store: Store, run_id: str) -> list[str]:
    """What a run (its root run) recorded as the origin of its tools: text to show, never to import."""
    run = store.get_run(run_id)
    while run.parent_run_id is not None:
        run = store.get_run(run.parent_run_id)
    specs = run.input.get("tools")
    return [s for s in specs if isinstance(s, str)] if isinstance(specs, list) else []


def _entry_point_tools(stored: Iterable[str], registry: ToolRegistry) -> None:
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
            _add(registry, tools_in(target, where), where)


def needed_tools(store: Store, run_id: str) -> list[str]:
    """The tool names a run and its sub-runs use: an agent's tools, a formula's tool and agent steps."""
    from plangate.agent import AgentConfig
    from plangate.formulas.plan import AgentExecutor, ToolExecutor
    from plangate.formulas.runtime import FormulaRunner

    root = store.get_run(run_id)
    while root.parent_run_id is not None:
        root = store.get_run(root.parent_run_id)
    names: dict[str, None] = {}
    pending = [root]
    seen = 0
    while pending and seen < 10_000:
        run = pending.pop()
        seen += 1
        if run.kind == "agent":
            try:
                names.update(dict.fromkeys(AgentConfig.model_validate(run.input.get("agent")).tools))
            except ValueError:
                pass  # unreadable settings: the runtime reports them in its own words
        else:
            try:
                plan = FormulaRunner(store).load(run.id).plan
            except (NotFoundError, PlangateError):
                plan = None
            for step in plan.steps if plan is not None else ():
                if isinstance(step.executor, ToolExecutor):
                    names[step.executor.name] = None
                elif isinstance(step.executor, AgentExecutor):
                    names.update(dict.fromkeys(step.executor.tools))
        pending.extend(store.list_runs(parent_run_id=run.id, limit=1000).items)
    return list(names)


class _Servers(Protocol):
    def close(self) -> None: ...


@dataclass
class ProjectTools:
    """The tools of one command: its registry, where they came from, and the MCP servers behind some."""

    registry: ToolRegistry
    specs: list[str]
    servers: list[_Servers] = field(default_factory=list)

    def close(self) -> None:
        """Stop the MCP servers this command started."""
        for server in self.servers:
            server.close()
        self.servers = []


@contextmanager
def project_tools(
    flags: Iterable[str] | None, *, run: tuple[Store, str] | None = None
) -> Iterator[ProjectTools]:
    """The tools of this command, with ``plangate.toml``'s MCP servers running until the block ends.

    Args:
        flags: the ``--tools`` option.
        run: ``(store, run_id)`` when the command continues that run: the tools it needs must all be
            here (its stored specs are never imported; they may only pick installed entry points).

    Raises:
        ConfigError: a spec cannot be imported, an MCP server does not start (the message names it and
            the configuration file), or the run needs tools that none of the sources provide.
    """
    specs = project_tool_specs(flags)
    config = project()
    named_here = bool(tool_specs(flags))
    label = "--tools" if named_here else f"{config.source or 'plangate.toml'}: tools"
    registry = ToolRegistry()
    for spec in specs:
        where = f"{label} {spec}"
        _add(registry, tools_in(import_target(spec, label=label), where), where)
    if run is not None:
        _entry_point_tools([s for s in stored_tool_specs(*run) if s not in specs], registry)
    loaded = ProjectTools(registry, specs)
    try:
        if config.mcp:
            loaded.servers.append(_start_mcp(config, registry))
        if run is not None:
            _check_available(run[0], run[1], registry)
        yield loaded
    finally:
        loaded.close()


def _start_mcp(config: Config, registry: ToolRegistry) -> _Servers:
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
        _add(registry, servers.tools(), f"{config.source}: [[mcp]]")
    except BaseException:
        servers.close()
        raise
    return servers


def _check_available(store: Store, run_id: str, registry: ToolRegistry) -> None:
    missing = [name for name in needed_tools(store, run_id) if name not in registry]
    if not missing:
        return
    stored = stored_tool_specs(store, run_id)
    started = f" (it was started with --tools {' --tools '.join(stored)})" if stored else ""
    raise ConfigError(
        f"run {run_id!r} needs tools that are not available here: {', '.join(missing)}{started}. Name them "
        "when you run this command: --tools MODULE:ATTR or --tools FILE.py:ATTR, $PLANGATE_TOOLS, or tools = "
        "[...] / [[mcp]] servers in plangate.toml; a run's stored tool specs are never imported"
    )


__all__ = [
    "ENTRY_POINTS",
    "ConfigOpt",
    "ProjectTools",
    "StoreOpt",
    "ToolsOpt",
    "config_hint",
    "model_from",
    "model_spec",
    "needed_tools",
    "project",
    "project_tool_specs",
    "project_tools",
    "start_invocation",
    "step_model",
    "store_from",
    "stored_tool_specs",
    "tool_specs",
    "tools_from",
]
