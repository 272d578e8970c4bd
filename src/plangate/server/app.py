"""The app factory: ``create_app(store, tools)`` builds the FastAPI application of the HTTP API.

For: wiring the store, the tools, the formula executor, the agent runtime, the event broadcaster and the run
supervisor into one application, with the error handlers, the body-size limit, the start-up that recovers
unfinished runs, and the web console's static files at ``/``. Not for: serving it (``plangate serve`` runs it
under uvicorn) or any route (``routes/``).

Example (tests drive it with ``fastapi.testclient.TestClient`` used as a context manager, which runs the
start-up and the shutdown)::

    app = create_app(open_store(":memory:"), tools_from(["examples/formulas/tools.py:registry"]), auth=False)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from plangate import __version__
from plangate._offloop import off_loop
from plangate.config import BudgetConfig, ModelPrice
from plangate.engines import build as build_engines
from plangate.errors import ConfigError
from plangate.models import Model
from plangate.runs import Runs
from plangate.runs.executor import Queue
from plangate.runs.operations import Operations
from plangate.runs.quotas import LimitSettings, LimitsOf
from plangate.runs.scheduler import TICK
from plangate.runs.telemetry import metrics
from plangate.runs.webhooks.deliver import Deliverer, DeliverySettings
from plangate.server._asks import AskJobs
from plangate.server._deps import Services
from plangate.server._headers import SecurityHeaders
from plangate.server._limits import MAX_BODY, BodyLimit
from plangate.server._model_info import ModelInfo
from plangate.server._problems import install
from plangate.server._retention import Retention, prune_every
from plangate.server._sources import DeclaredSource, SourceRegistry
from plangate.server.broadcast import Broadcaster
from plangate.server.routes import ROUTERS
from plangate.server.tokens import pepper_from_env
from plangate.store import SQLiteStore, Store
from plangate.tools import ToolRegistry

logger = logging.getLogger("plangate.server")

_SWEEP_EVERY = 10.0
"""Seconds between two looks for turns a stopped server left unfinished (with workers)."""

CONSOLE = Path(__file__).parent / "static"
"""The web console's static files, served at ``/`` when present."""

_DESCRIPTION = """\
Runs of LLM agents and formulas that plan, act only with consent, and prove each step.

Every `/v1` route and `/metrics` need `Authorization: Bearer <token>` (make one with `plangate token
create`); the probes `/healthz` and `/readyz`, these docs and the console's page do not. A run belongs to
the owner of the token that started it; any other owner gets 404 for it, its events and its interactions.
Errors are JSON problem documents (`type`, `title`, `status`, `detail`); a run's events stream as
Server-Sent Events.
"""


