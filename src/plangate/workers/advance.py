"""What a worker does with "advance run R": take the run's lease, advance it to its next wait or end.

For: ``WorkerSettings`` (what a worker works with: its store, its tools and formulas, its model, all from
its own flags and config, never from stored data) and ``Advancer``, which handles one message. The message
is only a hint: the store says whether the run needs advancing (``due``), and the lease says who may. A
message for a run that ended, that waits on a person with nothing new, or whose lease another live worker
holds is dropped (a duplicate, a re-delivery after the visibility timeout, a late copy from the reaper);
the run is never advanced twice at once; a run waiting for a slot of its owner's (``runs_at_once``) is not
started. A sub-run is advanced through its root, which adopts it. Each kind of run is advanced by its engine
(``plangate.engines``), and a kind workers do not advance (a copilot turn: it runs where it was asked) is
dropped. Not for: Celery (``worker.py``) or finding runs nobody
advances (``reaper.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from plangate.config import load_config
from plangate.engines import ProcessEngines, build
from plangate.errors import ConfigError, NotFoundError, PlangateError, RunLeased, UserError
from plangate.models import Model, resolve_model
from plangate.runs.quotas import Admissions, LimitSettings
from plangate.runs.webhooks.deliver import DeliverySettings
from plangate.store import RunRecord, Store, open_store
from plangate.tools import Tool, ToolRegistry
from plangate.tools.specs import load_tools
from plangate.workers._app import DEFAULT_VISIBILITY_TIMEOUT

if TYPE_CHECKING:
    from plangate.tools.mcp import McpServersThread

logger = logging.getLogger("plangate.workers")

#: Seconds a worker's lease on a run lasts unless renewed (every third of it): how long a run whose worker
#: died on another machine waits before it is taken over.
DEFAULT_WORKER_LEASE_TTL = 10.0


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker works with.

    Attributes:
        store: the store URL (``postgresql://…``) every worker and server shares.
        broker: the Redis URL of the queue.
        tools: tool specs (``module:attr``, ``file.py:attr``) resolved in each worker process.
        paths: directories searched for formulas (sub-formulas named by formula steps).
        model: the model spec of agent runs, and of agent and llm steps, that name none; None: the runs'
            own (rebuilt from the spec they recorded) and the default model.
        lease_ttl: seconds a lease lasts unless renewed.
        reap_every: seconds between two passes of the reaper.
        unleased_grace: seconds a queued run without a lease may wait before the reaper enqueues it again
            (it may still be in the queue; once the queue is empty it is enqueued at once).
        visibility_timeout: Redis's re-delivery timeout for unacknowledged messages.
        concurrency: Celery worker processes (None: Celery's default, one per CPU).
        transport: more options of kombu's Redis transport, as ``(name, value)`` pairs (how often it
            gives back messages whose visibility timeout passed: ``unacked_restore_interval``, ...).
        config: a ``plangate.toml`` whose ``[[mcp]]`` servers each worker process starts for itself (after
            the fork, when it first needs its tools) and stops with the process; their tools are offered
            with those of ``tools``.
        registry: tools given in code, offered with those of ``tools`` (embedding a worker).
        model_object: a model given in code, used as ``model`` is (embedding a worker; a test double).
        operations_every: seconds between two passes of the schedules and the owners' slots (0: none).
        schedules: fire the store's schedules (``plangate.runs.scheduler``).
        schedule_grace: how late a slot may fire and still be on time (None: the scheduler's default).
        limits: plangate.toml's ``[limits]`` (the runs at once of a schedule's runs, the daily budgets).
        webhooks: how webhook deliveries are made (``[webhooks]``); None: this worker makes none.
    """

    store: str
    broker: str
    tools: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    model: str | None = None
    lease_ttl: float = DEFAULT_WORKER_LEASE_TTL
    reap_every: float = 2.0
    unleased_grace: float = 60.0
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT
    concurrency: int | None = None
    transport: tuple[tuple[str, float], ...] = ()
    config: str | None = None
    registry: ToolRegistry | None = field(default=None, compare=False)
    model_object: Model | None = field(default=None, compare=False)
    operations_every: float = 0.5
    schedules: bool = True
    schedule_grace: float | None = None
    limits: LimitSettings | None = None
    webhooks: DeliverySettings | None = field(default_factory=DeliverySettings)


