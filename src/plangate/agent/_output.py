"""Typed outputs: the answer of a run's ``done`` decision, validated against the agent's ``output_type``.

For: ``OutputSpec``, built from the type an ``Agent`` was given (a pydantic model, or any type pydantic can
validate), which gives the JSON schema the prompts state and checks a ``done`` decision's answer against it.
An answer that does not fit is a correction the model reads (``invalid_output``, counted against the
correction limit, like any other); one that fits becomes the run's answer (as JSON) and the result's
``output`` (the typed object). A run resumed by an agent that was not given the type still checks that the
answer is JSON (the stored schema is what the prompts keep stating). Not for: the decision protocol
(``plangate.decisions``), which carries the answer in ``speak`` as it carries any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from plangate.errors import ConfigError
from plangate.events import JsonObject

INVALID_OUTPUT = "invalid_output"
"""The correction code of a ``done`` whose answer does not fit the output type."""

_ISSUES = 3


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What a run's final answer must be.

    Attributes:
        schema: its JSON schema (stored with the run's settings, stated in the prompts).
        adapter: validates it, when the agent advancing the run was given the type; None: JSON is enough.
    """

    schema: JsonObject
    adapter: TypeAdapter[Any] | None = None

    @classmethod
    def of(cls, output_type: object) -> OutputSpec:
        """The spec of ``output_type``.

        Raises:
            ConfigError: pydantic cannot build a JSON schema for it.
        """
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(cast("Any", output_type))
            schema = adapter.json_schema()
        except Exception as exc:  # pydantic raises several kinds for a type it cannot handle
            raise ConfigError(
                f"Agent output_type: expected a pydantic model or another type pydantic validates; "
                f"{output_type!r} cannot be: {exc}"
            ) from None
        return cls(json.loads(json.dumps(schema)), adapter)

    def check(self, answer: str) -> tuple[str | None, str]:
        """The answer as canonical JSON and "", or None and what is wrong with it (for the correction)."""
        found = _json_in(answer)
        if found is None:
            return None, (
                "done needs the answer in speak as JSON that fits the output schema; found no JSON value "
                f"in {answer[:80]!r}"
            )
        if self.adapter is None:
            return json.dumps(found, ensure_ascii=False), ""
        try:
            value = self.adapter.validate_python(found)
        except ValidationError as exc:
            issues = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'the answer'}: {error['msg']}"
                for error in exc.errors()[:_ISSUES]
            )
            return None, f"the answer in speak does not fit the output schema: {issues}"
        return self.adapter.dump_json(value).decode(), ""

    def value(self, answer: str) -> Any:
        """The typed object of an answer that ``check`` accepted."""
        return json.loads(answer) if self.adapter is None else self.adapter.validate_json(answer)


def _json_in(text: str) -> object | None:
    """The first JSON object or array in ``text`` (the whole text, or one inside fences or words)."""
    stripped = text.strip()
    try:
        found: object = json.loads(stripped)
    except ValueError:
        pass
    else:
        return found
    decoder = json.JSONDecoder()
    for index, char in enumerate(stripped):
        if char in "{[":
            try:
                found = decoder.raw_decode(stripped, index)[0]
            except ValueError:
                continue
            return found
    return None


def output_instruction(schema: JsonObject) -> str:
    """The line the prompts add for a typed output."""
    return (
        "When you declare done, speak must be only a JSON value that fits this schema (no other words): "
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


__all__ = ["INVALID_OUTPUT", "OutputSpec", "output_instruction"]
