"""ToolRegistry: registration, lookup with suggestions, validation, digests, catalogue, consent, calls."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.errors import ConfigError
from plangate.tools import (
    ToolArgumentsError,
    ToolRegistry,
    UnknownToolError,
    canonical_json,
    digest_json,
    needs_consent,
    tool,
)


@tool(domain="schedule", pack="read")
def get_overview(day: str | None = None) -> str:
    """Show the week."""
    return f"overview {day}"


@tool(effect="write", domain="schedule", pack="edit")
def place(task: str, slot: int, note: str = "") -> str:
    """Place a task in a slot."""
    return f"placed {task} at {slot}"


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([get_overview, place])


def test_lookup_names_order_and_membership(registry: ToolRegistry) -> None:
    assert registry.names() == ["get_overview", "place"]
    assert registry.get("place") is place
    assert "place" in registry
    assert "plcae" not in registry
    assert len(registry) == 2
    assert [item.name for item in registry] == ["get_overview", "place"]
    assert registry.domains() == {"schedule": ["read", "edit"]}


def test_unknown_tool_suggests_the_closest_name(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolError, match=r"^unknown tool 'plcae' \(did you mean 'place'\?\)$"):
        registry.get("plcae")
    with pytest.raises(UnknownToolError, match=r"^unknown tool 'teleport'$"):
        registry.get("teleport")


def test_duplicates_and_non_tools_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigError, match="a tool named 'place' is already registered"):
        registry.register(place)

    def plain() -> str:
        return ""

    with pytest.raises(
        ConfigError, match="expected a Tool \\(decorate the function with @tool\\), got function"
    ):
        registry.register(plain)  # type: ignore[arg-type]


def test_validate_raises_with_the_path_message(registry: ToolRegistry) -> None:
    assert registry.validate("place", {"task": "t1", "slot": "2"}) == {"task": "t1", "slot": 2, "note": ""}
    with pytest.raises(ToolArgumentsError, match=r"^arguments.slot: expected an integer, got 'nine'$"):
        registry.validate("place", {"task": "t1", "slot": "nine"})


def test_canonical_json_sorts_keys_drops_whitespace_keeps_unicode() -> None:
    assert canonical_json({"b": [1, {"d": 2, "c": "é"}], "a": None}) == '{"a":null,"b":[1,{"c":"é","d":2}]}'
    expected = hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()
    assert digest_json({"b": 1, "a": "é"}) == expected


def test_digest_is_of_the_validated_arguments(registry: ToolRegistry) -> None:
    written_out = registry.arguments_digest("place", {"task": "t1", "slot": 3, "note": ""})
    assert registry.arguments_digest("place", {"slot": "3", "task": "t1"}) == written_out
    assert written_out == digest_json({"note": "", "slot": 3, "task": "t1"})
    assert registry.arguments_digest("place", {"task": "t1", "slot": 4}) != written_out
    with pytest.raises(ToolArgumentsError):
        registry.arguments_digest("place", {"task": "t1"})


ITEMS = [
    ("task", "t1"),
    ("slot", 3),
    ("ключ", "значение"),
    ("moves", [{"task": "a", "slot": 1}, {"slot": 2, "task": "b"}]),
    ("filters", {"z": None, "a": True, "m": 1.5}),
    ("", ""),
]
REFERENCE = digest_json(dict(ITEMS))


@given(st.permutations(ITEMS))
def test_digest_ignores_key_order(items: list[tuple[str, object]]) -> None:
    assert digest_json(dict(items)) == REFERENCE


def test_schema_catalogue(registry: ToolRegistry) -> None:
    catalogue = registry.schema_catalogue(["place"])
    assert catalogue == [
        {
            "name": "place",
            "description": "Place a task in a slot.",
            "parameters": place.parameters,
            "effect": "write",
        }
    ]
    assert [entry["name"] for entry in registry.schema_catalogue()] == ["get_overview", "place"]
    with pytest.raises(UnknownToolError):
        registry.schema_catalogue(["nope"])


def test_consent_is_decided_by_the_registry(registry: ToolRegistry) -> None:
    assert needs_consent(place) is True
    assert needs_consent(place, always_execute=True) is False
    assert needs_consent(get_overview) is False
    assert registry.needs_consent("place") is True
    assert registry.needs_consent("get_overview", always_execute=True) is False


def test_call_runs_and_reports(registry: ToolRegistry) -> None:
    result = asyncio.run(registry.call("place", {"task": "t1", "slot": 9}))
    assert (result.status, result.observation) == ("done", "placed t1 at 9")
    unknown = asyncio.run(registry.call("plcae", {}))
    assert (unknown.status, unknown.error_code, unknown.observation) == (
        "blocked",
        "unknown_tool",
        "unknown tool 'plcae' (did you mean 'place'?)",
    )
    invalid = asyncio.run(registry.call("place", {"task": "t1"}))
    assert (invalid.status, invalid.error_code) == ("blocked", "invalid_arguments")
