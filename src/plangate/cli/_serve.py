"""``plangate serve`` and ``plangate token create | list | revoke``.

For: starting the HTTP API under uvicorn with the project's store, tools (``--tools``, ``plangate.toml``'s
``tools`` and ``[[mcp]]`` servers, which run as long as the server does) and formulas, and managing the
bearer tokens it accepts. A token is printed once, when it is made; only its hash is stored. Not for: the
API itself (``plangate.server``).
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import err, fail, out, print_json
from plangate.cli._loading import model_spec
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt, ToolsOpt
from plangate.cli._session import session
from plangate.config import Config
from plangate.errors import ConfigError, UserError
from plangate.models import PROVIDERS, Model, resolve_model
from plangate.models.registry import describe_model
from plangate.server.tokens import PEPPER_ENV, Tokens, hash_token, new_token, pepper_from_env

if TYPE_CHECKING:
    from plangate.runs.quotas import LimitSettings
    from plangate.runs.webhooks.deliver import DeliverySettings
    from plangate.server._retention import Retention
    from plangate.server._sources import DeclaredSource
    from plangate.store import Store

PathOpt = Annotated[
    list[Path] | None,
    typer.Option("--path", "-p", help="A directory to search for formulas first (repeatable)."),
]


def register(app: typer.Typer) -> None:
    """Add ``serve`` and the ``token`` group to ``app``."""
    app.command("serve")(serve_command)
    tokens = typer.Typer(name="token", help="Make, list and revoke the bearer tokens of the HTTP API.")
    tokens.command("create")(token_create)
    tokens.command("list")(token_list)
    tokens.command("revoke")(token_revoke)
    app.add_typer(tokens, name="token", no_args_is_help=True)


def serve_command(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.", min=0, max=65535)] = 8400,
    store: StoreOpt = None,
    tools: ToolsOpt = None,
    path: PathOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="The model of agent runs and agent steps that name none (default: $PLANGATE_MODEL, else a "
            "hosted model whose API key is set, else the offline local model)."
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Accept requests without a token, all as owner 'local' (dev only)."),
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    log_format: Annotated[
        str, typer.Option("--log-format", help="text, or json: one object a line, with the run's id.")
    ] = "text",
    broker: Annotated[
        str | None,
        typer.Option(
            "--broker",
            help="The Redis URL of the workers' queue: runs are handed to `plangate worker` processes on "
            "the same store instead of running in this process (same API, same events).",
        ),
    ] = None,
    data_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--data-dir",
            help="A directory whose SQLite files owners may register as data sources (POST /v1/sources; "
            "repeatable; default: plangate.toml's [data] dirs, else the current directory).",
        ),
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="A data source every owner may ask about, NAME=URL (a postgresql:// URL of a read-only "
            "role, or a SQLite file; repeatable; besides plangate.toml's [[sources]]).",
        ),
    ] = None,
    prune_older_than: Annotated[
        str | None,
        typer.Option(
            "--prune-older-than",
            help="Remove ended runs nothing touched for this long (30d), now and every [retention] every "
            "(1h); default plangate.toml's [retention] older_than, else never.",
        ),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs): runs, live events (SSE), interactions, formulas, tools, copilot
    turns (ask) and data sources."""
    try:
        import uvicorn

        from plangate.server import create_app
    except (ImportError, UserError):
        fail('plangate serve needs the server extra: pip install "plangate[server]"')
        return
    if log_format not in ("text", "json"):
        fail(f"--log-format: expected text or json; found {log_format!r}")
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        if broker is not None:
            from plangate.workers import broker_url
        declared = declared_sources(s.config, source or ())
        settings = s.config.data
        dirs = [*(data_dir or ()), *(s.config.resolve(d) for d in settings.dirs)]
        # The tools (and the file's MCP servers) and the store live as long as the server: the session
        # closes them when the command ends.
        registry = s.tools()
        chosen, origin = server_model(s.config, model)
        define_schedules(s.config, s.store)
        application = create_app(
            s.store,
            registry,
            auth=not no_auth,
            search_paths=path or (),
            tool_specs=s.tool_specs,
            model=chosen,
            model_origin=origin,
            broker=broker_url(broker) if broker is not None else None,
            data_dirs=dirs,
            sources=declared,
            allow_client_urls=settings.allow_client_urls,
            allowed_hosts=settings.allowed_hosts,
            prices=s.config.prices,
            budget=s.config.budget,
            retention=retention_of(s.config, prune_older_than),
            limits=limits_of(s.config),
            webhooks=webhooks_of(s.config),
        )
        if no_auth:
            _warn_no_auth(host)
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level=log_level,
            log_config=_log_config(log_level, log_format),
        )
    except UserError as exc:
        fail(str(exc))


