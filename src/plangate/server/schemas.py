"""The request bodies the HTTP API accepts, and the JSON views of stored records it answers with.

For: strict request models (an unknown field is a 422 that names it) and the one place that turns a run,
an interaction or a token into JSON for clients. Not for: validation that needs the server's state (a
tool that must be registered, a formula that must pass check): the routes do that.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, JsonValue, model_validator

from plangate.interactions import Answer, Approve, Edit, Reject, Resolution
from plangate.runs.tools import INPUT_KEY as TOOL_IDENTITY
from plangate.server._public import public_outcome, public_text
from plangate.store import Interaction, RunRecord
from plangate.vocab import ResolutionKind

_FORMULA_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def _formula_name(value: str) -> str:
    # Never a path, nor a name the loader would take for one (``x.formula.toml``): a client must not make
    # the server read files of its choosing.
    if not _FORMULA_NAME.fullmatch(value) or value.endswith((".toml", ".json")):
        raise ValueError("expected a formula name such as 'release' (letters, digits, '_', '.', '-')")
    return value


FormulaName = Annotated[str, AfterValidator(_formula_name)]
"""The name of a formula on the server's search path."""


_MODEL_ALIAS = re.compile(r"[A-Za-z0-9_-]+")


def _model_spec(value: str) -> str:
    # A client names a model by provider and id, never by a file on the server's disk: a request must not make
    # the server open files of its choosing (what it read, and whether the file is there, would show in the
    # error). ``scripted:FILE`` is always a file, ``local:ID`` is one unless ``ID`` is an alias
    # (``local:smollm2``). A model from a file is the server's to set (``plangate serve --model``).
    provider, _, model_id = value.partition(":")
    provider, model_id = provider.strip().lower(), model_id.strip()
    names_a_file = provider == "scripted" or (provider == "local" and not _MODEL_ALIAS.fullmatch(model_id))
    if model_id and names_a_file:
        raise ValueError(
            f"a request cannot name a model file on the server ({provider}:…); name a hosted model "
            "('openai:gpt-4o-mini', 'anthropic:…') or 'local' for the packaged one, or leave it out for the "
            "server's own"
        )
    return value


ModelSpec = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_model_spec)]
"""A model a request names, ``provider:id``: no file on the server (``scripted:FILE``, ``local:FILE``)."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentRunRequest(_Request):
    """Start an agent run on the server's model and tools."""

    kind: Literal["agent"]
    prompt: Annotated[str, Field(min_length=1, max_length=100_000)]
    model: ModelSpec | None = None
    tools: Annotated[list[str], Field(max_length=500)] | None = None
    mode: Literal["auto", "plan", "react"] | None = None
    max_rounds: Annotated[int, Field(ge=1, le=10_000)] | None = None
    always_execute: bool = False
    plan_consent: bool = False
    done_when: Annotated[str, Field(min_length=1, max_length=10_000)] | None = None
    """The goal as a condition over the run's receipts (``Agent(done_when=...)``, ``--done-when``); the
    route checks it and answers a 422 naming the field and the column of what is wrong."""
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    """The input and output tokens the run's model calls may use (default: the server's ``[budget]``)."""
    max_cost: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """The most the run may cost by the server's ``[prices]`` (its model needs a price)."""


class FormulaRunRequest(_Request):
    """Start a formula run: a formula on the server's search path, with its vars."""

    kind: Literal["formula"]
    formula: FormulaName
    vars: dict[str, JsonValue] = Field(default_factory=dict)
    always_execute: bool = False
    """Write steps run without asking a person (recorded in the run's events), like ``plangate run --yes``."""
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    """The input and output tokens the run's model calls may use: its llm steps' and those of the agents
    and sub-formulas its steps start (default: the server's ``[budget]``)."""
    max_cost: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """The most the run may cost by the server's ``[prices]`` (the models its steps call need a price)."""


RunRequest = Annotated[AgentRunRequest | FormulaRunRequest, Field(discriminator="kind")]
"""The body of ``POST /v1/runs``."""


class CancelRequest(_Request):
    """Why a run is cancelled (optional)."""

    reason: Annotated[str, Field(max_length=2000)] = "cancelled through the API"


class ForkRunRequest(_Request):
    """Where to fork an agent run (``at_round``, or ``at_event``: the round holding that event) and what
    changes there: an instruction appended, another model, the round's tool call with other arguments, and
    whether the fork's writes run without asking (never inherited from the origin); or, for a formula run,
    the step to retry from (``from_step``) and, when its formula changed since, which to use
    (``formula_changed``)."""

    at_round: Annotated[int, Field(ge=1)] | None = None
    at_event: Annotated[int, Field(ge=1)] | None = None
    instruction: Annotated[str, Field(min_length=1, max_length=100_000)] | None = None
    model: ModelSpec | None = None
    arguments: dict[str, JsonValue] | None = None
    always_execute: bool | None = None
    from_step: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    formula_changed: Literal["use-new", "use-recorded"] | None = None


