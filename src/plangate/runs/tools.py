"""A run is advanced only with the tools it was started with: each tool's identity, recorded and checked.

For: what a run records of the tools it may call when it is created — for each name, where the tool came
from (its function's module and name; for a tool loaded from a file, the file's name; its domain, which is
an MCP server's name) and a digest of what it takes and does (its parameters' schema and its effect) — and
the check every engine makes before it advances a run: a process whose tool of that name differs, or that
lacks it, must not advance the run (a server in the same folder as a command-line run, say, with a
``place`` tool of its own). Not for: what an engine does with a run that fails the check (it leaves it
waiting with the reason, visible to its owner) or loading tools (``plangate.tools.specs``).

A run recorded before identities were kept is checked by its tools' names alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.events import Event, StatusEvent
from plangate.runs.contract import Transactions
from plangate.store import RunRecord, Store
from plangate.tools import Tool, ToolRegistry, digest_json

INPUT_KEY = "tool_identity"
"""Where a run's input keeps its tools' identities: ``{name: {origin, domain, digest}}``."""

REFUSED = "tools_differ"
"""The code of the status event that leaves a run waiting for a process with its own tools."""

_FILE_MODULES = "plangate_user_tools_"
"""The prefix of the module a tool file is imported as (``tools/specs.py``); its name changes per process."""


class ToolsDiffer(ConfigError):
    """This process's tools are not the ones the run was started with; nothing was advanced.

    Attributes:
        run_id: the run.
        reason: one line for the run's owner (which tool, and how it differs).
    """

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id!r} is not advanced here: {reason}")


def identity(tool: Tool) -> dict[str, JsonValue]:
    """Where ``tool`` came from and a digest of what it takes and does."""
    return {
        "origin": _origin(tool),
        "domain": tool.domain,
        "digest": digest_json({"parameters": tool.parameters, "effect": tool.effect}),
    }


def identities(tools: Iterable[Tool]) -> dict[str, JsonValue]:
    """The identities of ``tools``, by name: what a run's input records (under :data:`INPUT_KEY`)."""
    return {tool.name: identity(tool) for tool in tools}


def check(run_id: str, run_input: Mapping[str, JsonValue], names: Iterable[str], tools: ToolRegistry) -> None:
    """Refuse to advance a run with tools other than those it was started with.

    Args:
        run_id: the run.
        run_input: its stored input (where its identities are, when it recorded them).
        names: the tools it may call.
        tools: this process's tools.

    Raises:
        ToolsDiffer: one of them is missing here, or differs from the one the run recorded.
    """
    recorded = run_input.get(INPUT_KEY)
    known = recorded if isinstance(recorded, dict) else {}
    names = list(dict.fromkeys(names))
    missing = [name for name in names if name not in tools]
    if missing:
        raise ToolsDiffer(
            run_id,
            f"it was started with the tools {', '.join(names)}; this process lacks {', '.join(missing)} "
            "(give them: tools= in Python, --tools on the command line)",
        )
    for name in names:
        then = known.get(name)
        if not isinstance(then, dict):
            continue  # recorded before identities were kept: its name is all there is to check
        now = identity(tools.get(name))
        if then.get("origin") != now["origin"] or then.get("domain") != now["domain"]:
            raise ToolsDiffer(
                run_id,
                f"its tool {name!r} is {then.get('origin')} (domain {then.get('domain')}); this process's "
                f"is {now['origin']} (domain {now['domain']})",
            )
        if then.get("digest") != now["digest"]:
            differs = "takes other arguments or has another effect here"
            raise ToolsDiffer(run_id, f"its tool {name!r} ({now['origin']}) {differs}")


def refuse(store: Store, run_id: str, refused: ToolsDiffer, transaction: Transactions) -> None:
    """Leave the run ``waiting`` with the reason it was not advanced, in a status event its owner sees —
    once: a process that refuses it again for the same reason writes nothing more."""
    last = _last_event(store, store.get_run(run_id))
    if isinstance(last, StatusEvent) and last.code == REFUSED and last.text == refused.reason:
        return
    with transaction(run_id) as tx:
        tx.append(StatusEvent(stage="run", code=REFUSED, text=refused.reason))
        tx.set_status("waiting")


def refused_last(store: Store, run: RunRecord) -> bool:
    """Whether the run's last event says a process with other tools left it waiting (any process with
    the right ones may advance it)."""
    last = _last_event(store, run)
    return isinstance(last, StatusEvent) and last.code == REFUSED


def _last_event(store: Store, run: RunRecord) -> Event | None:
    found = store.events(run.id, after=run.last_seq - 1) if run.last_seq > 0 else []
    return found[-1] if found else None


def _origin(tool: Tool) -> str:
    """``module:function``, the module by its last name: the same file gives the same origin whether it was
    imported as a module, run as a script (``__main__``) or loaded as a tools file (``tools.py:registry``)."""
    function = tool.function
    module = str(getattr(function, "__module__", "") or "")
    name = str(getattr(function, "__qualname__", "") or getattr(function, "__name__", "") or tool.name)
    if module == "__main__" or module.startswith(_FILE_MODULES):
        try:
            source = inspect.getsourcefile(function)
        except TypeError:
            source = None
        module = Path(source).stem if source else module
    return f"{module.rsplit('.', 1)[-1]}:{name}" if module else name


__all__ = [
    "INPUT_KEY",
    "REFUSED",
    "ToolsDiffer",
    "check",
    "identities",
    "identity",
    "refuse",
    "refused_last",
]
