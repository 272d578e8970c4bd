"""What a tool call produced: :class:`ToolResult`, and how a function's return value becomes one.

This module only shapes results; running tools, validating arguments and deciding consent live in
``registry.py`` and ``tool.py``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, field_validator, model_validator
from pydantic_core import PydanticSerializationError, to_jsonable_python

from plangate._json import Encoder
from plangate._models import built

SUMMARY_LIMIT = 48
"""The longest summary, in characters; longer ones are clipped with an ellipsis."""

#: compact JSON, as ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))`` writes it (one encoder
#: for every call: ``dumps`` with options builds a new one each time)
_COMPACT = Encoder(separators=(",", ":"))

ToolStatus = Literal["done", "failed", "blocked"]

OUTCOME_UNKNOWN = "outcome_unknown"
"""The error code of a call that was cut off after it was sent (its server died, or it ran out of time):
for a write, it may or may not have happened, so the runtime never records it as a plain failure nor runs
it again blindly; it asks a person."""


def clip_summary(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """Collapse whitespace in ``text`` and clip it to ``limit`` characters, ending with ``…`` when clipped."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


class ToolResult(BaseModel):
    """The outcome of one tool call, as the runtime records it and the model sees it.

    ``status`` is ``done`` when the tool ran and succeeded, ``failed`` when it ran (or tried to) and failed,
    ``blocked`` when it was not run at all (unknown or inactive tool, invalid arguments, a refused query).
    ``success`` is true exactly when ``status`` is ``done``; it may be omitted and is then derived.

    Attributes:
        status: ``done``, ``failed`` or ``blocked``.
        success: whether the call achieved what it was asked to do.
        observation: the text the model sees next round.
        summary: one short line for timelines and receipts (at most 48 characters).
        error_code: a stable code for failures (``tool_error``, ``invalid_arguments``, ...).
        error_message: a human-readable description of the failure.
        data: an optional JSON value for programs (the rows of a query, the created object).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ToolStatus
    success: bool = False  # replaced by the status-derived value when omitted
    observation: str
    summary: str = ""
    error_code: str | None = None
    error_message: str | None = None
    data: JsonValue = None

    @model_validator(mode="before")
    @classmethod
    def _derive_success(cls, value: Any) -> Any:
        if isinstance(value, dict) and "success" not in value and "status" in value:
            return {**value, "success": value["status"] == "done"}
        return value

    @field_validator("summary")
    @classmethod
    def _clip(cls, value: str) -> str:
        return clip_summary(value)

    @model_validator(mode="after")
    def _consistent(self) -> ToolResult:
        if self.success != (self.status == "done"):
            raise ValueError(
                f"success must be {self.status == 'done'} when status is {self.status!r}, got {self.success}"
            )
        return self

    @classmethod
    def done(cls, observation: str, *, summary: str | None = None, data: JsonValue = None) -> ToolResult:
        """A successful result; the summary defaults to one readable line of the observation (its first
        non-empty line, or for JSON its top-level keys and values: ``url: file:///…, channel: stable``)."""
        return cls(
            status="done",
            success=True,
            observation=observation,
            summary=summary if summary is not None else summarize(observation),
            data=data,
        )

    @classmethod
    def failed(
        cls, code: str, message: str, *, observation: str | None = None, data: JsonValue = None
    ) -> ToolResult:
        """A result for a call that ran, or tried to, and failed."""
        return cls(
            status="failed",
            success=False,
            observation=observation if observation is not None else f"error ({code}): {message}",
            summary=message,
            error_code=code,
            error_message=message,
            data=data,
        )

    @classmethod
    def unknown(cls, message: str, *, observation: str | None = None) -> ToolResult:
        """A result for a write that was cut off after it was sent: it may or may not have happened."""
        return cls.failed(
            OUTCOME_UNKNOWN,
            message,
            observation=observation
            if observation is not None
            else f"outcome unknown: {message}; the change may or may not have happened",
        )

    @property
    def outcome_unknown(self) -> bool:
        """Whether the call was cut off after it was sent, so its effect is unknown (``unknown``)."""
        return self.error_code == OUTCOME_UNKNOWN

    @classmethod
    def blocked(cls, code: str, message: str, *, observation: str | None = None) -> ToolResult:
        """A result for a call that was not run at all."""
        return cls(
            status="blocked",
            success=False,
            observation=observation if observation is not None else f"not run ({code}): {message}",
            summary=message,
            error_code=code,
            error_message=message,
        )


def summarize(observation: str) -> str:
    """One readable line for an observation: a JSON object as ``key: value, ...``, a JSON list as its
    count and first items, any other text as its first non-empty line (never a lone ``{``)."""
    text = observation.strip()
    if text[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        summary = _json_summary(value)
        if summary is not None:
            return summary
    for line in text.splitlines():
        if line.strip():
            return line
    return ""


def _json_summary(value: object) -> str | None:
    """``summarize``'s line for a JSON object or list already parsed; None for any other value."""
    if isinstance(value, dict):
        return clip_summary(", ".join(f"{key}: {_flat(item)}" for key, item in value.items()) or "{}")
    if isinstance(value, list):
        items = ", ".join(_flat(item) for item in value[:SUMMARY_LIMIT])
        noun = "item" if len(value) == 1 else "items"
        return clip_summary(f"{len(value)} {noun}" + (f": {items}" if items else ""))
    return None


def _flat(value: object) -> str:
    # a value inside a summary: strings bare, anything else as compact JSON
    if isinstance(value, str):
        return value
    # the commonest atoms spelt as JSON spells them, without a call to the encoder
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    return _COMPACT.encode(value)


def result_from_value(value: object) -> ToolResult:
    """Turn what a tool function returned into a :class:`ToolResult`.

    A ``ToolResult`` is kept as is; a string becomes the observation; ``None`` becomes ``done``; any other
    value that serialises to JSON (pydantic models, dataclasses, dates included) becomes the observation as
    JSON text and the result's ``data``. A value that cannot be serialised is a ``failed`` result.
    """
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        text = value if type(value) is str else str(value)
        return _done(text, clip_summary(summarize(text)), None)
    if value is None:
        return ToolResult.done("done")
    try:
        data = to_jsonable_python(value)
        text = _COMPACT.encode(data)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        message = f"the tool returned a {type(value).__name__}, which is not JSON: {exc}"
        return ToolResult.failed("invalid_result", message)
    # the summary of the text just written is the summary of ``data``: no need to parse the text back
    # (unless a key is not a string: the text spells it as one, so the text is what is summarised)
    plain = not isinstance(data, dict) or all(isinstance(key, str) for key in data)
    summary = _json_summary(data) if plain else None
    return _done(text, summary if summary is not None else clip_summary(summarize(text)), data)


def _done(observation: str, summary: str, data: JsonValue) -> ToolResult:
    """``ToolResult.done(observation, summary=summary, data=data)`` for values that are what it would
    validate them to (``data`` made JSON-able by pydantic, ``summary`` clipped), on the path of every call."""
    values = {"status": "done", "success": True, "observation": observation, "summary": summary, "data": data}
    return built(ToolResult, values)


__all__ = [
    "OUTCOME_UNKNOWN",
    "SUMMARY_LIMIT",
    "ToolResult",
    "ToolStatus",
    "clip_summary",
    "result_from_value",
    "summarize",
]
