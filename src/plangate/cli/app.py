"""The root ``plangate`` command: global options and the registry of sub-commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from plangate import __version__
from plangate.cli import _agent, _ask, _conditions, _formula, _runs, _serve, _worker
from plangate.cli._console import err
from plangate.cli._loading import ConfigOpt, start_invocation
from plangate.errors import UserError

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
    # A fresh start for each invocation, and nothing left behind after it (tests run many in one
    # process); a command's own --config is parsed after this and wins.
    start_invocation(config)
    ctx.call_on_close(start_invocation)


_conditions.register(app)
_formula.register(app)
_runs.register(app)
_agent.register(app)
_ask.register(app)
_serve.register(app)
_worker.register(app)


def main() -> None:
    """Entry point of the console script: user mistakes print one line, never a traceback."""
    try:
        app()
    except UserError as exc:  # commands handle their own; this is the last net
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(2)
