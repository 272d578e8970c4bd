"""Finding and reading formula files: the search path, TOML and JSON, and strict validation.

For: ``load_formula(name_or_path)`` and the :class:`FormulaLoader` that ``resolve`` and ``cook`` use to fetch
the formulas a formula names (``extends``, expansions, aspects). Not for: merging ``extends`` (resolve.py)
or anything that needs var values (cook.py).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from pathlib import Path

from pydantic import ValidationError

from plangate.errors import FormulaError, FormulaNotFound, number_too_long
from plangate.formulas._schema_base import FORMULA_NAME, suggest
from plangate.formulas._schema_errors import FormulaSchemaError, describe, schema_problems
from plangate.formulas.schema import Formula

#: Searched after the paths a caller gives, in this order.
DEFAULT_SEARCH_PATHS: tuple[str, ...] = ("formulas", ".plangate/formulas", "~/.plangate/formulas")
#: TOML is preferred: it is tried first in each directory.
SUFFIXES: tuple[str, ...] = (".formula.toml", ".formula.json")
_TOML_WHERE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")

#: Anything that returns the (unresolved) formula of a name; :class:`FormulaLoader` is the usual one.
Loader = Callable[[str], Formula]
SearchPath = str | PathLike[str]


def search_dirs(search_paths: Iterable[SearchPath] | None = None) -> list[Path]:
    """The directories searched, in order: the given ones, then :data:`DEFAULT_SEARCH_PATHS`."""
    given = [Path(p).expanduser() for p in search_paths or ()]
    return [*given, *(Path(p).expanduser() for p in DEFAULT_SEARCH_PATHS)]


def parse_formula(text: str, *, source: str, fmt: str = "toml") -> Formula:
    """Parse and validate the text of a formula file.

    Args:
        text: the file's content.
        source: where it came from, for messages (a path, or a label such as ``<copilot>``).
        fmt: ``"toml"`` or ``"json"``.

    Raises:
        FormulaError: malformed TOML/JSON (with line and column); FormulaSchemaError when it does not fit
            the schema (every problem with its path).
    """
    data: object
    if fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            where = _TOML_WHERE.search(message)
            if where is None:
                raise FormulaError(f"invalid TOML: {message}", source=source) from None
            reason = message[: where.start()]
            line, column = where.groups()
            at = f"line {line}, column {column}" if line else "the end of the file"
            raise FormulaError(f"invalid TOML at {at}: {reason}", source=source) from None
        except ValueError as exc:
            raise FormulaError(f"invalid TOML: {number_too_long(exc)}", source=source) from None
    elif fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormulaError(
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source
            ) from None
        except ValueError as exc:
            raise FormulaError(f"invalid JSON: {number_too_long(exc)}", source=source) from None
    else:
        raise FormulaError(f"expected the format 'toml' or 'json', got {fmt!r}", source=source)
    return validate_formula(data, source=source)


def validate_formula(data: object, *, source: str | None = None) -> Formula:
    """Validate already-parsed data (a dict) as a formula; see :func:`parse_formula`."""
    if not isinstance(data, dict):
        raise FormulaError(f"expected a table at the top of the formula, got {describe(data)}", source=source)
    try:
        formula = Formula.model_validate(data)
    except ValidationError as exc:
        raise FormulaSchemaError(schema_problems(exc), source=source) from None
    return formula.with_source(source)


def read_formula_file(path: SearchPath) -> Formula:
    """Read and validate one formula file (``.formula.toml`` or ``.formula.json``).

    Raises:
        FormulaNotFound: there is no such file. FormulaError: it cannot be read or is not a valid formula.
    """
    file = Path(path)
    source = str(file)
    if not file.is_file():
        raise FormulaNotFound(f"no formula file at {source}", source=source)
    fmt = "json" if file.name.endswith(".json") else "toml"
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormulaError(f"cannot read the file: {exc}", source=source) from None
    return parse_formula(text, source=source, fmt=fmt)


def find_formula(name: str, dirs: Sequence[Path]) -> Path:
    """The first ``<dir>/<name>.formula.toml`` / ``.json`` in ``dirs`` (TOML first in each directory).

    Raises:
        FormulaNotFound: no directory has it; the message lists where it looked and the closest name.
    """
    if not FORMULA_NAME.fullmatch(name):
        raise FormulaNotFound(f"expected a formula name like 'release', got {name!r}")
    for folder in dirs:
        for suffix in SUFFIXES:
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    known = sorted(_names_in(dirs))
    where = ", ".join(dict.fromkeys(str(d) for d in dirs))  # each folder once, in the order looked in
    raise FormulaNotFound(f"formula {name!r} not found in {where}{suggest(name, known)}")


def load_formula(name_or_path: SearchPath, search_paths: Iterable[SearchPath] | None = None) -> Formula:
    """Load a formula by name (searched for) or by file path. ``extends`` is not applied: see ``resolve``.

    Args:
        name_or_path: a name such as ``"release"``, or a path to a ``.formula.toml`` / ``.formula.json``.
        search_paths: directories searched before the defaults (``./formulas``, ``./.plangate/formulas``,
            ``~/.plangate/formulas``).

    Raises:
        FormulaNotFound: nothing by that name or at that path. FormulaError: the file is not a valid formula.
    """
    text = str(name_or_path)
    if _looks_like_path(text):
        return read_formula_file(Path(text).expanduser())
    return read_formula_file(find_formula(text, search_dirs(search_paths)))


class FormulaLoader:
    """Loads formulas by name from a search path, each file at most once.

    Args:
        search_paths: directories searched before the defaults.
        base: a directory searched first of all (the folder of the formula that names the others).
    """

    def __init__(self, search_paths: Iterable[SearchPath] | None = None, *, base: SearchPath | None = None):
        first = [Path(base)] if base is not None else []
        self.dirs = [*first, *search_dirs(search_paths)]
        self._cache: dict[str, Formula] = {}

    def __call__(self, name: str) -> Formula:
        """The formula called ``name`` (not resolved)."""
        cached = self._cache.get(name)
        if cached is None:
            cached = read_formula_file(find_formula(name, self.dirs))
            self._cache[name] = cached
        return cached

    @classmethod
    def beside(cls, formula: Formula, search_paths: Iterable[SearchPath] | None = None) -> FormulaLoader:
        """A loader that looks in ``formula``'s own folder first (when it came from a file)."""
        base = Path(formula.source).parent if formula.source and Path(formula.source).is_file() else None
        return cls(search_paths, base=base)


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith((".toml", ".json")) or text.startswith("~")


def _names_in(dirs: Iterable[Path]) -> set[str]:
    names: set[str] = set()
    for folder in dirs:
        if folder.is_dir():
            for suffix in SUFFIXES:
                names.update(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))
    return names


__all__ = [
    "DEFAULT_SEARCH_PATHS",
    "SUFFIXES",
    "FormulaLoader",
    "Loader",
    "find_formula",
    "load_formula",
    "parse_formula",
    "read_formula_file",
    "search_dirs",
    "validate_formula",
]