def create_app(
    store: Store,
    tools: ToolRegistry | None = None,
    *,
    auth: bool = True,
    search_paths: Iterable[str | Path] = (),
    tool_specs: Iterable[str] = (),
    model: Model | str | None = None,
    model_origin: str = "",
    root: Path | None = None,
    pepper: bytes | None = None,
    heartbeat: float = 5.0,
    max_body: int = MAX_BODY,
    recover: bool = True,
    broker: str | None = None,
    data_dirs: Iterable[str | Path] = (),
    sources: Sequence[DeclaredSource] = (),
    allow_client_urls: bool = False,
    allowed_hosts: Sequence[str] = (),
    prices: Mapping[str, ModelPrice] | None = None,
    budget: BudgetConfig | None = None,
    retention: Retention | None = None,
    schedules: bool = True,
    schedule_tick: float = TICK,
    schedule_grace: float | None = None,
    limits: LimitSettings | None = None,
    webhooks: DeliverySettings | None = None,
) -> FastAPI:
    """Build the HTTP API on ``store``; the caller keeps the store and closes it after the app stops.

    Args:
        store: where runs live.
        tools: the tools formula steps and agent runs may use.
        auth: require a bearer token on every request (``False``: every request is the owner ``local``).
        search_paths: directories searched for formulas before the default places.
        tool_specs: where ``tools`` came from (``module:attr``), kept with runs for other processes.
        model: the model of agent runs, agent steps and llm steps that name none (None: the default). A
            spec is resolved when a run needs it: a server whose model is not installed starts, and only
            the runs that need it fail, with the install hint (``GET /v1/info`` says which it is).
        model_origin: where ``model`` came from (``--model``, ``PLANGATE_MODEL``, …), for ``/v1/info``.
        root: the directory formula conditions resolve ``file.exists`` against (default: the cwd).
        pepper: the key of the token hash (default: ``$PLANGATE_TOKEN_PEPPER``).
        heartbeat: seconds between two ``heartbeat`` messages on every event stream.
        max_body: the largest request body accepted, in bytes (larger: 413).
        recover: at start-up (and, with a broker, every few seconds), continue what stopped processes left.
        broker: the Redis URL of the workers' queue: runs are handed to workers (``plangate worker``);
            None: advanced here. Same API, same events either way.
        data_dirs: where owners may register SQLite files from (``POST /v1/sources``; default: the cwd).
        sources: the data sources the operator offers every owner (``[[sources]]``, ``--source``).
        allow_client_urls: let clients register ``postgresql://`` URLs (to ``allowed_hosts`` only).
        allowed_hosts: the hosts a client's URL may name (names, globs, ``host:port``, networks).
        prices: what each model's tokens cost (``[prices]``), for the costs of runs and turns.
        budget: the budgets of runs and turns whose request names none (``[budget]``).
        retention: prune ended runs past a horizon now and then (``server/_retention.py``); None: never.
        schedules: fire the store's schedules (``runs/scheduler.py``); every ``schedule_tick`` seconds the
            schedules are looked at and the free slots of owners' runs handed out (``runs/operations.py``);
            ``schedule_grace``: how late a slot may fire and still be on time.
        limits: each owner's limits (``[limits]``: requests per minute, runs at once, daily budgets, double
            texting; ``runs/quotas``), overridden per owner in the store; None: none.
        webhooks: how webhook deliveries are made (``[webhooks]``; ``runs/webhooks``); None: the defaults.
    """
    registry = tools if tools is not None else ToolRegistry()
    paths = [Path(path) for path in search_paths]
    engines = build_engines(
        store,
        registry,
        model=model,
        search_paths=paths,
        root=root,
        tool_specs=tool_specs,
        prices=prices,
        budget=budget,
    )
    queue = _queue(broker)
    runs = Runs(store, engines.registry, queue)
    registry_of_sources = SourceRegistry(
        store,
        [Path(d) for d in data_dirs] or [Path.cwd()],
        store.path if isinstance(store, SQLiteStore) else None,
        store_url=_postgres_url(store),
        declared=sources,
        allow_client_urls=allow_client_urls,
        allowed_hosts=allowed_hosts,
    )
    services = Services(
        store=store,
        tools=registry,
        engines=engines,
        runs=runs,
        broadcaster=Broadcaster(store, heartbeat=heartbeat),
        sources=registry_of_sources,
        asks=AskJobs(store, runs, registry_of_sources, model, engines.leases, prices=prices, budget=budget),
        auth=auth,
        pepper=pepper if pepper is not None else pepper_from_env(),
        search_paths=paths,
        model=ModelInfo(model, model_origin),
        limits=LimitsOf(store, limits),
        webhooks=webhooks or DeliverySettings(),
    )

    with contextlib.suppress(ConfigError):
        counted = metrics.enable()  # counted from the first run on, served at /metrics (no extra: a 404)
        # the workers' queue depth, read from the broker at each scrape (a queue that can count)
        waiting = getattr(queue, "waiting", None)
        if waiting is not None:
            counted.watch_queue(waiting)
    create = engines.formulas.create if schedules else None
    operations = Operations(store, create, services.limits, grace=schedule_grace)
    lifespan = _lifespan(
        services,
        recover=recover,
        sweep=recover and queue is not None,
        vet=bool(sources),
        retention=retention,
        operations=(operations, schedule_tick),
    )
    app = FastAPI(title="plangate", version=__version__, description=_DESCRIPTION, lifespan=lifespan)
    app.state.services = services
    install(app)
    for router in ROUTERS:
        app.include_router(router)
    if (CONSOLE / "index.html").is_file():  # last, so the API's routes win; static files need no token
        app.mount("/", StaticFiles(directory=CONSOLE, html=True), name="console")
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(SecurityHeaders)
    return app


