"""The schedule tools through a ToolRegistry on a real store: results, persistence, exactly once (the tests
that reopen the store run on a SQLite file and on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import plangate.tools.schedule
from plangate.errors import ConfigError, SchemaVersionError, StoreError
from plangate.store import Document, DocumentConflict, Documents, SQLiteStore, Store, open_store
from plangate.tools import Reconciler, ToolRegistry, ToolResult, Toolset
from plangate.tools.schedule import (
    NAMESPACE,
    FixedEvent,
    Planner,
    ScheduleState,
    ScheduleStore,
    Task,
    example_week,
    schedule_tools,
    seed_week,
)
from plangate.tools.schedule.store import MAX_ATTEMPTS

FIXTURES = Path(__file__).parent / "fixtures"
READ = ["get_overview", "query_available_slots", "query_target_tasks", "analyze_health"]
WRITE = ["place", "move", "swap", "unplace", "batch_move"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "plangate.db")
    seed_week(opened)
    yield opened
    opened.close()


def call(
    registry: ToolRegistry, name: str, arguments: Mapping[str, object], key: str | None = None
) -> ToolResult:
    return asyncio.run(registry.call(name, arguments, idempotency_key=key))


def stored_version(store: Store, planner_id: str = "default") -> int | None:
    document = Documents(store).get(NAMESPACE, planner_id)
    return None if document is None else document.version


def reconciler(registry: ToolRegistry, name: str) -> Reconciler:
    hook = registry.get(name).reconcile
    assert hook is not None
    return hook


# -- the toolkit's shape -------------------------------------------------------------------------------------


def test_read_and_write_tools_of_the_schedule_domain(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    assert registry.names() == READ + WRITE
    assert registry.domains() == {"schedule": ["read", "edit"]}
    for name in READ:
        found = registry.get(name)
        assert (found.effect, found.pack, found.idempotent, found.reconcile) == ("read", "read", True, None)
        assert not registry.needs_consent(name)
    for name in WRITE:
        found = registry.get(name)
        assert (found.effect, found.pack, found.idempotent) == ("write", "edit", False)
        assert found.reconcile is not None
        assert registry.needs_consent(name) and not registry.needs_consent(name, always_execute=True)


def test_the_edit_pack_is_activated_like_any_other(store: Store) -> None:
    toolset = Toolset(ToolRegistry(schedule_tools(store)))
    blocked = asyncio.run(toolset.call("place", {"task": "t7", "day": "mon", "slot": 7}))
    assert blocked.observation == (
        'tool \'place\' is not active: call context_tools_add {"domain": "schedule", "packs": ["edit"]} first'
    )
    toolset.activate("schedule", ["edit"])
    assert asyncio.run(toolset.call("place", {"task": "t7", "day": "mon", "slot": 7})).status == "done"


def test_the_package_example_runs() -> None:
    doc = plangate.tools.schedule.__doc__ or ""
    code = textwrap.dedent(doc.split("::\n", 1)[1].split('"""')[0])
    exec(compile(code, "plangate.tools.schedule docstring", "exec"), {})


def test_the_planner_module_example_runs() -> None:
    doc = plangate.tools.schedule.planner.__doc__ or ""
    code = textwrap.dedent(doc.split("::\n", 1)[1])
    exec(compile(code, "plangate.tools.schedule.planner docstring", "exec"), {})


# -- reading -------------------------------------------------------------------------------------------------


