"""The event types of a run's log: one pydantic model per ``type`` tag, joined in the ``Event`` union.

For: what engines say happened (a status, a text delta, a tool call, a step's new state, an outcome) and
what the store keeps and the server streams. Not for: storing or sending them (``plangate.store`` assigns
``run_id``, ``seq`` and ``at`` at commit; ``plangate.events.wire`` encodes and decodes).

Engines build events with the plain constructor and leave ``run_id``, ``seq`` and ``at`` at their defaults
(``""``, ``0``, ``0.0``); the store returns copies with them filled in. The plain constructor is also the
cheapest way to build one: ``model_construct`` is slower in pydantic 2 for models this small.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from plangate.vocab import InteractionKind as InteractionKind
from plangate.vocab import OutcomeStatus as OutcomeStatus
from plangate.vocab import ResolutionKind as ResolutionKind
from plangate.vocab import StepStatus as StepStatus

JsonObject = dict[str, JsonValue]
"""A JSON object: what tool arguments, decisions and step outputs are made of."""

ToolStatus = Literal["done", "failed", "blocked"]


class BaseEvent(BaseModel):
    """Fields every stored event carries; the store fills them in when the event is committed.

    Attributes:
        run_id: the run the event belongs to.
        seq: its position in the run's log, gapless from 1.
        at: when it was stored, in seconds since the Unix epoch (UTC by definition).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = ""
    seq: int = 0
    at: float = 0.0


class PlanEventStep(BaseModel):
    """One step of an agent's plan as a ``plan`` event records it: what to do and how to tell it is done.

    The record of what the model declared (``plangate.decisions.PlanStep``), kept as loose as the log's
    oldest events: ``done_when`` is always there ("" when the model gave none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    done_when: str


class InteractionTool(BaseModel):
    """The exact tool call a consent request is about; consent is bound to its arguments' digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: JsonObject
    arguments_digest: str


class StatusEvent(BaseEvent):
    """A stage change or a progress note meant for people (``stage`` is machine-readable)."""

    type: Literal["status"] = "status"
    stage: str
    code: str
    text: str = ""


class SpeakEvent(BaseEvent):
    """A delta of the text shown to the user."""

    type: Literal["speak"] = "speak"
    text: str


class ThinkingEvent(BaseEvent):
    """A delta of the model's reasoning, when the provider exposes it."""

    type: Literal["thinking"] = "thinking"
    text: str


class PlanEvent(BaseEvent):
    """An agent's plan, as accepted (or as proposed, before plan consent)."""

    type: Literal["plan"] = "plan"
    steps: list[PlanEventStep]


class StepStartedEvent(BaseEvent):
    """An agent's plan step became current."""

    type: Literal["step_started"] = "step_started"
    step_index: int
    content: str


class ProofReceipt(BaseModel):
    """The receipt that made a ``done_when`` condition hold.

    Attributes:
        number: its place among the run's receipts, from 1 (as a condition's reason names it: ``#3``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int
    tool: str
    source: str
    step_index: int
    success: bool
    summary: str


class Proof(BaseModel):
    """Why the runtime, not the model, declared a plan step complete: its ``done_when`` condition held after
    a receipt, which is the proof."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    condition: str
    reason: str
    receipt: ProofReceipt


class StepAdvancedEvent(BaseEvent):
    """An agent moved from one plan step to the next, with the reason the old one is done."""

    type: Literal["step_advanced"] = "step_advanced"
    from_index: int
    to_index: int
    goal_check: str
    proof: Proof | None = Field(default=None, exclude_if=lambda value: value is None)
    """Set when the step's ``done_when`` condition held (the runtime advanced, no model claimed it); left out
    of the JSON form otherwise, so events written before the field existed keep their exact form."""


class ToolCallEvent(BaseEvent):
    """A tool is about to run with these arguments."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    tool: str
    arguments: JsonObject
    step_id: str | None = None


class ToolResultEvent(BaseEvent):
    """What a tool call returned; ``call_id`` matches its ``tool_call``."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    status: ToolStatus
    success: bool
    summary: str
    observation: JsonValue = None
    error_code: str | None = None
    error_message: str | None = None
    step_id: str | None = None


class InteractionOpenedEvent(BaseEvent):
    """The run asked a person something (a question or a consent request) and is waiting."""

    type: Literal["interaction_opened"] = "interaction_opened"
    interaction_id: str
    kind: InteractionKind
    prompt: str
    tool: InteractionTool | None = None
    step_id: str | None = None


class InteractionResolvedEvent(BaseEvent):
    """A person answered an interaction; ``by`` names them when known."""

    type: Literal["interaction_resolved"] = "interaction_resolved"
    interaction_id: str
    kind: InteractionKind
    resolution: ResolutionKind
    by: str | None = None


