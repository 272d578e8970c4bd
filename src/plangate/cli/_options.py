"""The options several commands share, declared once so that each says the same thing in every ``--help``.

For: the typer ``Annotated`` types of ``--config``, ``--store``, ``--tools``, ``--json``, ``--broker``,
``--detach``, ``--interactive`` and the formula search path. Not for: what a command does with them (the
command, through its session: ``_session.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="The plangate.toml to read (default $PLANGATE_CONFIG, else ./plangate.toml when present).",
    ),
]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store URL (sqlite:///path.db or postgresql://user@host/db); default $PLANGATE_STORE, "
        "plangate.toml's store, or .plangate/plangate.db.",
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
BrokerOpt = Annotated[
    str | None,
    typer.Option(
        "--broker",
        help="The Redis URL of the workers' queue (redis://host:port/0): the run is handed to the workers "
        "(plangate worker) and the command returns at once.",
    ),
]
DetachOpt = Annotated[
    bool, typer.Option("--detach", help="Leave the run waiting when a person is needed; don't ask here.")
]
InteractiveOpt = Annotated[
    bool | None,
    typer.Option(
        "--interactive/--no-interactive", help="Ask in the terminal (default: when stdin is a TTY)."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model spec (openai:gpt-4o-mini, anthropic:…, local, scripted:file.json); default "
        "$PLANGATE_MODEL, else a hosted model whose API key is set, else the offline local model.",
    ),
]
PathOpt = Annotated[
    list[Path] | None,
    typer.Option("--path", "-p", help="A directory to search for formulas first (repeatable)."),
]

__all__ = [
    "BrokerOpt",
    "ConfigOpt",
    "DetachOpt",
    "InteractiveOpt",
    "JsonOpt",
    "ModelOpt",
    "PathOpt",
    "StoreOpt",
    "ToolsOpt",
]