def test_read_tools_report_the_stored_week(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    overview = call(registry, "get_overview", {})
    assert overview.status == "done" and overview.summary == "6/10 tasks placed, 61 slots free"
    assert overview.observation.splitlines()[-1].startswith("unplaced: t3 Prepare board slides")
    slots = call(registry, "query_available_slots", {"day": "thu", "duration": 2})
    assert slots.observation == (
        "free windows on thu for a 2-slot task:\nthu: 12:00-16:00 (4 slots), start 12:00-14:00 · "
        "18:00-20:00 (2 slots), start at 18:00"
    )
    tasks = call(registry, "query_target_tasks", {"filter": "unplaced"})
    assert [row["id"] for row in tasks.data] == ["t3", "t4", "t7", "t9"]  # type: ignore[union-attr,index]
    every = call(registry, "query_target_tasks", {"filter": "all"})
    assert every.observation.splitlines()[0] == "10 tasks: 6 placed, 4 unplaced (t3, t4, t7, t9)"
    health = call(registry, "analyze_health", {})
    assert health.observation.splitlines()[-1].startswith('next move: place {"task": "t7", "day": "mon"')


def test_an_empty_filter_result_names_the_classes(store: Store) -> None:
    result = call(ToolRegistry(schedule_tools(store)), "query_target_tasks", {"filter": "class=gardening"})
    assert (result.status, result.data) == ("done", [])
    assert result.observation == (
        "no task matches 'class=gardening' (classes in this week: admin, deep, meeting, personal)"
    )


def test_read_refusals_are_blocked_results(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    result = call(registry, "query_target_tasks", {"filter": "soon"})
    assert (result.status, result.error_code) == ("blocked", "invalid_filter")
    bad_duration = call(registry, "query_available_slots", {"duration": 13})
    assert (bad_duration.status, bad_duration.error_code) == ("blocked", "invalid_arguments")


def test_a_missing_week_reads_as_empty(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "empty.db") as empty:
        result = call(ToolRegistry(schedule_tools(empty, "nobody")), "get_overview", {})
    assert result.observation.splitlines()[0] == (
        "week 'nobody': 0 tasks (0 placed, 0 unplaced), 0 fixed events; 84 of 84 slots free"
    )


# -- writing -------------------------------------------------------------------------------------------------


def test_a_write_is_stored_and_survives_reopening_the_store(store_url: str) -> None:
    with closing(open_store(store_url)) as first:
        seed_week(first, "team")
        result = call(
            ToolRegistry(schedule_tools(first, "team")),
            "place",
            {"task": "t7", "day": "mon", "slot": "15:00"},
        )
    assert (result.status, result.observation) == (
        "done",
        "placed t7 'Design review prep' on mon 15:00-17:00",
    )
    assert result.summary == "place t7 mon 15:00-17:00"
    assert result.data == {
        "tasks": [
            {
                "id": "t7",
                "title": "Design review prep",
                "duration": 2,
                "class": "deep",
                "deadline": "tue",
                "day": "mon",
                "slot": 7,
            }
        ]
    }
    with closing(open_store(store_url)) as reopened:
        overview = call(ToolRegistry(schedule_tools(reopened, "team")), "get_overview", {})
        assert "15:00-17:00 t7 Design review prep (deep)" in overview.observation
        planner, version = ScheduleStore(reopened, "team").load()
    assert version == 2
    assert planner.task("t7").placement is not None


@pytest.mark.parametrize(
    ("name", "arguments", "status", "code", "reason"),
    [
        (
            "place",
            {"task": "t3", "day": "mon", "slot": 3},
            "failed",
            "overlap",
            "t3 on mon 11:00-15:00 would overlap t1 'Write Q3 roadmap' (mon 09:00-12:00); "
            "e2 'Sprint planning' (fixed) (mon 13:00-15:00)",
        ),
        (
            "place",
            {"task": "t3", "day": "fri", "slot": 9},
            "failed",
            "outside_day",
            "t3 takes 4 slots: starting at 17:00 on fri it would end at 21:00, after the day ends at 20:00 "
            "(latest start 16:00)",
        ),
        (
            "move",
            {"task": "t1", "day": "thu", "slot": 5},
            "failed",
            "past_deadline",
            "t1 is due by wed: thu is after its deadline",
        ),
        (
            "swap",
            {"task_a": "t1", "task_b": "t2"},
            "failed",
            "wrong_duration",
            "swap needs tasks of the same duration: t1 takes 3 slots, t2 takes 2; "
            "use batch_move to move both",
        ),
        (
            "batch_move",
            {"moves": [{"task": "t2", "day": 5, "slot": 0}] * 3},
            "blocked",
            "too_many_moves",
            "batch_move takes at most 2 moves, got 3: split it into batches",
        ),
        (
            "unplace",
            {"task": "e4"},
            "blocked",
            "fixed_event",
            "e4 'Client call' on wed 14:00-16:00 is a fixed event: it cannot be moved",
        ),
        (
            "move",
            {"task": "t2", "day": "Caturday", "slot": 0},
            "blocked",
            "invalid_day",
            "expected a day mon..sun, monday..sunday or 0-6 (0 = mon), got 'Caturday'",
        ),
    ],
)
def test_refused_writes_say_why_and_store_nothing(
    store: Store, name: str, arguments: dict[str, Any], status: str, code: str, reason: str
) -> None:
    before = Documents(store).get(NAMESPACE, "default")
    result = call(ToolRegistry(schedule_tools(store)), name, arguments, key="int_refused")
    assert (result.status, result.error_code, result.error_message) == (status, code, reason)
    assert Documents(store).get(NAMESPACE, "default") == before
    assert reconciler(ToolRegistry(schedule_tools(store)), name)("int_refused") is None


def test_batch_move_through_the_tool_is_all_or_nothing(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    version = stored_version(store)
    refused = call(
        registry,
        "batch_move",
        {"moves": [{"task": "t2", "day": "sun", "slot": 0}, {"task": "t5", "day": "mon", "slot": 0}]},
    )
    assert (refused.status, refused.error_code) == ("failed", "overlap")
    assert refused.error_message is not None and refused.error_message.endswith("; nothing was moved")
    assert stored_version(store) == version
    done = call(
        registry,
        "batch_move",
        {"moves": [{"task": "t1", "day": "tue", "slot": "11:00"}, {"task": "t3", "day": "mon", "slot": 1}]},
    )
    assert done.observation == (
        "moved t1 'Write Q3 roadmap' to tue 11:00-14:00; placed t3 'Prepare board slides' on mon 09:00-13:00"
    )
    assert stored_version(store) == (version or 0) + 1


def test_an_infeasible_week_blocks_writes_with_the_numbers(store: Store) -> None:
    crowded = ScheduleState(
        tasks=(
            *example_week().tasks,
            *(Task(id=f"x{n}", title="Overflow", duration=4, kind="admin") for n in range(14)),
        ),
        events=example_week().events,
    )
    ScheduleStore(store).replace(crowded)
    registry = ToolRegistry(schedule_tools(store))
    result = call(registry, "place", {"task": "t9", "day": "sun", "slot": 0})
    assert (result.status, result.error_code) == ("blocked", "infeasible_plan")
    assert result.error_message == (
        "the week is infeasible: the unplaced tasks need 64 slots but only 61 are free (3 short); placing or "
        "moving tasks cannot change that: remove or shorten tasks first"
    )
    assert call(registry, "analyze_health", {}).summary == "infeasible"


# -- exactly once --------------------------------------------------------------------------------------------


def test_reconcile_returns_the_earlier_result_of_an_applied_key(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    first = call(registry, "place", {"task": "t7", "day": "mon", "slot": 7}, key="int_a")
    assert first.status == "done"
    assert reconciler(registry, "place")("int_a") == first
    assert reconciler(registry, "move")("int_a") == first  # one key space for every write of the week
    assert reconciler(registry, "place")("int_never") is None


def test_a_key_that_already_applied_is_not_applied_twice(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    first = call(registry, "move", {"task": "t1", "day": "mon", "slot": 8}, key="int_b")
    version = stored_version(store)
    again = call(registry, "move", {"task": "t1", "day": "mon", "slot": 8}, key="int_b")
    assert again == first
    assert stored_version(store) == version
    # Without the key the same call is a new write: t1 is already there, so nothing moves.
    fresh = call(registry, "move", {"task": "t1", "day": "mon", "slot": 8})
    assert fresh.observation == "t1 'Write Q3 roadmap' is already on mon 16:00-19:00; nothing changed"


def test_an_applied_key_is_recognised_after_the_store_is_reopened(store_url: str) -> None:
    with closing(open_store(store_url)) as first:
        seed_week(first)
        done = call(ToolRegistry(schedule_tools(first)), "unplace", {"task": "t6"}, key="int_c")
    with closing(open_store(store_url)) as reopened:
        registry = ToolRegistry(schedule_tools(reopened))
        assert reconciler(registry, "unplace")("int_c") == done
        assert call(registry, "unplace", {"task": "t6"}, key="int_c") == done


def test_a_key_reused_for_another_call_is_blocked(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    call(registry, "place", {"task": "t9", "day": "sun", "slot": 0}, key="int_d")
    version = stored_version(store)
    reused = call(registry, "place", {"task": "t4", "day": "sun", "slot": 1}, key="int_d")
    assert (reused.status, reused.error_code) == ("blocked", "idempotency_key_reused")
    assert reused.error_message == (
        "the idempotency key 'int_d' belongs to an earlier place call with other arguments; nothing changed"
    )
    assert stored_version(store) == version


def test_the_key_is_recorded_in_the_same_save_as_the_change(store: Store) -> None:
    registry = ToolRegistry(schedule_tools(store))
    version = stored_version(store)
    call(registry, "swap", {"task_a": "t2", "task_b": "t6"}, key="int_e")
    document = Documents(store).get(NAMESPACE, "default")
    assert document is not None and document.version == (version or 0) + 1
    state = ScheduleState.model_validate(document.value)
    assert [write.key for write in state.applied] == ["int_e"]
    assert Planner(state).task("t2").placement == Planner(example_week()).task("t6").placement


# -- compare-and-set -----------------------------------------------------------------------------------------


def test_a_stale_save_is_refused(store: Store) -> None:
    week = ScheduleStore(store)
    planner, version = week.load()
    other, _ = week.load()
    other.place("t9", "sun", 0)
    week.save(other, expected_version=version)
    planner.place("t4", "fri", 5)
    with pytest.raises(DocumentConflict, match="expected version 1, found version 2"):
        week.save(planner, expected_version=version)


def test_update_reapplies_a_change_on_the_week_another_writer_saved(store: Store) -> None:
    mine, theirs = ScheduleStore(store), ScheduleStore(store)
    runs: list[int | None] = []

    def place_t9(planner: Planner) -> str:
        if not runs:
            # Another writer saves between this writer's read and its save.
            theirs.update(lambda other: other.place("t4", "fri", 5))
        runs.append(stored_version(store))
        return planner.place("t9", "sun", 1).text

    assert mine.update(place_t9) == "placed t9 'Grocery run' on sun 09:00-10:00"
    assert runs == [2, 2]
    planner, version = mine.load()
    assert version == 3
    assert [planner.task(name).placement is not None for name in ("t4", "t9")] == [True, True]


def test_a_write_that_keeps_losing_the_race_fails_and_changes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[int | None] = []

    def another_writer_saved_first(
        self: Documents, namespace: str, key: str, value: Mapping[str, object], **options: Any
    ) -> Document:
        attempts.append(options["expected_version"])
        raise DocumentConflict(
            "busy", namespace=namespace, key=key, expected_version=options["expected_version"], current=None
        )

    monkeypatch.setattr(Documents, "put", another_writer_saved_first)
    registry = ToolRegistry(schedule_tools(store, "default"))
    result = call(registry, "place", {"task": "t9", "day": "sun", "slot": 0})
    assert (result.status, result.error_code) == ("failed", "conflict")
    assert result.error_message == (
        f"the week 'default' kept changing under this write ({MAX_ATTEMPTS} tries); nothing was changed: "
        "read it again and retry"
    )
    assert len(attempts) == MAX_ATTEMPTS
    assert stored_version(store) == 1


# -- the stored form -----------------------------------------------------------------------------------------


def test_the_example_week_is_stored_in_the_frozen_v1_format(store: Store) -> None:
    document = Documents(store).get(NAMESPACE, "default")
    assert document is not None
    frozen = json.loads((FIXTURES / "schedule_state_v1.json").read_text())
    assert document.value == frozen
    assert ScheduleState.model_validate(frozen) == example_week()


def test_a_week_from_a_newer_plangate_is_refused(store: Store) -> None:
    Documents(store).put(NAMESPACE, "future", {"schema_version": 2, "tasks": []}, expected_version=None)
    with pytest.raises(SchemaVersionError, match="format version 2; this plangate reads up to version 1"):
        ScheduleStore(store, "future").load()
    result = call(ToolRegistry(schedule_tools(store, "future")), "get_overview", {})
    assert (result.status, result.error_code) == ("failed", "tool_error")
    assert "format version 2" in (result.error_message or "")


def test_an_unreadable_week_is_a_store_error_naming_it(store: Store) -> None:
    Documents(store).put(NAMESPACE, "broken", {"tasks": [{"id": "t1"}]}, expected_version=None)
    with pytest.raises(StoreError, match=r"the week planner 'broken' \(document version 1\) cannot be read"):
        ScheduleStore(store, "broken").load()
    clash = ScheduleState(
        tasks=(Task(id="x", title="Task", duration=1, kind="admin"),),
        events=(FixedEvent(id="x", title="Event", day=0, start=0, duration=1),),
    ).to_json()
    Documents(store).put(NAMESPACE, "clash", clash, expected_version=None)
    with pytest.raises(StoreError, match="the id 'x' is used twice"):
        ScheduleStore(store, "clash").load()


def test_seed_week_replaces_what_was_stored(store: Store) -> None:
    call(ToolRegistry(schedule_tools(store)), "unplace", {"task": "t1"})
    empty = seed_week(store, example=False)
    assert empty.tasks() == [] and empty.events() == []
    planner, version = ScheduleStore(store).load()
    assert (planner.state, version) == (ScheduleState(), 3)
    assert seed_week(store).state == example_week()


def test_a_planner_id_is_required() -> None:
    with pytest.raises(ConfigError, match="planner_id: expected a non-empty string, got ''"):
        ScheduleStore(None, "")  # type: ignore[arg-type]
