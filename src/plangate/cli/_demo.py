"""``plangate demo``: the ``plan-week`` formula on the bundled examples, from any folder.

For: a first run right after ``pip install "plangate[local]"`` (or ``./dev demo`` in the repository): a
fresh example week in the default store (``$PLANGATE_STORE``, else ``.plangate/plangate.db`` here; the
runs stored there are kept), then ``plangate run plan-week`` with the bundled formulas and their tools (the
shop data, the week's schedule tools): a SQL query, a condition gate on its rows, a person's approval, and
an agent step that places a review in the week, asking again before it writes. ``--where`` prints the
folder of the bundled examples, for ``--path``, ``--tools`` and ``--data`` to point at. Not for: anything
``run`` does not do (the demo is ``run`` with these arguments).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from plangate.bundled import example_path, examples_dir
from plangate.cli._console import fail
from plangate.cli._loading import model_spec
from plangate.cli._options import ConfigOpt, DetachOpt, InteractiveOpt, JsonOpt
from plangate.cli._session import session
from plangate.cli._start import QuietOpt, StepModelOpt, run_command
from plangate.config import Config
from plangate.errors import ConfigError, UserError
from plangate.formulas import check_formula
from plangate.models import resolve_model

FORMULA = "plan-week"
"""The formula the demo runs."""


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command("demo")(demo_command)


def demo_command(
    ctx: typer.Context,
    month: Annotated[
        str | None, typer.Option(help="The month whose revenue is reviewed, YYYY-MM (default 2026-06).")
    ] = None,
    model: StepModelOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    where: Annotated[
        bool,
        typer.Option(
            "--where", help="Print the folder of the bundled examples (formulas, tools, data) and exit."
        ),
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """Run the demo: the plan-week formula on the bundled shop data and a fresh example week, with a
    person's approval asked here (a query, a condition gate, an approval, an agent step that writes)."""
    try:
        if where:
            print(examples_dir())
            return
        formulas = example_path("formulas")
        tools = formulas / "demo_tools.py"
        # before the week is replaced: a bad month or a model that cannot run here changes nothing
        if month is not None:
            _check_month(formulas, month)
        _check_model(session(ctx, config=config).config, model)
        _fresh_week(str(tools))
    except UserError as exc:
        fail(str(exc))
        return
    run_command(
        ctx,
        FORMULA,
        var=[f"month={month}"] if month is not None else None,
        path=[formulas],
        tools=[f"{tools}:registry"],
        store=None,
        detach=detach,
        interactive=interactive,
        json=json,
        model=model,
        yes=False,
        quiet=quiet,
        broker=None,
        config=config,
    )


def _check_month(formulas: Path, month: str) -> None:
    """Check ``month`` against the formula's own rule for it (its var's pattern).

    Raises:
        ConfigError: the month does not fit (the message is the formula check's).
    """
    _, issues = check_formula(formulas / f"{FORMULA}.formula.toml", {"month": month})
    wrong = [issue.message for issue in issues if issue.level == "error" and issue.path.startswith("vars.")]
    if wrong:
        raise ConfigError(f"--month: {'; '.join(wrong)}")


def _check_model(config: Config, flag: str | None) -> None:
    """Check that the model of the agent step (``--model``, else the project's or the default one) can run
    here, as ``run`` will when it says which it is.

    Raises:
        ConfigError: it cannot (its extra or its API key is missing; the message says which).
    """
    chosen, origin = model_spec(config, flag)
    try:
        resolve_model(chosen)
    except ConfigError as exc:
        raise ConfigError(str(exc) if origin == "--model" else f"{origin}: {chosen!r}: {exc}") from None


def _fresh_week(tools: str) -> None:
    """Put a fresh example week in the default store, as ``demo_tools.py fresh-week`` does (in a process of
    its own: importing the tools file here would store the week a second time under another module).

    Raises:
        ConfigError: the tools file could not make the week (its message is given).
    """
    done = subprocess.run(
        [sys.executable, tools, "fresh-week"], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise ConfigError(f"the demo's example week could not be made: {done.stderr.strip() or done.stdout}")
    sys.stderr.write(done.stderr)


__all__ = ["register"]
