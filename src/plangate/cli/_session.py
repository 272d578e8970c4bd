"""One command's session: its configuration, its store, its tools, its model and its engines, each made once
and closed when the command ends.

For: ``Session``, which the root command puts on the typer context (``ctx.obj``) and every command takes
with :func:`session` — the ``plangate.toml`` it reads (``--config`` given before the command or to it,
``$PLANGATE_CONFIG``, the working directory's), the store (opened on first use, so a command that needs
none opens none), the tools (with the file's MCP servers, started for the command and stopped after), the
model it names, and the engines and the ``Runs`` facade built from those (``plangate.engines.build``). A
stored run is continued only with tools this command names, all of them there before anything changes
(:meth:`Session.continuing`). Not for: the rules that find each of these (``_loading.py``) or what a command
prints.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import typer

from plangate.agent.engine import AgentEngine
from plangate.cli import _loading
from plangate.config import Config, load_config
from plangate.engines import ProcessEngines, build
from plangate.models import Model, resolve_model
from plangate.models._requests import set_default_timeout
from plangate.runs import Engines, Runs, telemetry
from plangate.runs.executor import Queue
from plangate.store import Store, open_store
from plangate.tools import ToolRegistry

OWNER = "local"
"""The owner of the runs a command starts (the server's owner of requests without a token, too)."""


class HandOff:
    """The queue of a command's ``Runs`` facade: what the facade asks to advance is handed to the workers
    (``--broker``), or kept for the command itself to advance in the foreground, under its live progress,
    rather than as a background task that would end with the command.

    Args:
        workers: the workers' queue; None: the command advances what is asked here.
    """

    def __init__(self, workers: Queue | None = None) -> None:
        self.workers = workers
        self.due: list[str] = []
        self.sent: list[bool] = []

    def enqueue(self, run_id: str) -> bool:
        """Hand ``run_id`` on: to the workers (False when their broker was unreachable), or to ``due``."""
        if self.workers is None:
            if run_id not in self.due:
                self.due.append(run_id)
            return True
        sent = self.workers.enqueue(run_id)
        self.sent.append(sent)
        return sent

    def take(self) -> list[str]:
        """The runs asked for since the last call, for the command to advance here."""
        due, self.due = self.due, []
        return due

    def close(self) -> None:
        """Close the connection to the workers' broker (once)."""
        if self.workers is not None:
            self.workers.close()
            self.workers = None


class _NamedModelAgents(AgentEngine):
    """Agent runs continued with the model the person named on this command (``--model``), whatever model
    each recorded: the engine's own rule keeps a run's recorded model (right for a server and its workers),
    but a person who says which model to go on with means it."""

    def _model_of(self, spec: str) -> Model | str | None:
        return self.model


class Session:
    """What one command works with, made on first use and closed when the command ends.

    Args:
        config_path: the ``--config`` given before the command (a command's own wins, see :meth:`use`).
    """

    def __init__(self, config_path: Path | None = None) -> None:
        self.config_path = config_path
        self.store_flag: str | None = None
        self.existing = False
        self.tool_flags: list[str] | None = None
        self._config: Config | None = None
        self._store: Store | None = None
        self._registry: ToolRegistry | None = None
        self._specs: list[str] = []
        self._engines: ProcessEngines | None = None
        self._runs: Runs | None = None
        self.queue = HandOff()
        self._closing = ExitStack()
        self._servers = ExitStack()

    def use(
        self,
        *,
        config: Path | None = None,
        store: str | None = None,
        tools: list[str] | None = None,
        existing: bool = False,
    ) -> Session:
        """Take the command's own ``--config``, ``--store`` and ``--tools`` (before anything is loaded);
        ``existing``: the command reads or continues runs, so the store must exist already."""
        if config is not None:
            self.config_path, self._config = config, None
        self.store_flag = store
        self.tool_flags = tools
        self.existing = existing
        return self

    # -- configuration and store --------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The configuration (read once; defaults when there is no file).

        Raises:
            ConfigFileError: the file named (or ``./plangate.toml``) cannot be read or does not validate.
        """
        if self._config is None:
            self._config = load_config(self.config_path)
            set_default_timeout(self._config.model_timeout)
            # [telemetry] turns tracing on for this command (the OTEL_* variables win over it).
            telemetry.configure(self._config.telemetry)
        return self._config

    def config_hint(self) -> str:
        """``--config PATH`` when this command named a file, for commands printed to run later."""
        return f"--config {self.config_path}" if self.config_path is not None else ""

    @property
    def store(self) -> Store:
        """The store (opened once, closed when the command ends); one that does not exist is not created
        for a command that only reads or continues runs (:meth:`use` with ``existing``).

        Raises:
            NotFoundError: ``existing``, and no SQLite store is at the path (the message names it).
            StoreError: the store cannot be reached or opened.
        """
        if self._store is None:
            url = _loading.store_url(self.config, self.store_flag)
            if self.existing:
                _loading.require_store(url)
            self._store = open_store(url)
            self._closing.callback(self._store.close)
        return self._store

    # -- tools and models ---------------------------------------------------------------------------------

    def tools(self, *, run: str | None = None) -> ToolRegistry:
        """The tools this command offers (loaded once, MCP servers running until the command ends).

        Args:
            run: a run the command continues: the installed entry points its stored specs name are added
                (its stored specs themselves are never imported).

        Raises:
            ConfigError: a spec cannot be imported, or an MCP server does not start (the message names it
                and the configuration file).
        """
        if self._registry is None:
            registry, self._specs = _loading.named_tools(self.config, self.tool_flags)
            if run is not None:
                stored = _loading.stored_tool_specs(self.store, run)
                _loading.entry_point_tools([s for s in stored if s not in self._specs], registry)
            if self.config.mcp:
                self._servers.callback(_loading.start_mcp(self.config, registry).close)
            self._registry = registry
        return self._registry

    @property
    def tool_specs(self) -> list[str]:
        """Where this command's tools came from (``module:attr``), recorded with the runs it starts."""
        return list(self._specs)

    def stop_tools(self) -> None:
        """Stop the MCP servers now (a command that hands on to processes starting their own)."""
        self._servers.close()

    def model(self, flag: str | None, *, of: str = "model") -> Model:
        """The model ``--model`` names, else the project's or the default one, said on stderr."""
        return _loading.announced_model(self.config, flag, of=of)

    def step_model(self, flag: str | None) -> str | None:
        """The model spec of runs and steps that name none (None: the runtime's default rule)."""
        return _loading.step_model(self.config, flag)

    # -- engines and the facade ---------------------------------------------------------------------------

    def engines(
        self,
        model: Model | str | None = None,
        *,
        search_paths: list[Path] | None = None,
        model_wins: bool = False,
    ) -> ProcessEngines:
        """The engines of this command (built once: the first call's arguments hold), over its store and
        the tools loaded so far (none when :meth:`tools` was not called: a command that runs nothing).

        Args:
            model: the model of runs and steps that name none.
            search_paths: directories searched for formulas first.
            model_wins: ``model`` continues agent runs too, whatever model they recorded.
        """
        if self._engines is None:
            registry = self._registry if self._registry is not None else ToolRegistry()
            config = self.config
            built = build(
                self.store,
                registry,
                model=model,
                search_paths=search_paths,
                tool_specs=self._specs,
                prices=config.prices,
                budget=config.budget,
            )
            if model_wins and model is not None:
                agents = _NamedModelAgents(
                    self.store,
                    registry,
                    model=model,
                    leases=built.leases,
                    tool_specs=self._specs,
                    prices=config.prices,
                    budget=config.budget,
                )
                engines = Engines([agents if engine is built.agents else engine for engine in built.registry])
                built = replace(built, registry=engines, agents=agents)
            self._engines = built
        return self._engines

    def runs(self, broker: str | None = None) -> Runs:
        """The ``Runs`` facade over :meth:`engines` (built once), handing what it advances to the workers
        at ``broker``, else to this command (``queue``).

        Raises:
            ConfigError: ``broker`` is not a Redis URL, or the workers extra is not installed.
        """
        if self._runs is None:
            if broker is not None:
                from plangate.workers import RunQueue, broker_url

                self.queue = HandOff(RunQueue(broker_url(broker)))
            self._closing.callback(self.queue.close)
            self._runs = Runs(self.store, self.engines().registry, self.queue)
        return self._runs

    def continuing(
        self,
        run_id: str,
        *,
        model: str | None = None,
        broker: str | None = None,
        search_paths: list[Path] | None = None,
        all_tools: bool = True,
    ) -> Runs:
        """The facade for continuing a stored run (``run_id`` or its root): this command's tools, which must
        include every tool the run's tree needs unless the workers continue it (``broker``) or the command
        only records an answer (not ``all_tools``), the model ``--model`` names, which then continues its
        agents too (else each goes on with its own), and the folders searched for formulas first (where a
        changed formula is cooked again from). A tool the run recorded by name and this command does not
        offer is looked for among the installed ``plangate.tools`` entry points.

        Raises:
            ConfigError: a tool the run needs is not offered here (named, with how to offer it), or a tool
                or the model cannot be loaded.
        """
        root = self.store.root_of(run_id)
        registry = self.tools(run=root)
        chosen: Model | str | None = resolve_model(model) if model else self.step_model(None)
        self.engines(chosen, search_paths=search_paths, model_wins=model is not None)
        runs = self.runs(broker)
        if broker is None and all_tools:
            missing = [name for name in runs.tool_names(root) if name not in registry]
            if missing:
                _loading.entry_points_offering(missing, registry)
                missing = [name for name in missing if name not in registry]
            if missing:
                raise _loading.missing_tools(
                    root, missing, _loading.stored_tool_specs(self.store, root), self.config
                )
        return runs

    def close(self) -> None:
        """Stop the MCP servers, close the store and the broker's connection; forget the model timeout."""
        try:
            self._servers.close()
            self._closing.close()
        finally:
            set_default_timeout(None)


def session(
    ctx: typer.Context,
    *,
    config: Path | None = None,
    store: str | None = None,
    tools: list[str] | None = None,
    existing: bool = False,
) -> Session:
    """The command's session, with its own ``--config``, ``--store`` and ``--tools``; ``existing``: a
    command that reads or continues runs, which never creates a store.

    The root command makes it; a command registered on another root (a test's) gets one made here, closed
    when that root ends.
    """
    found = ctx.find_object(Session)
    if found is None:
        found = Session()
        root = ctx.find_root()
        root.obj = found
        root.call_on_close(found.close)
    return found.use(config=config, store=store, tools=tools, existing=existing)


__all__ = ["OWNER", "HandOff", "Session", "session"]
