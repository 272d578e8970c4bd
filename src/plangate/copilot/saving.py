"""Saving a turn's formula as a file that ``plangate formula check`` and ``plangate run`` accept.

For: ``save_formula``: the formula under a name of the user's choosing, with the vars a turn passes
(``question``) declared with this turn's values as defaults, and a header saying how to run it. Not for:
writing TOML in general (``plangate.formulas.writer``).
"""

from __future__ import annotations

from pathlib import Path

from plangate.copilot.results import Turn
from plangate.errors import ConfigError
from plangate.formulas import Formula, Var
from plangate.formulas._schema_base import FORMULA_NAME
from plangate.formulas.writer import formula_toml
from plangate.tools.data.env import DATA_ENV


def saved_formula(turn: Turn, name: str) -> Formula:
    """The turn's formula renamed ``name``, with ``question`` (and ``history``) declared when it reads them.

    Raises:
        ConfigError: the turn built no formula, or ``name`` is not a formula name.
    """
    if turn.formula is None:
        raise ConfigError(f"--save: turn {turn.id} built no formula to save ({turn.status}: {turn.reason})")
    _check_name(name)
    formula = turn.formula
    text = formula.model_dump_json()
    variables = dict(formula.vars)
    if "{{question}}" in text.replace(" ", "") and "question" not in variables:
        variables["question"] = Var(description="The question the workflow answers", default=turn.question)
    if "{{history}}" in text.replace(" ", "") and "history" not in variables:
        variables["history"] = Var(description="Earlier questions and answers", default="[]")
    return formula.model_copy(update={"formula": name, "vars": variables})


def save_path(name: str, directory: str | Path = "formulas") -> Path:
    """Where ``save_formula`` writes the formula ``name``: checked before a turn runs, so that a name that
    cannot be saved is refused before the model is called.

    Raises:
        ConfigError: a bad name, or the file exists already.
    """
    _check_name(name)
    path = Path(directory) / f"{name}.formula.toml"
    if path.exists():
        raise ConfigError(f"--save: {path} exists already; choose another name or remove it first")
    return path


def save_formula(turn: Turn, name: str, directory: str | Path = "formulas") -> Path:
    """Write the turn's formula to ``<directory>/<name>.formula.toml``; an existing file is never replaced.

    Raises:
        ConfigError: no formula, a bad name, the file exists already or cannot be written.
    """
    path = save_path(name, directory)
    formula = saved_formula(turn, name)
    folder = path.parent
    header = (
        f"Built by plangate ask from the question: {turn.question}\n"
        f"Run it: {DATA_ENV}={turn.source}=<path or URL of the data> plangate run {name} "
        "--tools plangate.tools.data.env:registry"
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(formula_toml(formula, header), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--save: cannot write {path}: {exc.strerror or exc}") from None
    return path


def _check_name(name: str) -> None:
    if not FORMULA_NAME.fullmatch(name):
        raise ConfigError(f"--save: a formula name may hold letters, digits, '_', '.' and '-'; got {name!r}")


__all__ = ["save_formula", "save_path", "saved_formula"]
