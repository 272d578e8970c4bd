"""The @tool decorator: schemas derived from signatures and docstrings, options, and refused definitions."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from plangate.tools import Tool, ToolDefinitionError, tool
from plangate.tools._schema import parse_docstring


class Move(BaseModel):
    task: str
    slot: int


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_bare_decorator_derives_types_required_and_defaults() -> None:
    @tool
    def place(
        task: str, slot: int, weight: float = 1.5, pinned: bool = False, tags: list[str] | None = None
    ) -> str:
        """Place a task in a slot."""
        return "ok"

    assert isinstance(place, Tool)
    assert place.name == "place"
    assert place.description == "Place a task in a slot."
    assert (place.effect, place.domain, place.pack, place.idempotent) == ("read", "core", "core", None)
    params = place.parameters
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert params["required"] == ["task", "slot"]
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["task"] == {"type": "string"}
    assert props["slot"] == {"type": "integer"}
    assert props["weight"] == {"type": "number", "default": 1.5}
    assert props["pinned"] == {"type": "boolean", "default": False}
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
        "default": None,
    }


def test_decorator_with_options() -> None:
    @tool(
        effect="write",
        domain="schedule",
        pack="edit",
        idempotent=False,
        name="move_task",
        description="Move one task.",
        timeout=5,
    )
    async def move(task: str, slot: int) -> str:
        """Ignored because a description is given."""
        return "moved"

    assert move.name == "move_task"
    assert move.description == "Move one task."
    assert (move.effect, move.domain, move.pack, move.idempotent, move.timeout) == (
        "write",
        "schedule",
        "edit",
        False,
        5,
    )


def test_docstring_args_become_parameter_descriptions() -> None:
    @tool
    def book(room: str, hours: int = 1) -> str:
        """Book a room.

        The booking is tentative until
        someone confirms it.

        Args:
            room (str): the room's code,
                for example "B2".
            hours: how long, in hours.

        Returns:
            the booking id.
        """
        return "b1"

    assert book.description == "Book a room.\n\nThe booking is tentative until someone confirms it."
    props = book.parameters["properties"]
    assert isinstance(props, dict)
    assert props["room"] == {"type": "string", "description": 'the room\'s code, for example "B2".'}
    assert props["hours"] == {"type": "integer", "default": 1, "description": "how long, in hours."}


def test_nested_models_literals_and_enums() -> None:
    @tool
    def batch_move(
        moves: list[Move], mode: Literal["strict", "loose"] = "strict", colour: Colour = Colour.RED
    ) -> str:
        """Move several tasks."""
        return "ok"

    params = batch_move.parameters
    defs = params["$defs"]
    assert isinstance(defs, dict)
    assert defs["Move"] == {
        "type": "object",
        "properties": {"task": {"type": "string"}, "slot": {"type": "integer"}},
        "required": ["task", "slot"],
    }
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["moves"] == {"type": "array", "items": {"$ref": "#/$defs/Move"}}
    assert props["mode"] == {"type": "string", "enum": ["strict", "loose"], "default": "strict"}
    assert props["colour"] == {"$ref": "#/$defs/Colour", "default": "red"}


def test_annotated_field_constraints_are_kept() -> None:
    @tool
    def pick(slot: Annotated[int, Field(ge=0, le=11)]) -> str:
        """Pick a slot."""
        return "ok"

    props = pick.parameters["properties"]
    assert isinstance(props, dict)
    assert props["slot"] == {"type": "integer", "minimum": 0, "maximum": 11}


def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    @tool
    def describe(schema: str, model_config: int = 0, title: str = "") -> str:
        """Names a BaseModel would reserve."""
        return f"{schema}/{model_config}/{title}"

    props = describe.parameters["properties"]
    assert isinstance(props, dict)
    assert list(props) == ["schema", "model_config", "title"]
    assert props["title"] == {"type": "string", "default": ""}
    assert describe.validate({"schema": "s", "model_config": "2"}) == {
        "schema": "s",
        "model_config": 2,
        "title": "",
    }


def test_no_parameters_gives_an_empty_object_schema() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(*items: int) -> str: ...", "parameter 'items' is variadic positional"),
        ("def f(**options: int) -> str: ...", "parameter 'options' is variadic keyword"),
        ("def f(a: int, /) -> str: ...", "parameter 'a' is positional-only"),
    ],
)
def test_unsupported_parameters_are_refused(source: str, message: str) -> None:
    namespace: dict[str, object] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match=message):
        tool(namespace["f"])  # type: ignore[arg-type]


def test_unresolvable_type_hint_is_refused() -> None:
    def f(x: MissingType) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(ToolDefinitionError, match="cannot resolve a type hint"):
        tool(f)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "has space"}, "expected a name of 1-64 letters"),
        ({"name": "x" * 65}, "expected a name of 1-64 letters"),
        ({"domain": ""}, "expected a domain of 1-64 letters"),
        ({"effect": "delete"}, "expected effect 'read' or 'write', got 'delete'"),
        ({"timeout": 0}, "expected a positive timeout, got 0"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    def f() -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=message):
        tool(**options)(f)  # type: ignore[call-overload]


def test_parse_docstring_handles_missing_and_other_sections() -> None:
    assert parse_docstring(None).description == ""
    doc = parse_docstring("Summary.\n\nRaises:\n    ValueError: never.\n")
    assert doc.description == "Summary."
    assert doc.params == {}


def test_hints_naming_classes_local_to_the_enclosing_function_resolve() -> None:
    class Window(BaseModel):
        start: int
        end: int

    @tool(name="plan_window")
    def plan(window: Window) -> str:
        """Plan inside a window."""
        return "ok"

    @tool
    def plan_bare(window: Window) -> str:
        """Plan inside a window."""
        return "ok"

    for item in (plan, plan_bare):
        defs = item.parameters["$defs"]
        assert isinstance(defs, dict)
        assert list(defs) == ["Window"]
        assert item.validate({"window": {"start": "1", "end": 2}}) == {"window": {"start": 1, "end": 2}}
