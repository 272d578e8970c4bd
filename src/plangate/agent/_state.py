"""The durable state of an agent run: its settings (kept in the run's input) and its versioned snapshot.

For: what must survive a restart, as identifiers and small values only: the model's spec string, the tool
names, the toolset's active packs, the phase, the plan, the current step, the budget used, the stall
tracker, the open interaction and an in-flight write. The snapshot is rewritten every round, so it holds
nothing that grows with the run: the conversation and the ReAct record live in the event log and are folded
back on load (``_transcript.py``), receipts live in the store's receipts table. Not for: deciding anything
(the phase modules) or building prompts (``_context.py``).

Format version 1 is frozen by a JSON fixture in the tests; a snapshot of a newer version is refused with
``SchemaVersionError``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from plangate.agent.result import Outcome
from plangate.decisions import PlanStep
from plangate.errors import SchemaVersionError, StoreError
from plangate.events import JsonObject
from plangate.store import Snapshot
from plangate.tools import ToolsetState

SNAPSHOT_VERSION = 1
"""Format of the agent snapshot (and of the ``agent`` settings in the run's input)."""

Mode = Literal["auto", "plan", "react"]
"""``auto`` routes first; ``plan`` always plans; ``react`` acts step by step without a plan."""

Phase = Literal["route", "plan", "plan_consent", "execute", "deliver", "done"]

WaitPurpose = Literal["consent", "question", "plan", "outcome_unknown"]

WaitKind = Literal["ask_user", "confirm", "plan_consent"]
"""The interaction kinds an agent run opens."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentConfig(_Frozen):
    """The settings a run was started with; a resumed run keeps them, whatever the resuming agent says.

    Attributes:
        model: the model's spec string (``Model.name``), to rebuild it with ``resolve_model``.
        tools: the names of the registry's tools when the run started.
    """

    model: str
    tools: list[str]
    mode: Mode
    max_rounds: int = Field(ge=1)
    always_execute: bool
    plan_consent: bool
    system_prompt: str | None = None


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

    def to_snapshot(self) -> JsonObject:
        """The JSON form written to the store (defaults included, so the format is explicit)."""
        data: JsonObject = self.model_dump(mode="json")
        return data

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


def run_input(prompt: str, config: AgentConfig, tool_specs: Sequence[str] = ()) -> JsonObject:
    """What the run's ``input`` column holds: the prompt and the settings, written once.

    ``tools`` keeps the specs the tools were loaded from, when a caller gave them (the command line reads
    them back to find the tools again); the runtime rebuilds tools from its registry by name only.
    """
    data: JsonObject = {"prompt": prompt, "agent": config.model_dump(mode="json"), "format": SNAPSHOT_VERSION}
    if tool_specs:
        data["tools"] = list(tool_specs)
    return data


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
    "SNAPSHOT_VERSION",
    "AgentConfig",
    "AgentState",
    "InflightWrite",
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
