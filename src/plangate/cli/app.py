"""The root ``plangate`` command: global options, the session every command works in, and the registry of
sub-commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from plangate import __version__
from plangate.cli import (
    _ask,
    _conditions,
    _continue,
    _demo,
    _formula,
    _inspect,
    _owner,
    _prune,
    _schedule,
    _serve,
    _start,
    _timetravel,
    _webhook,
    _worker,
)
from plangate.cli._console import EXIT_UNREACHABLE, EXIT_USAGE, err
from plangate.cli._options import ConfigOpt
from plangate.cli._session import Session
from plangate.errors import PlangateError, UserError

app = typer.Typer(
    name="plangate",
    help="Run LLM agents and workflows that plan, act only with consent, and prove each step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"plangate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """plangate: plan, act only with consent, prove each step.

    Every command reads plangate.toml (its model, store, tools and MCP servers) from --config, given here or
    to the command, else $PLANGATE_CONFIG, else the working directory.
    """
    # One session per invocation, closed with it (its store, MCP servers, broker connection): nothing is
    # left behind for the next one (tests run many in one process). A command's own --config wins.
    ctx.obj = Session(config)
    ctx.call_on_close(ctx.obj.close)


_conditions.register(app)
_formula.register(app)
_start.register(app)
_demo.register(app)
_continue.register(app)
_timetravel.register(app)
_inspect.register(app)
_ask.register(app)
_serve.register(app)
_worker.register(app)
_prune.register(app)
_schedule.register(app)
_webhook.register(app)
_owner.register(app)


def main() -> None:
    """Entry point of the console script: what a user can cause (a mistake, a store or a broker that cannot
    be reached) prints one line, never a traceback, and exits with its documented code."""
    try:
        app()
    except UserError as exc:  # commands handle their own; this is the last net
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_USAGE)
    except PlangateError as exc:  # the store or the broker cannot be reached or used
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_UNREACHABLE)
