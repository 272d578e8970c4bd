"""The tools of ``plan-week.formula.toml``: the shop data, the week planner, and the example tools.

``registry`` holds ``db_schema`` / ``db_query`` on the bundled ``shop`` database, the ``schedule`` tools on
the week kept in the default store (``$PLANGATE_STORE``, else ``.plangate/plangate.db``), and the tools of
``tools.py``. Importing it stores the example week there when the store has none, and adds the task the
formula's agent places ("review") when the week lacks it.

Use them with ``--tools examples/formulas/demo_tools.py:registry``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from plangate.store import Store, open_store
from plangate.tools import Tool, ToolRegistry
from plangate.tools.data import DataSources, data_tools, register_shop
from plangate.tools.schedule import ScheduleState, ScheduleStore, Task, schedule_tools, seed_week

REVIEW = Task(id="review", title="Review the regional numbers", duration=1, kind="admin", deadline=4)


def prepare_week(store: Store) -> None:
    """Store the example week when there is none, and add the ``review`` task when it is missing."""
    week = ScheduleStore(store)
    if week.load()[1] is None:
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
prepare_week(store)
sources = DataSources()
register_shop(sources)
registry = ToolRegistry([*data_tools(sources), *schedule_tools(store), *_example_tools()])