class Advancer:
    """Advances the runs named by messages, one at a time, in one worker process.

    Args:
        settings: the worker's settings.
        store: the store to use (default: opened from ``settings.store`` when first needed).
    """

    def __init__(self, settings: WorkerSettings, store: Store | None = None) -> None:
        self.settings = settings
        self._store = store
        self._tools: ToolRegistry | None = None
        self._model: Model | None = settings.model_object
        self._mcp: McpServersThread | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.settings.store)
        return self._store

    @property
    def tools(self) -> ToolRegistry:
        """The worker's tools: its specs, its registry and its MCP servers' (resolved once, here, never
        from a run).

        Raises:
            ConfigError: a spec cannot be imported, or an MCP server of ``config`` does not start.
        """
        if self._tools is None:
            registry = load_tools(self.settings.tools)
            extras = self.settings.registry.tools() if self.settings.registry is not None else []
            for extra in [*extras, *self._mcp_tools()]:
                if extra.name not in registry:
                    registry.register(extra)
            self._tools = registry
        return self._tools

    def _mcp_tools(self) -> list[Tool]:
        if self.settings.config is None:
            return []
        config = load_config(Path(self.settings.config))
        if not config.mcp:
            return []
        from plangate.tools.mcp import McpServersThread

        servers = McpServersThread(config)
        try:
            servers.start()
        except PlangateError as exc:
            raise ConfigError(f"{config.source}: {exc}") from None
        self._mcp = servers
        return servers.tools()

    def model(self) -> Model | None:
        """The worker's model, when it has one (resolved once)."""
        if self._model is None and self.settings.model is not None:
            self._model = resolve_model(self.settings.model)
        return self._model

    def close_tools(self) -> None:
        """Stop the MCP servers this advancer started (its store stays open)."""
        if self._mcp is not None:
            self._mcp.close()
            self._mcp = None

    def close(self) -> None:
        self.close_tools()
        if self._store is not None:
            self._store.close()
            self._store = None

    async def advance(self, run_id: str) -> str:
        """Advance the run (its root) to its next wait or its end, if it needs it and nobody else has it.

        Returns one line saying what happened (for the worker's log). Never raises for a run it cannot or
        need not advance; a store that fails raises (the run keeps its lease until it expires, and the
        reaper hands it on).
        """
        store = self.store
        engines = self._engines().registry  # one lease book per message: what one advance holds, it releases
        try:
            run = store.get_run(run_id)
            root = run if run.parent_run_id is None else store.get_run(store.root_of(run_id))
        except NotFoundError:
            return f"dropped {run_id}: no such run"
        if root.kind not in engines or not engines.of(root).remote:
            return f"dropped {run_id}: a {root.kind} run is not advanced by workers"
        # an answered sub-run (or agent step's agent) is due while its root still waits for it
        if not engines.of(root).due(root) and (run.id == root.id or not engines.of(run).due(run)):
            return f"dropped {run_id}: {root.status}, nothing to advance"
        if root.status == "queued" and not _may_start(store, root.id):
            return f"dropped {run_id}: it waits for a slot of owner {root.owner!r}"
        try:
            status = await engines.of(root).advance(root.id)
        except RunLeased as exc:
            return f"dropped {run_id}: {exc}"
        except UserError as exc:
            # What this worker lacks (a tool, the model) or a run it cannot read: another worker may do.
            logger.error("cannot advance run %s here: %s", root.id, exc)
            return f"dropped {run_id}: {exc}"
        return f"advanced {root.id}: {status}"

    def _engines(self) -> ProcessEngines:
        return build(
            self.store,
            self.tools,
            model=self.model(),
            search_paths=[Path(p) for p in self.settings.paths] or None,
            tool_specs=list(self.settings.tools),
            lease_ttl=self.settings.lease_ttl,
        )


def _may_start(store: Store, run_id: str) -> bool:
    try:
        return Admissions(store).may_start(run_id)
    except ConfigError:
        return True  # a store double: no slots


def due(store: Store, run: RunRecord) -> bool:
    """Whether a run needs advancing now, as the engine of its kind says (a kind no engine advances never
    does)."""
    engines = build(store).registry
    return run.kind in engines and engines.of(run).due(run)


__all__ = ["DEFAULT_WORKER_LEASE_TTL", "Advancer", "WorkerSettings", "due"]