def server_model(config: Config, flag: str | None) -> tuple[Model | str, str]:
    """The model of the server's runs that name none, and where it came from, said on stderr: the model
    when it can run here, else its spec. A server starts without any model installed or configured; only
    the runs that need one fail, with the install hint, and ``GET /v1/info`` tells clients which it is.

    Raises:
        ConfigError: the spec names no known provider (a typo is not put off until a run needs it).
    """
    spec, origin = model_spec(config, flag)
    try:
        found = resolve_model(spec)
    except ConfigError as exc:
        if spec.strip().partition(":")[0].strip().lower() not in PROVIDERS:
            raise ConfigError(f"{origin}: {exc}") from None
        err.print(
            f"[bold yellow]warning:[/] model of agent runs: {escape(spec)} [dim]({escape(origin)})[/] cannot "
            f"run here: {escape(str(exc))}; the server starts, and runs that need a model fail until it can"
        )
        return spec, origin
    err.print(f"model of agent runs: {escape(describe_model(found))} [dim]({escape(origin)})[/]")
    return found, origin


def _warn_no_auth(host: str) -> None:
    exposed = "" if _is_loopback(host) else f" on {host}, which other machines can reach"
    err.print(
        "[bold yellow]warning:[/] --no-auth: every request is accepted as owner 'local'"
        f"{escape(exposed)}; use it for local development only"
    )


def define_schedules(config: Config, store: Store) -> None:
    """Store plangate.toml's ``[[schedules]]`` (or bring the stored ones up to them).

    Raises:
        ConfigError: one of them is not a schedule (the message names it).
    """
    from plangate.runs.schedules import Schedules, parse_every

    schedules = Schedules(store)
    for n, entry in enumerate(config.schedules):
        where = f"schedules[{n}]"
        every = parse_every(entry.every, f"{where}.every") if entry.every is not None else None
        try:
            schedules.define(
                entry.owner,
                entry.name,
                entry.formula,
                vars=entry.vars,
                cron=entry.cron,
                every=every,
                timezone=entry.timezone,
                missed=entry.missed,
                overlap=entry.overlap,
            )
        except ConfigError as exc:
            raise ConfigError(f"plangate.toml: {where} ({entry.name}): {exc}") from None


def limits_of(config: Config) -> LimitSettings:
    """plangate.toml's ``[limits]``: every owner's, and those of each owner named."""
    from plangate.runs.quotas import LimitSettings

    return LimitSettings.of_config(config.limits)


def webhooks_of(config: Config) -> DeliverySettings:
    """plangate.toml's ``[webhooks]``: how deliveries are made.

    Raises:
        ConfigError: an age that is not one.
    """
    from plangate.runs.webhooks.deliver import DeliverySettings

    return DeliverySettings.of_config(config.webhooks)


def retention_of(config: Config, older_than: str | None) -> Retention | None:
    """The server's retention: ``--prune-older-than``, else plangate.toml's ``[retention]``; None when
    neither sets a horizon.

    Raises:
        ConfigError: the flag is not an age.
    """
    from plangate.server._retention import Retention
    from plangate.store.retention import parse_age

    age = older_than if older_than is not None else config.retention.older_than
    if age is None:
        return None
    where = "--prune-older-than" if older_than is not None else "retention.older_than"
    return Retention(parse_age(age, where), parse_age(config.retention.every, "retention.every"))


