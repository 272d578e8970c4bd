"""``plangate worker``: a Celery worker that advances runs handed to it through a Redis broker.

For: turning the command line (and ``plangate.toml``: ``--config``, ``$PLANGATE_CONFIG`` or the working
directory's, read as every command reads it) into ``WorkerSettings`` and running the worker. The worker's
tools, formulas and model come from here only, never from the runs it advances. Not for: the worker
itself (``plangate.workers``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from plangate.cli._console import err, fail
from plangate.cli._loading import project_tool_specs
from plangate.cli._options import ConfigOpt, StoreOpt, ToolsOpt
from plangate.cli._session import Session, session
from plangate.errors import ConfigError, UserError
from plangate.store import STORE_ENV

if TYPE_CHECKING:
    from plangate.workers import WorkerSettings

BROKER_ENV = "PLANGATE_BROKER"


def register(app: typer.Typer) -> None:
    """Add ``worker`` to ``app``."""
    app.command("worker")(worker_command)


def worker_command(
    ctx: typer.Context,
    store: StoreOpt = None,
    broker: Annotated[
        str | None,
        typer.Option("--broker", help=f"The Redis URL of the queue (default ${BROKER_ENV})."),
    ] = None,
    tools: ToolsOpt = None,
    path: Annotated[
        list[Path] | None,
        typer.Option("--path", "-p", help="A directory to search for formulas first (repeatable)."),
    ] = None,
    config: ConfigOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="The model of agent runs and agent/llm steps that name none (default: each run's own).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Runs advanced at once, one process each (default: one per CPU)."),
    ] = None,
    lease_ttl: Annotated[
        float, typer.Option("--lease-ttl", min=1.0, help="Seconds a run's lease lasts unless renewed.")
    ] = 10.0,
    loglevel: Annotated[str, typer.Option(help="The log level (debug, info, warning, error).")] = "info",
    log_format: Annotated[
        str, typer.Option("--log-format", help="text, or json: one object a line, with the run's id.")
    ] = "text",
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", min=1, max=65535, help="Prometheus metrics on this loopback port."),
    ] = None,
) -> None:
    """Advance the runs that servers and commands hand to the workers (`--broker`), on a shared store.

    A run is advanced only while this worker holds its lease (renewed while it works): one worker per run,
    and a run whose worker died is taken over once its lease expired."""
    try:
        from plangate.workers import WorkerSettings, broker_url, run_worker
    except UserError as exc:
        fail(str(exc))
        return
    if log_format not in ("text", "json"):
        fail(f"--log-format: expected text or json; found {log_format!r}")
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        settings = WorkerSettings(
            store="",
            broker=broker_url(broker or os.environ.get(BROKER_ENV)),
            paths=tuple(str(p) for p in path or ()),
            lease_ttl=lease_ttl,
            concurrency=concurrency,
        )
        settings = _with_config(s, settings, model)
        _check(s, settings)
    except UserError as exc:
        fail(str(exc))
        return
    if not settings.store.startswith(("postgresql://", "postgres://", "postgresql+")):
        err.print(
            "[bold yellow]warning:[/] the store is not PostgreSQL: workers on other machines cannot share "
            "it, and servers' event streams do not follow the commits made here"
        )
    run_worker(settings, loglevel=loglevel.upper(), log_format=log_format, metrics_port=metrics_port)


def _with_config(s: Session, settings: WorkerSettings, model: str | None) -> WorkerSettings:
    """The settings with what the flags, the environment and ``plangate.toml`` say, in that order."""
    found = s.config
    chosen_store = s.store_flag or os.environ.get(STORE_ENV, "").strip() or found.store
    if not chosen_store:
        raise ConfigError(
            f"--store: expected the shared store's URL (postgresql://…), ${STORE_ENV} or store in "
            "plangate.toml; found none"
        )
    from plangate.runs.quotas import LimitSettings
    from plangate.runs.webhooks.deliver import DeliverySettings

    return replace(
        settings,
        store=chosen_store,
        limits=LimitSettings.of_config(found.limits),
        webhooks=DeliverySettings.of_config(found.webhooks),
        tools=tuple(project_tool_specs(found, s.tool_flags)),
        model=model or found.model,
        # Each worker process starts the file's MCP servers for itself: they cannot be shared across a fork.
        config=str(found.source) if found.mcp and found.source is not None else None,
    )


def _check(s: Session, settings: WorkerSettings) -> None:
    """Fail now, with the reason, on what every worker process would fail on later (tools, MCP servers,
    the store)."""
    from plangate.store import open_store

    names = ", ".join(s.tools().names()) or "none"
    # Each worker process starts the MCP servers for itself (they cannot be shared across a fork).
    s.stop_tools()
    opened = open_store(settings.store)
    opened.close()
    from plangate.workers import RunQueue

    queue = RunQueue(settings.broker)
    try:
        queue.reachable()
    finally:
        queue.close()
    paths = ", ".join(settings.paths) or "the default places"
    err.print(f"worker: tools {escape(names)}; formulas from {escape(paths)}")


__all__ = ["BROKER_ENV", "register"]
