"""``file.exists``: substitute ``{{var}}``, confine the path to the context's root, test for existence.

The confinement is the point of this module: a path that leaves the root, lexically (``..``, an absolute path
elsewhere) or through a symlink, is refused without looking at what it points to. It never reads, creates or
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
    """The real path of ``relative`` under ``root``, refusing any way out of the root."""
    base = os.path.realpath(root)
    joined = os.path.join(base, relative)  # an absolute ``relative`` replaces ``base`` here
    refused = Unsatisfied(f"{call}: {quote(relative)} is outside the allowed root")
    # Lexical check first, so '..' is refused even when the parent directory does not exist.
    if not _within(os.path.normpath(joined), base):
        raise refused
    real = os.path.realpath(joined)
    if not _within(real, base):
        raise refused
    return real


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


__all__ = ["file_exists"]