class ResolveRequest(_Request):
    """A person's answer to an open interaction: ``kind`` (approve, reject, answer, edit), the word the
    Python resolutions use (``Reject(reason=...).kind``)."""

    kind: ResolutionKind
    reason: Annotated[str, Field(max_length=10_000)] | None = None
    text: Annotated[str, Field(max_length=100_000)] | None = None
    arguments: dict[str, JsonValue] | None = None

    @model_validator(mode="after")
    def _fits_the_kind(self) -> ResolveRequest:
        needs = {"answer": "text", "edit": "arguments"}.get(self.kind)
        if needs is not None and getattr(self, needs) is None:
            raise ValueError(f"{self.kind!r} needs the field {needs!r}")
        allowed = {"approve": set(), "reject": {"reason"}, "answer": {"text"}, "edit": {"arguments"}}
        extra = sorted(
            name
            for name in ("reason", "text", "arguments")
            if getattr(self, name) is not None and name not in allowed[self.kind]
        )
        if extra:
            raise ValueError(f"{self.kind!r} takes no {', '.join(repr(name) for name in extra)}")
        return self

    def resolution(self) -> Resolution:
        """The resolution this request stands for."""
        if self.kind == "reject":
            return Reject(reason=self.reason or "")
        if self.kind == "answer":
            return Answer(text=self.text or "")
        if self.kind == "edit":
            return Edit(arguments=dict(self.arguments or {}))
        return Approve()


class CheckRequest(_Request):
    """Check a formula by name, or from its TOML text, with vars."""

    formula: FormulaName | None = None
    source: Annotated[str, Field(max_length=500_000)] | None = None
    vars: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_of(self) -> CheckRequest:
        if (self.formula is None) == (self.source is None):
            raise ValueError("expected exactly one of 'formula' (a name) and 'source' (TOML text)")
        return self


SourceName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""The name of a data source (letters, digits, '_', '-'; at most 64)."""


class AskRequest(_Request):
    """Ask a question about one of the owner's data sources; the turn runs on the server."""

    question: Annotated[str, Field(min_length=1, max_length=4000)]
    source: SourceName | None = None
    """A source from ``GET /v1/sources``; default: the bundled shop data (``shop``)."""
    conversation_id: Annotated[
        str | None,
        Field(
            max_length=64,
            validation_alias=AliasChoices("conversation_id", "conversation"),
            description="Continue this conversation (its earlier turns are the question's history).",
        ),
    ] = None
    model: ModelSpec | None = None
    """The copilot model's spec; default: the server's model."""
    double_texting: Literal["reject", "queue", "cancel"] | None = None
    """When a turn of the conversation still runs: ``reject`` (409), ``queue`` (this one runs after it),
    ``cancel`` (that one is cancelled, this one runs after); default: the server's ``[limits]
    double_texting``."""
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    """The input and output tokens the turn's model calls may use: its generation, review and formula runs
    (default: the server's ``[budget]``)."""
    max_cost: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """The most the turn may cost by the server's ``[prices]`` (its model needs a price)."""


class SourceRequest(_Request):
    """Register a data source: a SQLite file under the server's data directories, or a PostgreSQL URL."""

    data: Annotated[str, Field(min_length=1, max_length=2000)]
    """A file name (or path) under a data directory, ``sqlite:///…``, or ``postgresql://…``."""
    name: SourceName | None = None
    """The name to register it under; default: the file's stem or the database's name."""


_SERVER_INPUT = frozenset({"tools", TOOL_IDENTITY, "formula_digest", "plan"})


def run_view(run: RunRecord) -> dict[str, JsonValue]:
    """A run as clients see it (the worker lease, server-side tool paths and the outcome's internal reason
    left out)."""
    data = run.model_dump(mode="json", exclude={"lease_owner", "lease_expires_at"})
    data["outcome"] = public_outcome(run.outcome)
    input_ = data.get("input")
    if isinstance(input_, dict):
        # Where the tools came from (module paths on the server's disk, their identities), kept for
        # resuming, the digest of a formula run's plan and a retry's new plan (kept for retries): nothing a
        # client needs.
        data["input"] = shown = {key: value for key, value in input_.items() if key not in _SERVER_INPUT}
        agent = shown.get("agent")
        if isinstance(agent, dict) and isinstance(agent.get("model"), str):
            shown["agent"] = {**agent, "model": public_text(agent["model"])}  # a model file's path
    return data


def interaction_view(interaction: Interaction) -> dict[str, JsonValue]:
    """An interaction as clients see it."""
    data: dict[str, JsonValue] = interaction.model_dump(mode="json")
    return data


__all__ = [
    "AgentRunRequest",
    "AskRequest",
    "CancelRequest",
    "CheckRequest",
    "FormulaName",
    "FormulaRunRequest",
    "ResolveRequest",
    "RunRequest",
    "SourceName",
    "SourceRequest",
    "interaction_view",
    "run_view",
]
