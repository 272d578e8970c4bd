"""The decision protocol's data: what a model declares in one execute round, and what the runtime records.

What it is for: the pydantic models of SPEC §3 (``Decision`` and its intents, ``RoundValidation``) and the
protocol-level rules that make a decision well-formed, enforced whenever a
``Decision`` is built. What it is not for: reading model text (``decode``, ``tagged``) or judging a round
against the run's state (flow, evidence and safety belong to the agent runtime; this module only holds the
record of that judgement).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from plangate._json import Encoder

#: the canonical JSON of arguments (one encoder for every digest: ``json.dumps`` makes one per call)
_CANONICAL = Encoder(sort_keys=True, separators=(",", ":"))

Action = Literal["continue", "ask_user", "confirm", "next_plan", "done", "abort"]
"""What the model wants to happen this round."""

ACTIONS: tuple[Action, ...] = get_args(Action)


class ToolCallIntent(BaseModel):
    """A tool call the model intends; nothing has run yet.

    Attributes:
        name: the tool's registered name.
        arguments: the arguments as the model wrote them (validated later against the tool's schema).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, pattern=r"\S", description="The name of the tool to call.")
    arguments: dict[str, JsonValue] = Field(
        default_factory=dict, description="The tool's arguments, an object matching its parameters."
    )


class AbortIntent(BaseModel):
    """The model's request to stop the run.

    Attributes:
        code: a short machine-readable reason (``out_of_scope``); ``None`` lets the runtime choose one.
        user_message: what the person is told; never empty.
        internal_reason: for logs only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str | None = Field(default=None, description="A short machine-readable reason, snake_case.")
    user_message: str = Field(min_length=1, pattern=r"\S", description="What the user is told. Required.")
    internal_reason: str | None = Field(default=None, description="Why, for the logs only.")


def protocol_violation(action: Action, *, has_tool_call: bool, has_abort: bool) -> tuple[str, str] | None:
    """Check the protocol-level pairing of an action with its intents (SPEC §3).

    Args:
        action: the declared action.
        has_tool_call: whether a tool call is present.
        has_abort: whether an abort intent is present.

    Returns:
        ``(field, reason)`` for the first rule broken, or ``None`` when the pairing is allowed.
    """
    needs_tool = action == "confirm"
    allows_tool = action in ("continue", "confirm")
    needs_abort = action == "abort"
    if needs_tool and not has_tool_call:
        return "tool_call", f"required when action is '{action}'"
    if has_tool_call and not allows_tool:
        return "tool_call", f"not allowed when action is '{action}'"
    if needs_abort and not has_abort:
        return "abort", f"required when action is '{action}' (with a non-empty user_message)"
    if has_abort and not needs_abort:
        return "abort", f"not allowed when action is '{action}'"
    return None


class Decision(BaseModel):
    """The one structured decision a model declares in an execute round.

    A ``Decision`` is always protocol-valid: building one that pairs an action with the wrong intents raises
    a pydantic ``ValidationError``. Model text goes through ``parse_decision_json`` or the tagged parser,
    which raise ``DecisionParseError`` instead.

    Attributes:
        action: what should happen this round.
        speak: text shown to the user this round.
        reason: a short explanation for the logs.
        goal_check: why the current plan step is complete (needed for ``next_plan``/``done`` under a plan).
        tool_call: the intended tool call (``continue`` may carry one, ``confirm`` must).
        abort: the abort intent (``abort`` only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Action = Field(description="What should happen this round.")
    speak: str | None = Field(default=None, description="Text shown to the user this round.")
    reason: str | None = Field(default=None, description="A short explanation for the logs.")
    goal_check: str | None = Field(
        default=None, description="Why the current plan step is complete: its done_when and the evidence."
    )
    tool_call: ToolCallIntent | None = Field(
        default=None, description="The tool to call: allowed with continue, required with confirm."
    )
    abort: AbortIntent | None = Field(default=None, description="Required with abort, and only then.")

    @model_validator(mode="after")
    def _pairing(self) -> Decision:
        broken = protocol_violation(
            self.action, has_tool_call=self.tool_call is not None, has_abort=self.abort is not None
        )
        if broken is not None:
            field, reason = broken
            raise ValueError(f"{field}: {reason}")
        return self


class RoundValidation(BaseModel):
    """The runtime's verdict on one round, recorded for every round whether it passed or not.

    Attributes:
        flow_passed: the action fits the run's state (a current step exists, the tool is active, ...).
        flow_reason: why flow failed, or a note on what was adjusted; ``""`` when nothing to say.
        evidence_passed: a step claimed complete has a goal check and a successful receipt.
        evidence_reason: why evidence failed.
        safety_passed: budget left, no stall, no pending interaction.
        safety_reason: why safety failed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    flow_passed: bool = True
    flow_reason: str = ""
    evidence_passed: bool = True
    evidence_reason: str = ""
    safety_passed: bool = True
    safety_reason: str = ""

    @property
    def passed(self) -> bool:
        """Whether all three checks passed."""
        return self.flow_passed and self.evidence_passed and self.safety_passed

    @property
    def failure(self) -> str | None:
        """The reason of the first failed check (flow, then evidence, then safety), or ``None``."""
        for ok, reason in (
            (self.flow_passed, self.flow_reason),
            (self.evidence_passed, self.evidence_reason),
            (self.safety_passed, self.safety_reason),
        ):
            if not ok:
                return reason
        return None


def digest_arguments(arguments: Mapping[str, object]) -> str:
    """A stable digest of tool arguments, for receipts, consent and stall detection.

    Equal arguments give equal digests whatever their key order: the digest is the SHA-256 of the canonical
    JSON (sorted keys, no insignificant whitespace, UTF-8).

    Args:
        arguments: JSON-compatible tool arguments.

    Returns:
        ``sha256:<hex>``.
    """
    canonical = _CANONICAL.encode(arguments)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


__all__ = [
    "ACTIONS",
    "AbortIntent",
    "Action",
    "Decision",
    "RoundValidation",
    "ToolCallIntent",
    "digest_arguments",
    "protocol_violation",
]
