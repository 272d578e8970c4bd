"""Shared terminal helpers: the consoles and the one-line error printer."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, *, code: int = 2) -> None:
    """Print a one-line error (no traceback) and leave with ``code``."""
    import typer

    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout, unstyled, for scripts."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def parse_vars(pairs: list[str] | None) -> dict[str, str]:
    """Turn ``["k=v", ...]`` into a dict, failing with a clear message on a pair with no ``=``."""
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--var expects NAME=VALUE, got {pair!r}")
        result[key.strip()] = value
    return result
