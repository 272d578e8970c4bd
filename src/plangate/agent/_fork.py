"""Forking an agent run: a new run whose history is its origin's up to a round, continued from there.

For: ``create_fork`` (the new run, stored ``queued`` with its origin and fork point in its input),
``materialize`` (its carried history, copied in ONE transaction: the origin's events before the round, the
receipts committed before it, a snapshot rebuilt at that point), and what a fork needs when it is loaded (the
origin chain's resolutions; the edited decision its first round replays instead of calling the model).

The promises (SPEC §1 of issue 25): a write completed before the fork point is history (its receipt is
carried, its intent is not, and nothing runs it again); a write at or after the fork point is a new call of
the new run, asked for again (approvals are interactions of the run they were given in, never copied), and
``always_execute`` is not inherited: a fork runs without asking only when its request says so. Receipts
carried prove their plan steps and count for ``done_when``.

A fork is created in two commits (the run, then its history); a process killed between them leaves a fork
with no events, which the next load materializes (``materialize`` is idempotent): the origin is only read.
Not for: advancing the fork (the ordinary loop does, once loaded).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from plangate.agent._state import SNAPSHOT_VERSION, AgentState, read_input
from plangate.decisions import PlanStep
from plangate.errors import ConfigError, InteractionError, StoreError
from plangate.events import (
    Event,
    JsonObject,
    PlanEvent,
    RoundEvent,
    StatusEvent,
    StepAdvancedEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.models import Model
from plangate.models.base import ModelChunk, ModelRequest, ModelWrapper, TextDelta, Usage
from plangate.runs.contract import Transactions
from plangate.store import TERMINAL_STATUSES, RunRecord, Store
from plangate.tools import ToolRegistry, Toolset
from plangate.tools.toolset import ADD_TOOL, REMOVE_TOOL

FORK_KEY = "forked_from"
"""Where a fork's input names its origin: ``{"run_id", "round", "seq", "instruction"?, "decision"?}``."""

_MAX_CHAIN = 100


@dataclass(frozen=True, slots=True)
class ForkRequest:
    """What a fork is asked for.

    Attributes:
        at_round: the round to fork before (from 1): the fork's history is everything before it.
        at_event: an event's ``seq``: the fork starts at the round that holds it (a fork always starts at a
            round's beginning; an event before the first round forks at round 1).
        instruction: words of the person appended to the conversation before the round runs.
        model: another model's spec for the fork (default: the origin's).
        arguments: new arguments for the tool call the origin made in that round: the fork's round replays
            the origin's decision with them (no model call), and a write asks for consent again.
        always_execute: run writes without asking in the fork (recorded in its settings; never inherited).
    """

    at_round: int | None = None
    at_event: int | None = None
    instruction: str | None = None
    model: str | None = None
    arguments: JsonObject | None = None
    always_execute: bool = False


def origin_of(data: Mapping[str, object]) -> JsonObject | None:
    """The ``forked_from`` record of a run's input, or None for a run that is not a fork."""
    found = data.get(FORK_KEY)
    return found if isinstance(found, dict) else None


def create_fork(
    store: Store, origin_id: str, request: ForkRequest, *, owner: str, model_name: str | None
) -> str:
    """Store the fork (``queued``, its history not copied yet) and return its id.

    Args:
        model_name: the name of the model the fork runs on when ``request.model`` is None (the origin's).

    Raises:
        NotFoundError: no such run of ``owner``.
        InteractionError: it is not an agent run, or the point is not one of its rounds, or there is no
            tool call to edit there.
        ConfigError: a request value is invalid.
    """
    origin = store.get_run(origin_id, owner=owner)
    if origin.kind != "agent":
        raise InteractionError(f"run {origin_id!r} is a {origin.kind} run; only agent runs are forked")
    _, config = read_input(origin.id, origin.input)
    events = store.events(origin.id)
    rounds = _rounds(events)
    number = _point(origin.id, rounds, request, last_seq=events[-1].seq if events else 0)
    cut = rounds[number]
    start = _commit_start(events, cut)
    decision = None if request.arguments is None else _edited(origin.id, cut, request.arguments)
    settings = config.model_copy(
        update={
            "model": request.model or model_name or config.model,
            "always_execute": request.always_execute,
        }
    )
    record: JsonObject = {"run_id": origin.id, "round": number, "seq": start}
    if request.instruction is not None:
        if not request.instruction.strip():
            raise ConfigError("fork instruction: expected some words, or no instruction; found an empty one")
        record["instruction"] = request.instruction
    if decision is not None:
        record["decision"] = decision
    data: JsonObject = {**origin.input, "agent": settings.model_dump(mode="json"), FORK_KEY: record}
    name = f"fork of {origin.name} at round {number}"[:80]
    run = store.create_run("agent", name, data, owner=origin.owner, origin_run_id=origin.id)
    read_input(run.id, run.input)
    return run.id


