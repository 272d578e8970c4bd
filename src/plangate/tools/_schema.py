"""Derive a tool's parameter model and JSON Schema from a typed Python function and its docstring.

Used by the ``@tool`` decorator only. It reads signatures and google-style docstrings; it does not validate
calls (``_validation.py``) or run anything.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model

from plangate.tools.context import RunContext
from plangate.tools.errors import ToolDefinitionError

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters"}
_DATA_KEYWORDS = frozenset({"default", "enum", "const", "examples"})
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True, slots=True)
class Docstring:
    """A google-style docstring split into the parts a tool needs.

    Attributes:
        description: the text before the first section (summary and body).
        params: parameter name → its description from the ``Args:`` section.
    """

    description: str
    params: dict[str, str]


def parse_docstring(text: str | None) -> Docstring:
    """Split a google-style docstring into its description and ``Args:`` entries.

    Continuation lines of an argument (indented deeper than the argument's name) are joined to it with one
    space. Sections other than ``Args:`` are dropped.
    """
    if not text:
        return Docstring("", {})
    lines = inspect.cleandoc(text).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARG_SECTIONS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line.strip())
        if entry and (current is None or indent <= entry_indent):
            current, entry_indent = entry.group("name"), indent
            params[current] = entry.group("text").strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return Docstring(_join_paragraphs(description), params)


def _join_paragraphs(lines: list[str]) -> str:
    """Unwrap each paragraph onto one line (docstrings wrap for the source width, prompts need not)."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(paragraph) for paragraph in paragraphs if paragraph)


@dataclass(frozen=True, slots=True)
class DerivedSchema:
    """What the decorator learns from a function.

    Attributes:
        model: a pydantic model whose fields are the parameters (aliased to their real names).
        fields: parameter name → the model's field name, to read validated values back.
        parameters: the JSON Schema of the arguments object.
        description: the docstring's description.
        context: the first parameter, when it asks for a ``RunContext`` (filled by the runtime, left out of
            the schema), else None.
    """

    model: type[BaseModel]
    fields: dict[str, str]
    parameters: dict[str, JsonValue]
    description: str
    context: str | None = None


def derive_schema(
    function: Callable[..., Any], tool_name: str, local_names: Mapping[str, Any] | None = None
) -> DerivedSchema:
    """Build the parameter model and JSON Schema of ``function``.

    Args:
        function: the tool's function.
        tool_name: the tool's name, for messages and the model's name.
        local_names: the namespace the function was defined in, so that hints naming a class defined or
            imported inside an enclosing function still resolve (annotations are strings under PEP 563).

    Raises:
        ToolDefinitionError: a parameter is positional-only, variadic, or its type cannot be resolved.
    """
    doc = parse_docstring(inspect.getdoc(function))
    try:
        hints = typing.get_type_hints(function, localns=dict(local_names or {}), include_extras=True)
    except NameError as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot resolve a type hint: {exc}") from exc
    definitions: dict[str, Any] = {}
    fields: dict[str, str] = {}
    context: str | None = None
    for index, (name, param) in enumerate(inspect.signature(function).parameters.items()):
        if _is_context(hints.get(name)):
            if index != 0:
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: parameter {name!r} is a RunContext; expected it first or nowhere"
                )
            context = name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {name!r} is {param.kind.description}; "
                "expected only named parameters, which a model can pass as JSON object keys"
            )
        # Field names are synthetic and the real name is the alias: a parameter called ``schema``, ``json``
        # or ``model_id`` would otherwise clash with BaseModel's own attributes or namespaces.
        field_name = f"p{index}"
        fields[name] = field_name
        annotation = hints.get(name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        definitions[field_name] = (
            annotation,
            Field(default, alias=name, description=doc.params.get(name)),
        )
    model = create_model(
        f"{_camel(tool_name)}Arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **definitions,
    )
    schema = _clean(model.model_json_schema(by_alias=True))
    schema.pop("description", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return DerivedSchema(
        model=model, fields=fields, parameters=schema, description=doc.description, context=context
    )


def _is_context(hint: object) -> bool:
    """Whether a parameter's type hint is ``RunContext`` or ``RunContext[...]``."""
    return hint is RunContext or typing.get_origin(hint) is RunContext


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", name) if part) or "Tool"


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated ``title`` keywords, which only add noise to a prompt.

    Walks schemas, not data: a property that is itself named ``title`` is kept.
    """
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _DATA_KEYWORDS:
            cleaned[key] = value
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            cleaned[key] = {
                name: _clean(sub) if isinstance(sub, dict) else sub for name, sub in value.items()
            }
        elif isinstance(value, dict):
            cleaned[key] = _clean(value)
        elif isinstance(value, list):
            cleaned[key] = [_clean(item) if isinstance(item, dict) else item for item in value]
        else:
            cleaned[key] = value
    return cleaned


__all__ = ["DerivedSchema", "Docstring", "derive_schema", "parse_docstring"]
