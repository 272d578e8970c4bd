"""The tools of ``plan-week.formula.toml``: the shop data, the week planner, and the example tools.

``registry`` holds ``db_schema`` / ``db_query`` on the bundled ``shop`` database, the ``schedule`` tools on
the week kept in the default store (``$PLANGATE_STORE``, else ``.plangate/plangate.db``), and the tools of
``tools.py``. Importing it stores the example week there when the store has none, and adds the task the
formula's agent places ("review") when the week lacks it.

Use them with ``--tools examples/formulas/demo_tools.py:registry``. ``python examples/formulas/demo_tools.py
fresh-week`` puts a fresh example week in the store (``./dev demo`` does, before each demo: the review an
earlier demo placed is gone, so this one can place it again); the runs stored there are kept.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from plangate.store import Store, open_store
from plangate.tools import Tool, ToolRegistry
from plangate.tools.data import DataSources, data_tools, register_shop
from plangate.tools.schedule import ScheduleState, ScheduleStore, Task, schedule_tools, seed_week

REVIEW = Task(id="review", title="Review the regional numbers", duration=1, kind="admin", deadline=4)


def prepare_week(store: Store, *, fresh: bool = False) -> None:
    """Store the example week when there is none (or, ``fresh``, in place of the one there), and add the
    ``review`` task when it is missing."""
    week = ScheduleStore(store)
    if fresh or week.load()[1] is None:
        seed_week(store)
    planner, _ = week.load()
    if all(task.id != REVIEW.id for task in planner.tasks()):
        state = planner.state
        week.replace(ScheduleState(tasks=(*state.tasks, REVIEW), events=state.events, applied=state.applied))


def _example_tools() -> list[Tool]:
    # tools.py sits next to this file; the command line loads both by path, so import it the same way
    spec = importlib.util.spec_from_file_location(
        "plangate_example_tools", Path(__file__).with_name("tools.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: ToolRegistry = module.registry
    return found.tools()


store = open_store()
prepare_week(store, fresh=__name__ == "__main__" and sys.argv[1:] == ["fresh-week"])
sources = DataSources()
register_shop(sources)
registry = ToolRegistry([*data_tools(sources), *schedule_tools(store), *_example_tools()])

if __name__ == "__main__":
    if sys.argv[1:] != ["fresh-week"]:
        sys.exit(f"usage: {sys.argv[0]} fresh-week  (a fresh example week in the store)")
    print("demo: a fresh example week in the store (earlier runs are kept)", file=sys.stderr)
