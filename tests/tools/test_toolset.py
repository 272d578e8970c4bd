"""Toolset: the core pack and meta tools, activation by domain and pack, hints, and the persisted state."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plangate.errors import ConfigError, SchemaVersionError
from plangate.tools import ADD_TOOL, REMOVE_TOOL, ToolRegistry, ToolResult, Toolset, ToolsetState, tool

FIXTURES = Path(__file__).parent / "fixtures"


@tool
def now() -> str:
    """The current time."""
    return "09:00"


@tool(domain="schedule", pack="read")
def get_overview() -> str:
    """Show the week."""
    return "overview"


@tool(effect="write", domain="schedule", pack="edit")
def place(task: str, slot: int) -> str:
    """Place a task."""
    return f"placed {task} at {slot}"


@tool(domain="data", pack="sql")
def db_query(source: str, sql: str) -> str:
    """Query."""
    return "rows"


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([now, get_overview, place, db_query])


def call(toolset: Toolset, name: str, arguments: dict[str, object]) -> ToolResult:
    return asyncio.run(toolset.call(name, arguments))


def test_a_run_starts_with_the_core_pack_and_the_meta_tools(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    assert toolset.active_names() == ["now", ADD_TOOL, REMOVE_TOOL]
    assert toolset.is_active("now")
    assert not toolset.is_active("place")
    assert not toolset.is_active("nonexistent")
    assert [entry["name"] for entry in toolset.catalogue()] == ["now", ADD_TOOL, REMOVE_TOOL]
    assert toolset.state() == ToolsetState(active=())


def test_inactive_tool_hint_names_the_activating_call(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    assert toolset.correction_for("place") == (
        'tool \'place\' is not active: call context_tools_add {"domain": "schedule", "packs": ["edit"]} first'
    )
    result = call(toolset, "place", {"task": "t1", "slot": 1})
    assert (result.status, result.error_code, result.observation) == (
        "blocked",
        "inactive_tool",
        toolset.correction_for("place"),
    )


def test_unknown_tool_gets_a_suggestion_or_the_active_list(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    assert toolset.correction_for("plcae") == "unknown tool 'plcae' (did you mean 'place'?)"
    assert toolset.correction_for("xyzzy") == (
        "unknown tool 'xyzzy' (active tools: now, context_tools_add, context_tools_remove)"
    )
    assert toolset.correction_for("now") == ""
    assert call(toolset, "xyzzy", {}).error_code == "unknown_tool"


def test_context_tools_add_merges_by_default_and_reports_what_is_active(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    result = call(toolset, ADD_TOOL, {"domain": "schedule", "packs": ["edit"]})
    assert result.status == "done"
    assert (
        result.observation
        == "active tools: core (now); schedule/edit (place); context_tools_add, context_tools_remove"
    )
    assert result.summary == "activated schedule"
    assert toolset.is_active("place")
    assert not toolset.is_active("get_overview")
    call(toolset, ADD_TOOL, {"domain": "data"})
    assert toolset.active_names() == ["now", "place", "db_query", ADD_TOOL, REMOVE_TOOL]
    assert call(toolset, "place", {"task": "t1", "slot": 4}).observation == "placed t1 at 4"


def test_replace_mode_drops_other_domains(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    toolset.activate("schedule")
    assert toolset.is_active("get_overview") and toolset.is_active("place")
    call(toolset, ADD_TOOL, {"domain": "data", "packs": ["sql"], "mode": "replace"})
    assert toolset.active_names() == ["now", "db_query", ADD_TOOL, REMOVE_TOOL]


def test_context_tools_remove(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    toolset.activate("schedule")
    result = call(toolset, REMOVE_TOOL, {"domain": "schedule", "packs": ["edit"]})
    assert (
        result.observation == "active tools: core (now); schedule/read (get_overview); context_tools_add, "
        "context_tools_remove"
    )
    call(toolset, REMOVE_TOOL, {"domain": "schedule"})
    assert toolset.active_names() == ["now", ADD_TOOL, REMOVE_TOOL]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (ADD_TOOL, {"domain": "schedul"}, "unknown domain 'schedul' (did you mean 'schedule'?)"),
        (ADD_TOOL, {"domain": "mail"}, "unknown domain 'mail' (known: core, schedule, data)"),
        (
            ADD_TOOL,
            {"domain": "schedule", "packs": ["write"]},
            "domain 'schedule' has no pack 'write' (packs: read, edit)",
        ),
        (REMOVE_TOOL, {"domain": "core"}, "the core pack is always active and cannot be removed"),
    ],
)
def test_meta_tool_mistakes_are_failed_results(
    registry: ToolRegistry, name: str, arguments: dict[str, object], message: str
) -> None:
    toolset = Toolset(registry)
    result = call(toolset, name, arguments)
    assert (result.status, result.error_code, result.error_message) == (
        "failed",
        "unknown_domain_or_pack",
        message,
    )
    assert toolset.active_names() == ["now", ADD_TOOL, REMOVE_TOOL]


def test_meta_tool_arguments_are_validated(registry: ToolRegistry) -> None:
    result = call(Toolset(registry), ADD_TOOL, {"domain": "data", "mode": "append"})
    assert result.error_code == "invalid_arguments"
    assert result.error_message == "arguments.mode: expected 'replace' or 'merge', got 'append'"


def test_meta_tool_description_lists_domains_and_packs(registry: ToolRegistry) -> None:
    add = Toolset(registry).get(ADD_TOOL)
    assert add.description == (
        "Activate a domain's tools. "
        "Domains: core (packs: core); schedule (packs: read, edit); data (packs: sql)."
    )
    assert add.effect == "read"


def test_state_round_trips_through_json(registry: ToolRegistry) -> None:
    toolset = Toolset(registry)
    toolset.activate("schedule", ["edit"])
    toolset.activate("data")
    stored = json.loads(toolset.state().model_dump_json())
    resumed = Toolset(registry, stored)
    assert resumed.active_names() == toolset.active_names()
    assert resumed.state() == toolset.state()


def test_frozen_version_1_state_still_loads(registry: ToolRegistry) -> None:
    stored = json.loads((FIXTURES / "toolset_state_v1.json").read_text(encoding="utf-8"))
    resumed = Toolset(registry, stored)
    assert resumed.active_names() == ["now", "place", "db_query", ADD_TOOL, REMOVE_TOOL]


def test_newer_state_versions_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(SchemaVersionError, match="expected version 1 or older, got 2"):
        Toolset(registry, {"version": 2, "active": []})


def test_meta_tool_names_are_reserved() -> None:
    @tool(name=ADD_TOOL)
    def impostor() -> str:
        """Impostor."""
        return ""

    with pytest.raises(ConfigError, match="reserved for the toolset's meta tools"):
        Toolset(ToolRegistry([impostor]))


def test_with_core_tools_alone_there_are_no_meta_tools() -> None:
    toolset = Toolset(ToolRegistry([now]))
    assert toolset.active_names() == ["now"]
    assert not toolset.is_active(ADD_TOOL) and not toolset.is_active(REMOVE_TOOL)


def test_a_meta_tool_called_when_no_domain_exists_is_not_suggested_as_itself() -> None:
    # With core tools only, the meta tools are not offered; the correction used to read
    # "unknown tool 'context_tools_add' (did you mean 'context_tools_add'?)".
    toolset = Toolset(ToolRegistry([now]))
    assert toolset.active_names() == ["now"]
    correction = toolset.correction_for("context_tools_add")
    assert correction == (
        "'context_tools_add' is not available: there is no tool domain to activate or remove, every tool is "
        "active already (active tools: now)"
    )
    result = asyncio.run(toolset.call("context_tools_add", {"domain": "schedule"}))
    assert (result.status, result.error_code, result.observation) == ("blocked", "unknown_tool", correction)
    # A near miss of a meta tool is not pointed at a tool that is not offered either.
    assert toolset.correction_for("context_tools_ad") == "unknown tool 'context_tools_ad' (active tools: now)"


def test_the_active_tools_follow_the_registry_and_the_packs_as_they_change() -> None:
    registry = ToolRegistry([now])
    toolset = Toolset(registry)
    assert toolset.active_names() == ["now"]  # core tools alone: no meta tools to offer
    registry.register(get_overview)  # a tool registered after the toolset was made
    assert toolset.active_names() == ["now", ADD_TOOL, REMOVE_TOOL]
    toolset.activate("schedule", ["read"])
    assert toolset.active_names() == ["now", "get_overview", ADD_TOOL, REMOVE_TOOL]
    registry.register(place)
    toolset.activate("schedule", ["edit"])
    assert toolset.active_names() == ["now", "get_overview", "place", ADD_TOOL, REMOVE_TOOL]
    toolset.deactivate("schedule", ["read"])
    assert toolset.active_names() == ["now", "place", ADD_TOOL, REMOVE_TOOL]
    listed = toolset.active_tools()
    listed.clear()  # the caller's own list
    assert toolset.active_names() == ["now", "place", ADD_TOOL, REMOVE_TOOL]