def _commit_start(events: list[Event], cut: RoundEvent) -> int:
    """The seq where the round's commit starts: its ``round`` event may follow the model's reasoning and a
    compaction made for it (committed with it), which belong to the round, not to the history before it."""
    index = next(i for i, event in enumerate(events) if event.seq == cut.seq)
    while index > 0 and _leads_a_round(events[index - 1]):
        index -= 1
    return events[index].seq


def _leads_a_round(event: Event) -> bool:
    if isinstance(event, ThinkingEvent):
        return True
    return isinstance(event, StatusEvent) and event.code == "context_compacted"


def _rounds(events: list[Event]) -> dict[int, RoundEvent]:
    return {event.round: event for event in events if isinstance(event, RoundEvent)}


def _point(run_id: str, rounds: Mapping[int, RoundEvent], request: ForkRequest, *, last_seq: int) -> int:
    if (request.at_round is None) == (request.at_event is None):
        raise ConfigError(
            "fork: give the point as a round (at_round; --at) or as an event (at_event; --at-event), "
            "one of them"
        )
    if not rounds:
        raise InteractionError(f"run {run_id!r} has no rounds yet: there is no point to fork it from")
    known = sorted(rounds)
    if request.at_round is not None:
        if request.at_round not in rounds:
            raise InteractionError(
                f"run {run_id!r} has no round {request.at_round}; its rounds are {known[0]} to {known[-1]}"
            )
        return request.at_round
    seq = request.at_event or 0
    if seq > last_seq:
        raise InteractionError(f"run {run_id!r} has no event {seq}; its events are 1 to {last_seq}")
    holding = [number for number in known if rounds[number].seq <= seq]
    return holding[-1] if holding else known[0]


def _edited(run_id: str, cut: RoundEvent, arguments: JsonObject) -> JsonObject:
    call = cut.decision.get("tool_call")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise InteractionError(
            f"round {cut.round} of run {run_id!r} called no tool: there are no arguments to edit there"
        )
    return {**cut.decision, "tool_call": {"name": call["name"], "arguments": dict(arguments)}}


def materialize(
    store: Store, run: RunRecord, registry: ToolRegistry, transaction: Transactions | None = None
) -> bool:
    """Copy the fork's history into it, in one transaction, unless it has some already; True if it did.

    Raises:
        StoreError: the origin no longer holds the history the fork names.
    """
    record = origin_of(run.input)
    if record is None or run.last_seq > 0 or run.status in TERMINAL_STATUSES:
        return False
    origin_id, cut = str(record["run_id"]), int(str(record["seq"]))
    number = int(str(record["round"]))
    events = store.events(origin_id, limit=cut - 1)
    if len(events) != cut - 1:
        raise StoreError(f"fork {run.id!r}: its origin {origin_id!r} has fewer than {cut - 1} events")
    state = _state_at(events, number, registry)
    # A commit records its receipts before its events, and after the events of the commits before it: the
    # receipts committed before the round are those recorded no later than the last event carried.
    last = events[-1].at if events else 0.0
    carried = [receipt for receipt in store.receipts(origin_id) if receipt.at <= last]
    opened = transaction if transaction is not None else store.transaction
    with opened(run.id) as tx:
        if tx.run.last_seq > 0:
            return False  # another process materialized it first
        tx.extend(event.model_copy(update={"run_id": ""}) for event in events)
        text = f"forked from run {origin_id} before round {number}"
        tx.append(StatusEvent(stage="execute", code="forked", text=text))
        instruction = record.get("instruction")
        if isinstance(instruction, str):
            tx.append(StatusEvent(stage="execute", code="instruction", text=instruction))
        for receipt in carried:
            tx.add_receipt(
                step_index=receipt.step_index,
                source=receipt.source,
                name=receipt.name,
                arguments_digest=receipt.arguments_digest,
                success=receipt.success,
                summary=receipt.summary,
                output=receipt.output,
            )
        tx.set_snapshot(state.encoded(), version=SNAPSHOT_VERSION)
        tx.set_status("queued")
    return True


