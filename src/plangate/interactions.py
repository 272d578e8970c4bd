"""What a person can say to an open interaction: approve, reject, answer, or approve with edited arguments.

For: the resolution vocabulary shared by the formula executor, the agent runtime, the CLI and the server.
Not for: storing interactions (``plangate.store``) or deciding what a resolution does (the engines).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from plangate.errors import InteractionError


def _positional(name: str, value: object, data: dict[str, Any]) -> dict[str, Any]:
    """The keyword form of a resolution built with its one field given positionally."""
    if value is None:
        return data
    if name in data:
        raise TypeError(f"{name!r} given twice: positionally and as a keyword")
    return {**data, name: value}


class _Resolution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Approve(_Resolution):
    """Go ahead: run exactly the stored call, or pass the gate."""

    kind: Literal["approve"] = "approve"


class Reject(_Resolution):
    """Do not go ahead; ``reason`` is told to the model (or recorded on the step).

    ``Reject("not this week")`` and ``Reject(reason="not this week")`` are the same.
    """

    kind: Literal["reject"] = "reject"
    reason: str = ""

    def __init__(self, reason: str | None = None, /, **data: Any) -> None:
        super().__init__(**_positional("reason", reason, data))


class Answer(_Resolution):
    """The reply to a question (``ask_user`` or a human input step): ``Answer("Tuesday")``."""

    kind: Literal["answer"] = "answer"
    text: str

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        super().__init__(**_positional("text", text, data))


class Edit(_Resolution):
    """Approve with changed arguments; they are validated against the tool's schema before anything runs:
    ``Edit({"slot": 4})``."""

    kind: Literal["edit"] = "edit"
    arguments: dict[str, JsonValue]

    def __init__(self, arguments: dict[str, JsonValue] | None = None, /, **data: Any) -> None:
        super().__init__(**_positional("arguments", arguments, data))


Resolution = Annotated[Approve | Reject | Answer | Edit, Field(discriminator="kind")]
"""One of :class:`Approve`, :class:`Reject`, :class:`Answer`, :class:`Edit`."""

RESOLUTION_ADAPTER: TypeAdapter[Resolution] = TypeAdapter(Resolution)


def parse_resolution(value: Mapping[str, object]) -> Resolution:
    """Build a resolution from its dict form (``{"kind": "reject", "reason": "..."}``).

    Raises:
        InteractionError: the value is not a valid resolution; the message names the field.
    """
    try:
        return RESOLUTION_ADAPTER.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "resolution"
        raise InteractionError(f"invalid resolution: {where}: {first['msg']}") from None


def resolution_dict(resolution: Resolution) -> dict[str, JsonValue]:
    """The JSON form stored with the interaction and sent on the wire."""
    data: dict[str, JsonValue] = resolution.model_dump(mode="json")
    return data


__all__ = [
    "RESOLUTION_ADAPTER",
    "Answer",
    "Approve",
    "Edit",
    "Reject",
    "Resolution",
    "parse_resolution",
    "resolution_dict",
]
