"""The root ``plangate`` command: global options and the registry of sub-commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from plangate import __version__
from plangate.cli import _agent, _ask, _conditions, _formula, _runs, _serve
from plangate.cli._console import err
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
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """plangate: plan, act only with consent, prove each step."""


_conditions.register(app)
_formula.register(app)
_runs.register(app)
_agent.register(app)
_ask.register(app)
_serve.register(app)


def main() -> None:
    """Entry point of the console script: user mistakes print one line, never a traceback."""
    try:
        app()
    except UserError as exc:  # commands handle their own; this is the last net
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(2)
