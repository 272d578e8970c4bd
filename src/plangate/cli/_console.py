"""Shared terminal helpers: the consoles, the one-line error printer and the exit codes.

Exit codes, the same for every command: 0 done (a run completed); 1 a run ended without completing (or a
check found errors); 2 a mistake in what was asked (an option, a file, a run or an id not found); 3 the store
or the broker cannot be reached or used; 4 the terminal gave no answer (its input ended, or too many answers
were none of the choices) and the run is left waiting; 130 interrupted.

Output that goes to a file or a pipe is never cut to a terminal's width: a table or a tree there keeps its
lines whole (``$COLUMNS`` still sets a width where a script wants one).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.markup import escape

_UNBOUNDED = 100_000
"""The width of a console that does not write to a terminal: wider than any line it prints."""


class _Console(Console):
    """A rich console that wraps to the terminal's width only when it writes to one."""

    @property
    def size(self) -> ConsoleDimensions:
        if not self.is_terminal and not self._environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(_UNBOUNDED, 25)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        width, height = new_size
        self._width, self._height = width, height


# emoji=False: a user's text such as "mod:smile" is printed as written, never as an emoji
out = _Console(highlight=False, soft_wrap=True, emoji=False)
err = _Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


EXIT_USAGE = 2
"""A mistake in what was asked: an option, a file, a tool, a run or an interaction that is not there."""

EXIT_UNREACHABLE = 3
"""The store or the broker cannot be reached or used (a server down, a folder that cannot be written)."""

EXIT_NO_ANSWER = 4
"""The terminal gave no answer (its input ended, or too many were none of the choices): the run waits."""

PROG_ENV = "PLANGATE_PROG"
"""How the person runs the CLI (``./dev plangate`` sets it), used in the commands printed to run next."""


def prog() -> str:
    """The command that runs this CLI as the person typed it, for the commands printed to run next:
    ``$PLANGATE_PROG`` when set, ``plangate`` when that is on the PATH, else the path that ran it
    (``.venv/bin/plangate``)."""
    named = os.environ.get(PROG_ENV, "").strip()
    if named:
        return named
    ran = sys.argv[0] if sys.argv else ""
    if Path(ran).name != "plangate":
        return "plangate"  # run from Python (a test, python -m): the console script's name
    found = shutil.which("plangate")
    if found is not None and Path(found).resolve() == Path(ran).resolve():
        return "plangate"
    return shlex.quote(ran)


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
