"""The one error a model output can raise while being decoded: ``DecisionParseError``.

What it is for: naming the field that is wrong and why, in words that can be sent back to the model
verbatim as a correction. What it is not for: runtime validation of a round (flow, evidence, safety), which
is recorded in a ``RoundValidation`` and never raised.
"""

from __future__ import annotations

from plangate.errors import ModelBehaviorError


class DecisionParseError(ModelBehaviorError):
    """A model output (decision, route or plan) that cannot be decoded, after every tolerant rule.

    The message reads ``<field>: <reason>`` (``tool_call: expected an object, got a string``) and is meant
    to be sent back to the model unchanged.

    Attributes:
        field: the path of the offending field (``tool_call.arguments``, ``plan_steps[1].content``), or the
            name of the whole output (``decision``, ``route``, ``plan``) when the text itself is unusable.
        reason: what was expected and what was found, without the field.
        position: for text that is not valid JSON, the 0-based offset of the problem in the decoded text.
    """

    def __init__(self, field: str, reason: str, *, position: int | None = None) -> None:
        self.field = field
        self.reason = reason
        self.position = position
        super().__init__(f"{field}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # The default exception pickling replays ``args`` (the message) and would lose the fields; this keeps
        # the error intact across a process boundary (multiprocessing, concurrent.futures).
        return (_rebuild, (self.field, self.reason, self.position))


def _rebuild(field: str, reason: str, position: int | None) -> DecisionParseError:
    return DecisionParseError(field, reason, position=position)


__all__ = ["DecisionParseError"]
