"""The durable state of an agent run: its settings (kept in the run's input) and its versioned snapshot.

For: what must survive a restart, as identifiers and small values only: the model's spec string, the tool
names, the toolset's active packs, the phase, the plan, the current step, the budget used, the stall
tracker, the open interaction, an in-flight write and the context's memory (the summary of what compaction
folded out of the prompt, capped in size). The snapshot is rewritten every round, so it holds nothing that
grows with the run: the conversation and the ReAct record live in the event log and are folded back on load
(``_transcript.py``), receipts live in the store's receipts table. Not for: deciding anything
(the phase modules) or building prompts (``_context.py``).

Format version 1 is frozen by a JSON fixture in the tests; a snapshot of a newer version is refused with
``SchemaVersionError``. Fields added to version 1 since (``memory``, ``usage``; ``context_budget``,
``context_reserve``, ``done_when`` and ``budget`` in the settings) are left out of the JSON form while they
hold their defaults, so a run that never used them is stored exactly as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plangate.agent._intent import Inferred
from plangate.agent._output import output_instruction
from plangate.agent.result import Outcome
from plangate.decisions import PlanStep
from plangate.errors import SchemaVersionError, StoreError
from plangate.events import JsonObject
from plangate.runs import tools as tool_identities
from plangate.runs.usage import Budget, RunUsage
from plangate.store import EncodedObject, Snapshot
from plangate.tools import ToolsetState

SNAPSHOT_VERSION = 1
"""Format of the agent snapshot (and of the ``agent`` settings in the run's input)."""

Mode = Literal["auto", "plan", "react"]
"""``auto`` routes first; ``plan`` always plans; ``react`` acts step by step without a plan."""

Phase = Literal["route", "plan", "plan_consent", "execute", "deliver", "done"]

WaitPurpose = Literal["consent", "question", "plan", "outcome_unknown"]

WaitKind = Literal["ask_user", "confirm", "plan_consent"]
"""The interaction kinds an agent run opens."""

CONTEXT_BUDGET = 80_000
"""Tokens a prompt may use by default (SPEC §4)."""

CONTEXT_RESERVE = 8_000
"""Tokens of the budget kept free by default, for the answer and for estimates that run short."""

MIN_CONTEXT = 1_000
"""The fewest tokens ``context_budget - context_reserve`` may leave: below it not even the rules, the tool
catalogue and the pinned blocks fit."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentConfig(_Frozen):
    """The settings a run was started with; a resumed run keeps them, whatever the resuming agent says.

    Attributes:
        model: the model's spec string (``Model.name``), to rebuild it with ``resolve_model``.
        tools: the names of the registry's tools when the run started.
        done_when: the run's goal as a condition over its receipts, which the runtime checks after each one
            (``receipts.any(tool == 'place' and success)``), or None: the model declares ``done``.
        output_schema: the JSON schema of the answer of ``done`` (``Agent(output_type=...)``), or None.
        inferred: ``question`` or ``action`` when ``done_when`` is the goal the runtime inferred from the
            request (``_intent.py``), not one the caller gave.
        inferred_tools: the tools that rule found fitting the request (a small model's worked example
            shows the first).
    """

    model: str
    tools: list[str]
    mode: Mode
    max_rounds: int = Field(ge=1)
    always_execute: bool
    plan_consent: bool
    system_prompt: str | None = None
    context_budget: int = Field(
        default=CONTEXT_BUDGET, ge=MIN_CONTEXT, exclude_if=lambda value: value == CONTEXT_BUDGET
    )
    context_reserve: int = Field(
        default=CONTEXT_RESERVE, ge=0, exclude_if=lambda value: value == CONTEXT_RESERVE
    )
    done_when: str | None = Field(default=None, exclude_if=lambda value: value is None)
    output_schema: JsonObject | None = Field(default=None, exclude_if=lambda value: value is None)
    inferred: Inferred | None = Field(default=None, exclude_if=lambda value: value is None)
    inferred_tools: list[str] = Field(default_factory=list, exclude_if=lambda value: not value)
    budget: Budget | None = Field(default=None, exclude_if=lambda value: value is None)
    """The run's ``max_tokens`` / ``max_cost`` and the prices of its model, when it has a budget or a
    price (left out otherwise)."""

    @property
    def instructions(self) -> str | None:
        """What every system message adds to its rules: the caller's ``system_prompt`` and, for a typed
        output, the schema the answer of ``done`` must fit."""
        if self.output_schema is None:
            return self.system_prompt
        line = output_instruction(self.output_schema)
        return line if not self.system_prompt else f"{self.system_prompt}\n\n{line}"

    @model_validator(mode="after")
    def _leaves_room(self) -> AgentConfig:
        if self.context_limit < MIN_CONTEXT:
            raise ValueError(
                f"context_reserve {self.context_reserve} leaves {self.context_limit} tokens of the "
                f"context_budget {self.context_budget}; expected at least {MIN_CONTEXT}"
            )
        return self

    @property
    def context_limit(self) -> int:
        """The most tokens a prompt may use: the budget less the reserve."""
        return self.context_budget - self.context_reserve


class Memory(_Frozen):
    """What compaction folded out of the prompt: a cumulative summary, and how far it reaches.

    The counts index the transcript folded from the event log (``_transcript.py``), which a resumed run
    rebuilds exactly, so the snapshot never copies a record.

    Attributes:
        summary: the model's summary of every folded record (cumulative), or "" when no summary was written.
        turns: conversation turns folded, counted after the user's request (which is never folded).
        acts: ReAct records folded, oldest first.
        dropped: folded records that reached no summary because the compact call failed (truncated).
    """

    summary: str = ""
    turns: int = Field(default=0, ge=0)
    acts: int = Field(default=0, ge=0)
    dropped: int = Field(default=0, ge=0)


class Waiting(_Frozen):
    """The interaction the run is suspended on, and what its resolution applies to.

    Attributes:
        purpose: ``consent`` (a write tool call), ``question`` (``ask_user``), ``plan`` (plan consent) or
            ``outcome_unknown`` (a write that may or may not have happened; ``write_key`` names it).
        step_index: the plan step current when it opened; receipts of the resolution are bound to it.
        tool, arguments, digest: the exact call a consent request is about.
    """

    interaction_id: str
    kind: WaitKind
    purpose: WaitPurpose
    step_index: int = Field(ge=0)
    tool: str | None = None
    arguments: JsonObject | None = None
    digest: str | None = None
    write_key: str | None = None


class InflightWrite(_Frozen):
    """A write whose intent is committed and whose receipt is not: on resume it is reconciled, never re-run
    blindly."""

    key: str
    tool: str
    arguments: JsonObject
    digest: str
    step_index: int = Field(ge=0)


class Stall(_Frozen):
    """The last tool call and how many rounds in a row it was made with nothing new learned.

    Attributes:
        call: the tool's name and the digest of its arguments.
        observation: a digest of what the last of those calls returned.
        count: consecutive rounds with this call and this observation.
        warned: the model was already corrected for this stall; the next repeat aborts the run.
    """

    call: str
    observation: str
    count: int
    warned: bool = False


class AgentState(BaseModel):
    """The moving parts of a run, as the snapshot stores them (version 1).

    Attributes:
        phase: the node that runs next.
        plan: the accepted (or proposed, during plan consent) plan, else None.
        step_index: the current plan step (0 without a plan).
        rounds_used: planning and execute calls made against ``max_rounds``.
        corrections: consecutive corrections; three end the run.
        toolset: the active packs.
        waiting: the open interaction, while the run is suspended.
        inflight: a write between its intent and its receipt.
        outcome: how the run ended (set when it enters ``deliver``).
        answer: the closing message, once delivered (or a route's direct reply).
        memory: what compaction folded out of the prompt, once the prompt first outgrew its budget.
        repeats: the failed writes (``tool:digest``) the model was told not to repeat; asking for one again
            ends the run ``stalled``.
        model_calls: the model calls the run made (all purposes), up to its last commit: where a model
            that replays a script per run goes on when the run is resumed in another process.
        usage: the tokens of the run's model calls, per model; each call's are added when it ends and
            stored with the commit that follows it (left out before the first call reports usage).
    """

    model_config = ConfigDict(extra="forbid")

    phase: Phase
    plan: list[PlanStep] | None = None
    step_index: int = 0
    rounds_used: int = 0
    corrections: int = 0
    stall: Stall | None = None
    toolset: ToolsetState = Field(default_factory=ToolsetState)
    waiting: Waiting | None = None
    inflight: InflightWrite | None = None
    outcome: Outcome | None = None
    answer: str | None = None
    memory: Memory | None = Field(default=None, exclude_if=lambda value: value is None)
    repeats: list[str] = Field(default_factory=list, exclude_if=lambda value: not value)
    model_calls: int = Field(default=0, ge=0, exclude_if=lambda value: value == 0)
    usage: RunUsage | None = Field(default=None, exclude_if=lambda value: value is None)

    def to_snapshot(self) -> JsonObject:
        """The JSON form written to the store (defaults included, so the format is explicit)."""
        data: JsonObject = self.model_dump(mode="json")
        return data

    def encoded(self) -> EncodedObject:
        """``to_snapshot`` as the store writes it, encoded by pydantic at once (every commit writes it)."""
        return EncodedObject.of_model(self, "the agent's state")

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> AgentState:
        """Read a stored snapshot.

        Raises:
            SchemaVersionError: it was written in a newer format than this plangate reads.
            StoreError: it is not an agent snapshot of a known format.
        """
        state = snapshot.checked_state(SNAPSHOT_VERSION)
        try:
            return cls.model_validate(state)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "state"
            raise StoreError(
                f"the snapshot of run {snapshot.run_id!r} is not an agent snapshot of format "
                f"v{snapshot.version}: {where}: {first['msg']}"
            ) from None


def run_input(
    prompt: str, config: AgentConfig, tool_specs: Sequence[str] = (), identities: JsonObject | None = None
) -> JsonObject:
    """What the run's ``input`` column holds: the prompt and the settings, written once.

    ``tools`` keeps the specs the tools were loaded from, when a caller gave them (the command line reads
    them back to find the tools again); the runtime rebuilds tools from its registry by name only, and
    advances the run only with tools whose identities (``identities``, ``plangate.runs.tools``) match.
    """
    data: JsonObject = {"prompt": prompt, "agent": config.model_dump(mode="json"), "format": SNAPSHOT_VERSION}
    if tool_specs:
        data["tools"] = list(tool_specs)
    if identities:
        data[TOOL_IDENTITY] = identities
    return data


TOOL_IDENTITY = tool_identities.INPUT_KEY


def read_input(run_id: str, data: Mapping[str, object]) -> tuple[str, AgentConfig]:
    """The prompt and settings of a stored agent run.

    Raises:
        SchemaVersionError: the run was started by a newer plangate.
        StoreError: the input is not an agent run's.
    """
    version = data.get("format", SNAPSHOT_VERSION)
    if isinstance(version, int) and version > SNAPSHOT_VERSION:
        raise SchemaVersionError(
            f"agent run {run_id!r} has settings of format version {version}; this plangate reads up to "
            f"version {SNAPSHOT_VERSION}: upgrade plangate to resume this run"
        )
    prompt = data.get("prompt")
    try:
        config = AgentConfig.model_validate(data.get("agent"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "agent"
        raise StoreError(f"run {run_id!r}: input.agent.{where}: {first['msg']}") from None
    if not isinstance(prompt, str):
        raise StoreError(f"run {run_id!r}: input.prompt: expected a string, found {type(prompt).__name__}")
    return prompt, config


def short_digest(text: str) -> str:
    """A short, stable digest of ``text`` (stall detection compares observations with it)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


__all__ = [
    "CONTEXT_BUDGET",
    "CONTEXT_RESERVE",
    "MIN_CONTEXT",
    "SNAPSHOT_VERSION",
    "AgentConfig",
    "AgentState",
    "InflightWrite",
    "Memory",
    "Mode",
    "Phase",
    "Stall",
    "WaitKind",
    "WaitPurpose",
    "Waiting",
    "read_input",
    "run_input",
    "short_digest",
]
