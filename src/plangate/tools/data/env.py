"""Data tools over the sources ``$PLANGATE_DATA`` names, for running saved copilot formulas from the command
line: ``plangate run NAME --tools plangate.tools.data.env:registry``.

``PLANGATE_DATA`` is a comma-separated list of ``name=target`` pairs (a SQLite file, a ``sqlite:///`` or
``postgresql://`` URL); without it, the bundled shop data is registered as ``shop``. The module attribute
``registry`` (``db_schema``, ``db_query`` and ``db_aggregate`` over them) is built when it is asked for.
For: that one use.
Not for: programs, which build ``DataSources`` and ``data_tools`` themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from plangate.errors import ConfigError
from plangate.tools.data.sources import DataSources, register_shop
from plangate.tools.data.toolkit import data_tools
from plangate.tools.registry import ToolRegistry

DATA_ENV = "PLANGATE_DATA"


def sources_from_env(environ: Mapping[str, str] | None = None) -> DataSources:
    """The sources ``PLANGATE_DATA`` names (else the bundled shop data).

    Raises:
        ConfigError: a pair without ``=``, or a target that cannot be registered.
    """
    text = (os.environ if environ is None else environ).get(DATA_ENV, "").strip()
    sources = DataSources()
    if not text:
        register_shop(sources)
        return sources
    for pair in text.split(","):
        name, sep, target = pair.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise ConfigError(
                f"{DATA_ENV}: expected name=path_or_url pairs, separated by commas; got {pair!r}"
            )
        sources.register(name.strip(), target.strip())
    return sources


def __getattr__(name: str) -> ToolRegistry:
    # ``registry`` is built when it is first asked for, so importing this module reads no database.
    if name == "registry":
        return ToolRegistry(data_tools(sources_from_env()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DATA_ENV", "sources_from_env"]
