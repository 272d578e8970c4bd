"""The examples that ship with plangate: the example formulas and their tools, the shop and Chinook data
(with Chinook's licence and each database's semantic layer), and the condition examples.

For: finding them wherever plangate is installed, so ``plangate demo``, the bundled ``shop`` source of the
copilot and the server, and the examples work from a wheel in any folder. In a wheel they are package data,
``plangate/examples/`` (the build copies the repository's ``examples/`` there, see pyproject.toml); in a
source checkout (an editable install) they are the repository's ``examples/`` itself, which the README and
the tests name. Not for: what the examples contain (they are read as any formula, tools file or database).

Example::

    from plangate.bundled import example_path

    example_path("data", "shop.db")            # the bundled shop database
    example_path("formulas", "demo_tools.py")  # the tools of the plan-week formula
"""

from __future__ import annotations

from pathlib import Path

from plangate.errors import ConfigError

PACKAGED = Path(__file__).resolve().parent / "examples"
"""Where a wheel puts the examples."""

_CHECKOUT = Path(__file__).resolve().parents[2] / "examples"
"""Where a source checkout has them (``src/plangate/bundled.py`` → ``examples/``)."""


def examples_dir() -> Path:
    """The folder of the bundled examples (``formulas/``, ``data/``, ``conditions/``).

    Raises:
        ConfigError: neither an installed package nor a source checkout has them (a broken install).
    """
    for candidate in (PACKAGED, _CHECKOUT):
        if (candidate / "formulas").is_dir() and (candidate / "data").is_dir():
            return candidate
    raise ConfigError(
        f"the bundled examples are missing: expected them at {str(PACKAGED)!r} (reinstall plangate) or, "
        f"in a source checkout, at {str(_CHECKOUT)!r}"
    )


def example_path(*parts: str) -> Path:
    """The path of a bundled example file or folder, ``parts`` below :func:`examples_dir` (it may not
    exist: callers say what they expected there)."""
    return examples_dir().joinpath(*parts)


__all__ = ["PACKAGED", "example_path", "examples_dir"]