def declared_sources(config: Config, flags: Iterable[str]) -> list[DeclaredSource]:
    """The data sources the operator offers: ``--source NAME=URL`` flags, then plangate.toml's
    ``[[sources]]`` (a URL from its environment variable, a SQLite file relative to the file's folder).

    Raises:
        ConfigError: a flag is not NAME=URL, a variable a source names is not set, or a name is used twice.
    """
    from plangate.server._sources import DeclaredSource, parse_declared

    found = [parse_declared(flag) for flag in flags]
    for entry in config.sources:
        target = entry.target()
        if urlsplit(target).scheme not in ("postgresql", "postgres"):
            target = str(config.resolve(target.removeprefix("sqlite://")))
        found.append(
            DeclaredSource(
                entry.name,
                target,
                schemas=tuple(entry.schemas) if entry.schemas else None,
                allow_privileged=entry.allow_privileged,
                description=entry.description,
                semantic=config.semantic_of(entry),
            )
        )
    names = [declared.name for declared in found]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"data source {name!r} is declared twice (--source and [[sources]])")
    return found


def token_create(
    ctx: typer.Context,
    owner: Annotated[str, typer.Option(help="The owner the token acts as.")],
    name: Annotated[str, typer.Option(help="A label to tell your tokens apart (laptop, ci).")] = "",
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Make a bearer token for OWNER and print it (once: only its hash is kept)."""
    if not owner.strip():
        fail("--owner: expected a non-empty owner name")
    token = new_token()
    pepper = pepper_from_env()
    s = session(ctx, config=config, store=store)
    try:
        record = Tokens(s.store).create(owner.strip(), hash_token(token, pepper), name)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json({"id": record.id, "owner": record.owner, "name": record.name, "token": token})
        return
    # The token alone on stdout (easy to capture in a script); the rest on stderr.
    print(token)
    err.print(
        f"token [bold]{record.id}[/] for owner [bold]{escape(record.owner)}[/]"
        + (f" ({escape(record.name)})" if record.name else "")
        + ": keep it now, it is not shown again"
        + (f"; hashed with the pepper in ${PEPPER_ENV}" if pepper else "")
    )


def token_list(
    ctx: typer.Context,
    owner: Annotated[str | None, typer.Option(help="Only this owner's tokens.")] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List tokens: ids, owners, names and whether they still work (never the tokens themselves)."""
    s = session(ctx, config=config, store=store)
    try:
        found = Tokens(s.store).listed(owner=owner)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json([record.model_dump(mode="json") for record in found])
        return
    table = Table("id", "owner", "name", "created", "state")
    for record in found:
        state = "revoked " + _when(record.revoked_at) if record.revoked_at is not None else "active"
        table.add_row(record.id, escape(record.owner), escape(record.name), _when(record.created_at), state)
    out.print(table)


def token_revoke(
    ctx: typer.Context,
    token_id: Annotated[
        str, typer.Argument(help="The token's id (tok_…), as `plangate token list` shows it.")
    ],
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Revoke a token: requests made with it are refused from now on."""
    s = session(ctx, config=config, store=store)
    try:
        record = Tokens(s.store).revoke(token_id)
    except UserError as exc:
        fail(str(exc))
        return
    err.print(f"revoked {record.id} (owner {escape(record.owner)})")


def _log_config(level: str, log_format: str = "text") -> dict[str, Any]:
    """uvicorn's logging, with plangate's own lines (recovery, data sources, leases) beside its own, at the
    same level; with ``json``, every line (uvicorn's too) one JSON object naming the run it is about."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    wanted = level.upper() if level.upper() in logging.getLevelNamesMapping() else "INFO"
    config["formatters"]["plangate"] = {
        "()": "uvicorn.logging.DefaultFormatter",
        "fmt": "%(levelprefix)s %(name)s: %(message)s",
    }
    if log_format == "json":
        for name in config["formatters"]:
            config["formatters"][name] = {"()": "plangate.runs.telemetry.logs.JsonFormatter"}
    config["handlers"]["plangate"] = {
        "formatter": "plangate",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["plangate"] = {"handlers": ["plangate"], "level": wanted, "propagate": False}
    return config


def _when(at: float | None) -> str:
    return "" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["register"]