def _state_at(events: list[Event], number: int, registry: ToolRegistry) -> AgentState:
    """The run's state just before round ``number`` starts, from the events before it."""
    plan: list[PlanStep] | None = None
    step_index = 0
    toolset = Toolset(registry)
    calls: dict[str, ToolCallEvent] = {}
    for event in events:
        if isinstance(event, PlanEvent):
            plan = [PlanStep(content=step.content, done_when=step.done_when or None) for step in event.steps]
        elif isinstance(event, RoundEvent) and event.step_index is not None:
            step_index = event.step_index
        elif isinstance(event, ToolCallEvent) and event.tool in (ADD_TOOL, REMOVE_TOOL):
            calls[event.call_id] = event
        elif isinstance(event, ToolResultEvent) and event.success and event.call_id in calls:
            _replay_meta(toolset, calls.pop(event.call_id))
        elif isinstance(event, StepAdvancedEvent):
            step_index = event.to_index
    return AgentState(
        phase="execute",
        plan=plan,
        step_index=step_index,
        rounds_used=number - 1,
        toolset=toolset.state(),
    )


def _replay_meta(toolset: Toolset, call: ToolCallEvent) -> None:
    domain = call.arguments.get("domain")
    packs = call.arguments.get("packs")
    if not isinstance(domain, str):
        return
    names = [str(pack) for pack in packs] if isinstance(packs, list) else None
    try:
        if call.tool == ADD_TOOL:
            toolset.activate(domain, names)
        else:
            toolset.deactivate(domain, names)
    except ConfigError:
        return


def resolutions_of_origins(store: Store, data: Mapping[str, object]) -> dict[str, JsonObject]:
    """The resolutions of the interactions a fork's carried events name: its origins', up the chain."""
    found: dict[str, JsonObject] = {}
    record = origin_of(data)
    for _ in range(_MAX_CHAIN):
        if record is None:
            break
        origin = str(record["run_id"])
        for item in store.list_interactions(run_id=origin):
            if item.resolution is not None:
                found.setdefault(item.id, item.resolution)
        record = origin_of(store.get_run(origin).input)
    return found


def first_round_model(
    data: Mapping[str, object], state: AgentState, build: Callable[[], Model]
) -> Callable[[], Model]:
    """The model a fork's loop calls: the run's own, except that the fork's first round replays the edited
    decision its request gave (once that round is committed, the run's model alone)."""
    record = origin_of(data)
    decision = None if record is None else record.get("decision")
    if not isinstance(decision, dict) or record is None:
        return build
    if state.phase != "execute" or state.rounds_used != int(str(record["round"])) - 1:
        return build
    return lambda: Prefilled(build(), decision)


class Prefilled(ModelWrapper):
    """A model whose next ``execute`` call returns a decision given in advance (a fork's edited tool call),
    and which is its inner model for every other call."""

    def __init__(self, inner: Model, decision: Mapping[str, JsonValue]) -> None:
        self.inner = inner
        self._decision: Mapping[str, JsonValue] | None = decision
        self.compact_prompts = getattr(inner, "compact_prompts", False)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The decision given in advance on the first ``execute`` call; otherwise the inner model's stream."""
        decision = self._decision
        if decision is None or request.purpose != "execute":
            async for chunk in self.inner.stream(request):
                yield chunk
            return
        self._decision = None
        text = json.dumps(dict(decision), ensure_ascii=False)
        yield TextDelta(text if request.wire == "json" else f"<decision>{text}</decision>")
        yield Usage(input_tokens=0, output_tokens=0)


def check_request(values: Mapping[str, object]) -> ForkRequest:
    """A ``ForkRequest`` from loose values (the command line's, an HTTP body's).

    Raises:
        ConfigError: a value of the wrong type, named.
    """
    try:
        return _Checked.model_validate(values).request()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "fork"
        raise ConfigError(f"fork: {where}: {first['msg']}") from None


class _Checked(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    at_round: int | None = None
    at_event: int | None = None
    instruction: str | None = None
    model: str | None = None
    arguments: JsonObject | None = None
    always_execute: bool = False

    def request(self) -> ForkRequest:
        return ForkRequest(
            at_round=self.at_round,
            at_event=self.at_event,
            instruction=self.instruction,
            model=self.model,
            arguments=self.arguments,
            always_execute=self.always_execute,
        )


__all__ = [
    "FORK_KEY",
    "ForkRequest",
    "Prefilled",
    "check_request",
    "create_fork",
    "first_round_model",
    "materialize",
    "origin_of",
    "resolutions_of_origins",
]
