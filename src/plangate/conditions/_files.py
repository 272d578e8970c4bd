"""``file.exists``: substitute ``{{var}}``, confine the path to the context's root, test for existence.

The confinement is the point of this module: a path whose route leaves the root, lexically (``..``, an
absolute path elsewhere) or through a symlink, is refused without looking at what it points to, even when
the route would come back into the root. It never reads, creates or
follows anything outside the root, and it is not a general path utility.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from plangate.conditions._runtime import Unsatisfied
from plangate.conditions.ast import quote

# ``{{ name }}`` inside a file.exists path; names follow the language's NAME rule.
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


def file_exists(template: str, variables: Mapping[str, str], root: Path | None) -> tuple[bool, str]:
    """Whether the file named by ``template`` exists under ``root``, with the fact that decided it.

    Raises:
        Unsatisfied: no root is set, a ``{{var}}`` is not set, or the path leaves the root. These refuse the
            whole condition rather than read as "does not exist", so ``not file.exists(...)`` cannot be
            turned into a way to pass a gate.
    """
    call = f"file.exists({quote(template)})"
    if root is None:
        raise Unsatisfied(f"{call}: no root directory is set, so no file can be checked")
    relative = _substitute(template, variables, call)
    if not relative:
        raise Unsatisfied(f"{call}: the path is empty")
    if "\0" in relative:
        raise Unsatisfied(f"{call}: the path contains a NUL character")
    target = _confined(relative, root, call)
    shown = quote(relative)
    if os.path.exists(target):
        return True, f"{call}: {shown} exists"
    return False, f"{call}: {shown} does not exist"


def _substitute(template: str, variables: Mapping[str, str], call: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        value = variables.get(name)
        if value is None:
            raise Unsatisfied(f"{call}: variable '{name}' is not set")
        return str(value)

    return _PLACEHOLDER.sub(replace, template)


def _confined(relative: str, root: Path, call: str) -> str:
    """The real path of ``relative`` under ``root``, refusing any way out of the root.

    The path is followed one part at a time from the root, and refused as soon as its route leaves the
    root, even if it would come back (``../root/ok.txt``, a symlink out and back in): a ``..`` above the
    root, or a part whose real path (symlinks followed) is not under the root's. An absolute path must
    start with the root itself, written as given or as its real path.
    """
    base = os.path.realpath(root)
    refused = Unsatisfied(f"{call}: {quote(relative)} is outside the allowed root")
    parts = _route(relative, [os.path.abspath(root), base])
    if parts is None:
        raise refused
    current, depth = base, 0
    for part in parts:
        if part in ("", "."):
            continue
        depth += -1 if part == ".." else 1
        if depth < 0:
            raise refused
        current = os.path.join(current, part)
        if not _within(os.path.realpath(current), base):
            raise refused
    return os.path.realpath(current)


def _route(path: str, roots: list[str]) -> list[str] | None:
    """The parts of ``path`` below the root: all of them for a relative path; for an absolute one, those
    after a leading root (``None`` when it does not start with one, part by part)."""
    parts = path.split(os.sep)
    if not os.path.isabs(path):
        return parts
    for root in roots:
        prefix = [part for part in root.split(os.sep) if part]
        given = [part for part in parts if part]
        if given[: len(prefix)] == prefix:
            return given[len(prefix) :]
    return None


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


__all__ = ["file_exists"]