class CorrectionEvent(BaseEvent):
    """A round failed validation and the model is told why (hidden from the conversation)."""

    type: Literal["correction"] = "correction"
    code: str
    message: str


class TokenUsage(BaseModel):
    """What the provider counted for one model call.

    Attributes:
        input_tokens: prompt tokens, cached ones included.
        output_tokens: generated tokens.
        cached_input_tokens: prompt tokens the provider read from its prefix cache instead of processing
            them again (None: it reported no such count).
        cache_write_tokens: prompt tokens written to the cache for later calls (Anthropic), or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None


class RoundEvent(BaseEvent):
    """One execute round: the decision the model declared, how the runtime judged it, and what it did."""

    type: Literal["round"] = "round"
    round: int
    step_index: int | None
    decision: JsonObject
    validation: JsonObject
    result: JsonObject | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the round did (the action taken, the tool, its arguments, success and summary); left out of the
    JSON form when absent, so events written before the field existed keep their exact form."""
    usage: TokenUsage | None = Field(default=None, exclude_if=lambda value: value is None)
    """The tokens of the round's model call as its provider counted them (cached ones too), when it did;
    left out of the JSON form otherwise."""
    raw: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the model returned for the round, as text (what ``plangate replay`` plays back); left out of the
    JSON form when absent (rounds recorded before it was kept)."""


class OutcomeEvent(BaseEvent):
    """How a run ended; the last event of a finished run."""

    type: Literal["outcome"] = "outcome"
    status: OutcomeStatus
    stage: str
    code: str
    user_message: str
    internal_reason: str = ""
    usage: JsonObject | None = Field(default=None, exclude_if=lambda value: value is None)
    """The run's model usage (tokens per model, the cost with a price table), when it called a model; left
    out of the JSON form otherwise, so outcomes written before the field existed keep their exact form."""


class OpEvent(BaseEvent):
    """One operation a copilot applied while building a formula (``op`` names it: ``plan``, ``look``,
    ``add_step``, ``update_step``, ``remove_step``, ``done``, ``reply``, ``ask``, ``final``)."""

    type: Literal["op"] = "op"
    op: JsonObject
    attempt: int | None = Field(default=None, exclude_if=lambda value: value is None)
    """Which attempt of the turn built it (1, then 2 for a retry); left out when absent, so events written
    before the field existed keep their exact form."""


class ReviewEvent(BaseEvent):
    """The review of a copilot attempt: its signals, their worst severity and the verdict drawn from them."""

    type: Literal["review"] = "review"
    signals: list[JsonObject]
    verdict: str
    severity: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """``ok``, ``degraded`` or ``broken``: the worst of the signals (left out when absent)."""
    attempt: int | None = Field(default=None, exclude_if=lambda value: value is None)
    """Which attempt of the turn it reviews (left out when absent)."""


class HeartbeatEvent(BaseEvent):
    """Nothing happened, and the run is still alive."""

    type: Literal["heartbeat"] = "heartbeat"


class StepStateEvent(BaseEvent):
    """A formula step entered a new state; ``attempt`` counts retries from 1 (0 before the first run)."""

    type: Literal["step_state"] = "step_state"
    step_id: str
    status: StepStatus
    reason: str = ""
    attempt: int = 0
    output: JsonObject | None = None
    wait: JsonObject | None = None
    """What a ``waiting`` step waits for (``kind``: gate, timer, human, manual, ...) and its details."""
    raw: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the model returned for the attempt of an ``llm`` step that ends here, as text (what ``plangate
    replay`` plays back); left out of the JSON form when absent (every other step, and attempts recorded
    before it was kept)."""
    usage: JsonObject | None = Field(default=None, exclude_if=lambda value: value is None)
    """The model usage of the work that ended in this state (an ``llm`` step's call: tokens per model, its
    cost with a price table), committed with it so that a resumed run counts it once; left out when none."""


class GateEvent(BaseEvent):
    """A formula step's gate was evaluated."""

    type: Literal["gate"] = "gate"
    step_id: str
    satisfied: bool
    reason: str


Event = Annotated[
    StatusEvent
    | SpeakEvent
    | ThinkingEvent
    | PlanEvent
    | StepStartedEvent
    | StepAdvancedEvent
    | ToolCallEvent
    | ToolResultEvent
    | InteractionOpenedEvent
    | InteractionResolvedEvent
    | CorrectionEvent
    | RoundEvent
    | OutcomeEvent
    | OpEvent
    | ReviewEvent
    | HeartbeatEvent
    | StepStateEvent
    | GateEvent,
    Field(discriminator="type"),
]
"""Any event of a run's log, told apart by its ``type``."""

EVENT_TYPES: dict[str, type[BaseEvent]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}
"""Each ``type`` tag and the class that carries it."""
