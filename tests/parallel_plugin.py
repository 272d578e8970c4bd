"""How a parallel run shares the tests out: ``pytest -n auto --dist loadscope``, the run ``./dev test`` makes
(pytest-xdist: one worker process per CPU; ``-n 0`` runs them all in this process).

For: the units of work the workers take, their order, and what a worker sets before its tests run. A worker
takes the next unit whenever it has little left, so a unit is what must run in one process, in order:

- A module's tests are one unit (its module-scoped fixtures are made once; a test that relies on an earlier
  one of its module finds it as in a serial run), unless the module is marked ``spread``: its tests share
  nothing, so each goes to whichever worker is free (the blocks of ``tests/test_readme.py``).
- The tests that use a server one process should start for all of them (``SHARED_SERVERS``: Arize Phoenix,
  llama-cpp-python's server) are one unit across modules: the server starts on one worker only.
- The longest units go first, so that none starts last and leaves a worker idle at the end. The length is
  guessed from marks, never from timings: a generation of the real local model, a property test (10,000
  examples in the ``ci`` profile), a ``slow`` test, any other.
- A worker's ``os.environ`` is the controller's. GNU readline, which pytest's capture imports, puts
  ``COLUMNS=80`` and ``LINES=24`` in the environment of a process with no terminal, below ``os.environ``:
  the processes it starts inherit them (in a serial run as in a worker), its Python code does not see them.
  A worker, started by the controller, would find them in its ``os.environ``, and every rich console of its
  tests would cut lines at 80 columns where a serial run cuts none.
- In a run of several workers, the local model keeps to one thread (``PLANGATE_LOCAL_THREADS=1``, unless
  set): llama.cpp's threads wait for each other at every token, so with the other CPU busy with another
  worker's test two threads generate slower than one (``plangate.models.local``). ``tests/test_readme.py``
  passes the setting on to the blocks it runs.

How: each worker collects, orders the tests unit by unit, heaviest first, and writes which unit each test
belongs to into a folder the controller made; the controller's scheduler (xdist's ``loadscope`` with these
units for scopes, in the workers' order) reads it. xdist's own ``loadgroup`` would carry the units in the
tests' ids, which pytest 9.2 no longer lets a plugin change (pytest-xdist issue 1386).

Not for: which tests run (every collected test runs, in a serial run as in a parallel one); the servers
themselves (``services_plugin.py``, ``phoenix_plugin.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

SHARED_SERVERS = ("phoenix", "llama_server")
"""Session-scoped fixtures whose server one worker starts for every test that uses it."""

THREADS_ENV = "PLANGATE_LOCAL_THREADS"  # plangate.models.local.THREADS_ENV, which needs the local extra
_TERMINAL = ("COLUMNS", "LINES")
_FOLDER = "plangate_units"  # the keys of each worker's workerinput: the units' folder,
_ENVIRON = "plangate_environ"  # and the controller's own values of _TERMINAL


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "spread: the module's tests share no set-up: a parallel run gives each to whichever worker is free",
    )
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    for name, value in workerinput.get(_ENVIRON, {}).items():
        if value is not None:
            os.environ[name] = value
        elif (inherited := os.environ.pop(name, None)) is not None:
            os.putenv(name, inherited)  # out of os.environ only: its children keep it, as in serial
    if int(workerinput.get("workercount", 1)) > 1:
        os.environ.setdefault(THREADS_ENV, "1")


# -- in each worker: the units and their order --------------------------------------------------------------


def _unit(item: pytest.Item) -> str:
    """The unit ``item`` runs in: a shared server's, its module's, or its own (its node id)."""
    for server in SHARED_SERVERS:
        if server in getattr(item, "fixturenames", ()):
            return f"server:{server}"
    if item.get_closest_marker("spread") is not None:
        return item.nodeid
    return item.nodeid.split("::", 1)[0]


def _weight(item: pytest.Item) -> float:
    """A guess of how long ``item`` takes, in rough seconds of a quiet two-core machine."""
    names = getattr(item, "fixturenames", ())
    if item.get_closest_marker("local_model") is not None or "llama_server" in names:
        return 30.0
    # hypothesis marks its tests after this hook runs; its decorator has marked the function already
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) or "phoenix" in names:
        return 15.0
    if item.get_closest_marker("slow") is not None:
        return 5.0
    return 0.1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None or _FOLDER not in workerinput:
        return  # a serial run, the controller of a parallel one (its workers collect) or another --dist
    units = [_unit(item) for item in items]
    weights: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, (unit, item) in enumerate(zip(units, items, strict=True)):
        weights[unit] = weights.get(unit, 0.0) + _weight(item)
        first.setdefault(unit, index)
    # Every worker collects and orders the same way, so the orders agree (xdist checks that they do).
    order = sorted(range(len(items)), key=lambda i: (-weights[units[i]], first[units[i]], i))
    mapping = {items[i].nodeid: units[i] for i in order}
    items[:] = [items[i] for i in order]
    target = Path(workerinput[_FOLDER]) / f"{workerinput['workerid']}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(mapping), encoding="utf-8")
    partial.replace(target)  # whole or absent when the controller reads it


# -- in the controller: the scheduler -----------------------------------------------------------------------

_made: list[Path] = []


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Give each worker the controller's terminal variables and the folder it writes its units into."""
    node.workerinput[_ENVIRON] = {name: os.environ.get(name) for name in _TERMINAL}
    if node.config.getvalue("dist") != "loadscope":
        return
    if not _made:
        _made.append(Path(tempfile.mkdtemp(prefix="plangate-units-")))
    node.workerinput[_FOLDER] = str(_made[0])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's ``loadscope`` whose scopes are the units the workers wrote, in their order."""

        _units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._units is None:
                self._units = {}
                for path in sorted(_made[0].glob("*.json")) if _made else ():
                    self._units.update(json.loads(path.read_text(encoding="utf-8")))
            return self._units.get(nodeid) or nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False  # the workers ordered the units, longest first
    return UnitScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        while _made:
            shutil.rmtree(_made.pop(), ignore_errors=True)