def _lifespan(
    services: Services,
    *,
    recover: bool,
    sweep: bool,
    vet: bool,
    retention: Retention | None,
    operations: tuple[Operations, float],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What the app does when it starts and stops: the broadcaster, start-up recovery, the background
    passes (schedules and owners' slots, webhook deliveries on a thread of their own), and stopping every
    run task here (the runs stay in the store for the next start)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services.broadcaster.start()
        if recover:
            await services.runs.recover()
        background = []
        if sweep:
            # Workers take over the runs they advance; what runs only here (a copilot turn) is looked at by
            # every server, so one that dies mid-turn has its turn ended by another within a lease's ttl.
            background.append(asyncio.create_task(_sweep(services.runs)))
        if vet:
            # The operator's sources are opened once, off the start-up path: one log line each says what
            # it holds or why nobody can ask about it (a role that can write, the server's own store).
            background.append(asyncio.create_task(_vet_sources(services.sources)))
        if retention is not None:
            background.append(asyncio.create_task(prune_every(services.store, retention)))
        background.append(asyncio.create_task(_operations(services.runs, *operations)))
        deliveries = _deliveries(services)
        try:
            yield
        finally:
            for task in background:
                task.cancel()
            await deliveries()
            await services.runs.close()
            await services.broadcaster.stop()

    return lifespan


def _postgres_url(store: Store) -> str | None:
    """The URL of a PostgreSQL store (whose database is never a data source), without importing psycopg."""
    url = getattr(store, "url", None)
    return url if isinstance(url, str) and url.startswith(("postgresql:", "postgres:")) else None


def _queue(broker: str | None) -> Queue | None:
    if broker is None:
        return None
    from plangate.workers import RunQueue  # the workers extra: only a server with a broker needs it

    return RunQueue(broker)


async def _sweep(runs: Runs, every: float = _SWEEP_EVERY) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await runs.recover()
        except Exception as exc:  # a store that is down: the next pass tries again
            logger.warning("recovery pass failed: %s: %s", type(exc).__name__, exc)


async def _operations(runs: Runs, operations: Operations, every: float) -> None:
    """Fire the schedules and hand out owners' free slots every ``every`` seconds, starting the runs each
    pass says; a failed pass is logged and the next one tries again."""
    while True:
        try:
            for run_id in await off_loop(operations.run_pass):
                await runs.advance(run_id)
        except Exception as exc:
            logger.warning("schedules and slots pass failed: %s: %s", type(exc).__name__, exc)
        await asyncio.sleep(every)


def _deliveries(services: Services) -> Callable[[], Coroutine[Any, Any, None]]:
    """Start delivering webhooks on a thread of its own; returns what stops it (the attempts in flight
    finish first)."""
    try:
        deliverer = Deliverer(services.store, services.webhooks)
    except ConfigError as exc:  # a store without a database (a test double): nothing to deliver
        logger.info("no webhooks on this store: %s", exc)
        return _nothing
    stop = threading.Event()
    thread = threading.Thread(target=deliverer.forever, args=(stop,), name="plangate-webhooks", daemon=True)
    thread.start()

    async def stopped() -> None:
        stop.set()
        await asyncio.to_thread(thread.join, 60)
        await asyncio.to_thread(deliverer.close)

    return stopped


async def _nothing() -> None:
    return None


async def _vet_sources(registry: SourceRegistry) -> None:
    for name, found in (await asyncio.to_thread(registry.vet_declared)).items():
        if found.endswith(" tables"):
            logger.info("data source %r: %s", name, found)
        else:
            logger.error("data source %r cannot be asked about: %s", name, found)


__all__ = ["create_app"]
