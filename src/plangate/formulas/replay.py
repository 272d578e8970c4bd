"""Replaying a finished formula run offline: this process's runtime runs it again against its record.

For: ``replay_run`` (``replay`` without an event loop), which re-executes a finished root formula run — with
the runs under it: sub-formulas, fan-outs, agent steps' agents — in a store of its own (in memory), under the
same ids, and compares the two trees step by step (``plangate.runs.diff.diff_tree``). What a step gets is what
the record holds for that step and attempt (steps work at once, so it is looked up by the step whose work
calls, never by the order of calls): a tool step the result its tool returned, rebuilt from the step's
recorded state; a write step the receipt its call recorded, played back — the write is never called, and one
whose outcome was unknown is unknown again, settled by the person's recorded answer; an ``llm`` step the raw
text its model returned (``StepStateEvent.raw``; the step's output for runs recorded before it was kept); an
agent step's agent its recorded rounds and tool results (``plangate.agent.replay``). Every step's model is the
recorded one, whatever model its formula names; the people's answers are the record's own, question by
question. No network, no API key.

What now differs is reported where it first shows: a step whose state, attempt or output differs, a
condition that now decides otherwise (the step is skipped, held or failed where it was not), a round of an
agent that now decides otherwise, the outcome. Not for: changing the stored run (it is only read).

The replay starts from the plan the run started from: the stored one or, for a run whose ``until`` loop grew
its plan, the formula cooked again when its digest still matches. A retry starts as it did, from its origin
(copied into the replay's store) and the steps it carried. Time is not replayed: a step held by a timer
waits for it again, and a gate that reads files or the environment reads this machine's; a replay that
does not end within ``limit`` seconds is cut off and compared as far as it went.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import JsonValue

from plangate.agent._state import read_input
from plangate.agent.replay import record_of, require_tools, result_of, wire_of
from plangate.errors import ConfigError, FormulaError, InteractionError, NotFoundError
from plangate.events import Event, StatusEvent, StepStateEvent, ToolCallEvent, ToolResultEvent
from plangate.formulas._agent_steps import step_of_child
from plangate.formulas._scheduler import INTERRUPTED
from plangate.formulas._work import working_step
from plangate.formulas.plan import LlmExecutor, Plan, ToolExecutor
from plangate.formulas.retry import DIGEST_KEY, plan_digest, retry_of
from plangate.formulas.runtime import FormulaResult, FormulaRunner, FormulaSource
from plangate.interactions import parse_resolution
from plangate.models.base import ModelChunk, ModelRequest, TextDelta, Usage, Wire
from plangate.models.errors import ScriptExhaustedError
from plangate.runs import tools as tool_identities
from plangate.runs.contract import Replayed
from plangate.runs.diff import Log, diff_tree
from plangate.store import TERMINAL_STATUSES, RunKind, RunRecord, SQLiteStore, Store
from plangate.tools import Tool, ToolRegistry, ToolResult

DEFAULT_LIMIT = 300.0
"""Seconds a replay may take before it is cut off (a gate that now never opens, a long timer)."""

_MAX_PASSES = 1000
_TREE: tuple[tuple[RunKind, str], ...] = (("formula", "step"), ("agent", "round"))

T = TypeVar("T")

StepKey = tuple[str, str]
"""``(run id, step id)``."""
AttemptKey = tuple[str, str, int]
"""``(run id, step id, attempt)``: what ``working_step`` says while a step works."""
AnswerKey = tuple[str, str | None, str]
"""``(run id, step id, interaction kind)``: the questions a person answered, in the order they did."""


@dataclass
class Played:
    """What one step (or one attempt of it) is played back: its tools' results, in call order, by tool;
    its model's outputs, in call order, by purpose; the model's name and wire."""

    results: dict[str, list[ToolResult]] = field(default_factory=dict)
    outputs: dict[str, list[str]] = field(default_factory=dict)
    model: str = "recorded"
    wire: Wire = "json"


@dataclass
class Recording:
    """What a formula run's tree recorded, by what its replay asks for.

    Attributes:
        attempts: each tool, write and ``llm`` step's attempts that ended with a result.
        steps: each agent step's agents, every attempt's in turn (an adopted agent spans attempts).
        answers: the people's resolutions and who gave them, per question, in order.
        manual: the outputs manual steps were completed with.
        plans: each formula run's plan as it started.
        logs: each run of the tree and how it is aligned (``step`` or ``round``), the root first.
    """

    attempts: dict[AttemptKey, Played] = field(default_factory=dict)
    steps: dict[StepKey, Played] = field(default_factory=dict)
    answers: dict[AnswerKey, list[tuple[Mapping[str, object], str | None]]] = field(default_factory=dict)
    manual: dict[StepKey, dict[str, JsonValue]] = field(default_factory=dict)
    plans: dict[str, Plan] = field(default_factory=dict)
    logs: list[tuple[str, str]] = field(default_factory=list)

    def played(self) -> Played | None:
        """What the step working in this task is played back (None outside a step's work)."""
        here = working_step()
        if here is None:
            return None
        run_id, step_id, attempt = here
        return self.attempts.get((run_id, step_id, attempt)) or self.steps.get((run_id, step_id))

    def attempt(self, key: AttemptKey) -> Played:
        """What the attempt ``key`` is played back (made empty the first time)."""
        return self.attempts.setdefault(key, Played())


class StepModel:
    """The recorded model of every step: the outputs the step working in this task recorded, per purpose,
    in order (no network)."""

    def __init__(self, recording: Recording) -> None:
        self._recording = recording

    @property
    def name(self) -> str:
        """The recorded model of the step working now (its agent's, by name)."""
        played = self._recording.played()
        return played.model if played is not None else "recorded"

    @property
    def wire(self) -> Wire:
        """The wire the step's recorded outputs are written on."""
        played = self._recording.played()
        return played.wire if played is not None else "json"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The next output the working step recorded for the request's purpose."""
        played = self._recording.played()
        queue = played.outputs.get(request.purpose, []) if played is not None else []
        if not queue:
            raise ScriptExhaustedError(
                f"the recorded step made no more {request.purpose} calls: the replay asks for one it did not"
            )
        yield TextDelta(queue.pop(0))
        yield Usage(input_tokens=0, output_tokens=0)


def replay(
    runner: FormulaRunner, run_id: str, *, owner: str | None = None, limit: float = DEFAULT_LIMIT
) -> Replayed:
    """Replay the finished root formula run ``run_id`` (of ``owner``, when given) offline and compare it with
    its record (``replay_run``, for callers without an event loop).

    Raises:
        NotFoundError: no such run (of ``owner``).
        InteractionError: it is a sub-run, or it has not ended, or it cannot start again as it did.
        ConfigError: ``runner`` lacks one of its tools.
    """
    return asyncio.run(replay_run(runner, runner.store.get_run(run_id, owner=owner), limit=limit))


async def replay_run(runner: FormulaRunner, run: RunRecord, *, limit: float = DEFAULT_LIMIT) -> Replayed:
    """Replay the finished root formula run ``run`` offline with ``runner``'s tools, formulas, root and
    environment, and compare it with its record.

    Raises:
        InteractionError: it is a sub-run, or it has not ended, or the plan it started from cannot be
            rebuilt, or it is a retry whose origin is gone.
        ConfigError: this process lacks one of its tools.
    """
    if run.parent_run_id is not None:
        raise InteractionError(f"run {run.id!r} is a sub-run; replay its root run {runner.root_of(run.id)!r}")
    if run.status not in TERMINAL_STATUSES:
        raise InteractionError(f"run {run.id!r} is {run.status}: only a run that ended is replayed")
    recording = record(runner, run)
    sandbox = SQLiteStore(":memory:")
    replayer = _Replayer(sandbox, runner, recording)
    status = "cut off"
    try:
        try:
            async with asyncio.timeout(limit):
                status = await replayer.run(run)
        except TimeoutError:
            status = f"cut off after {limit:g} s"
        logs = [
            Log(_place(run.id, run_id), unit, runner.store.events(run_id), _events(sandbox, run_id))
            for run_id, unit in [*recording.logs, *_new_runs(sandbox, run.id, recording)]
        ]
        return Replayed(run.id, run.id, status, diff_tree(run.id, f"{run.id} (replay)", logs))
    finally:
        sandbox.close()


class _Replayer(FormulaRunner):
    """A runner over the replay's store whose tools and model play the record back, and whose formula runs
    start from the plans the record's runs started from."""

    def __init__(self, sandbox: Store, runner: FormulaRunner, recording: Recording) -> None:
        names = {name for plan in recording.plans.values() for name in plan.tool_names()}
        super().__init__(
            sandbox,
            played_tools(runner.tools, sorted(names), recording),
            search_paths=runner.search_paths,
            concurrency=runner.concurrency,
            root=runner.root,
            env=runner.env,
            poll_interval=runner.poll_interval,
            model=StepModel(recording),
        )
        self.origin_store = runner.store
        self.recording = recording

    async def start(
        self,
        formula: FormulaSource,
        vars: Mapping[str, object] | None = None,
        *,
        owner: str = "local",
        parent_run_id: str | None = None,
        always_execute: bool = False,
        run_id: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> FormulaResult:
        """Start a run from the plan its recorded run started from (a sub-run's too), else as asked."""
        recorded = self.recording.plans.get(run_id) if run_id is not None else None
        return await super().start(
            recorded if recorded is not None else formula,
            vars,
            owner=owner,
            parent_run_id=parent_run_id,
            always_execute=always_execute,
            run_id=run_id,
            max_tokens=max_tokens,
            max_cost=max_cost,
        )

    async def run(self, run: RunRecord) -> str:
        """Run the replay to its end, answering what the record answered; returns how it ended."""
        origin = retry_of(run.input)
        if origin is None:
            always = run.input.get("always_execute") is True
            result = await self.start(
                self.recording.plans[run.id], owner=run.owner, always_execute=always, run_id=run.id
            )
        else:
            self._copy_origin(str(origin["run_id"]))
            plan = self.recording.plans[run.id]
            named = [self.tools.get(name) for name in plan.tool_names() if name in self.tools]
            data = {**run.input, tool_identities.INPUT_KEY: tool_identities.identities(named)}
            self.store.create_run(
                "formula", run.name, data, owner=run.owner, run_id=run.id, origin_run_id=str(origin["run_id"])
            )
            result = await self.resume(run.id)  # its first commit: the retry's own, from its origin
        for _ in range(_MAX_PASSES):
            if result.status != "waiting" or not await self._answer_what_was_answered():
                break
            result = await self.resume(run.id)
        return result.status

    def _copy_origin(self, origin_id: str) -> None:
        """The retry's origin as the record holds it (events, snapshot, open write intents), under its id."""
        store = self.origin_store
        try:
            origin = store.get_run(origin_id)
        except NotFoundError:
            raise InteractionError(
                f"the run is a retry of {origin_id!r}, which is not in the store any more: the retry cannot "
                "start again as it did"
            ) from None
        snapshot = store.get_snapshot(origin.id)
        self.store.create_run(origin.kind, origin.name, origin.input, owner=origin.owner, run_id=origin.id)
        with self.store.transaction(origin.id) as tx:
            tx.extend(event.model_copy(update={"run_id": ""}) for event in store.events(origin.id))
            for intent in store.pending_write_intents(origin.id):
                tx.record_write_intent(intent.key, intent.tool, intent.arguments_digest)
            if snapshot is not None:
                tx.set_snapshot(snapshot.state, version=snapshot.version)
            tx.set_status(origin.status)

    async def _answer_what_was_answered(self) -> bool:
        """Give each open question the record's answer to it, and complete the manual steps the record's
        people completed; False when nothing here was answered (the replay asks what the record did not)."""
        moved = False
        for interaction in self.store.list_interactions(status="open"):
            key = (interaction.run_id, interaction.step_id, interaction.kind)
            queue = self.recording.answers.get(key)
            if not queue:
                continue
            given, by = queue.pop(0)
            await self.answer(interaction.id, parse_resolution(given), by=by)
            moved = True
        for (run_id, step_id), output in list(self.recording.manual.items()):
            if self._waits_manually(run_id, step_id):
                self.complete_step(run_id, step_id, output)
                del self.recording.manual[(run_id, step_id)]
                moved = True
        return moved

    def _waits_manually(self, run_id: str, step_id: str) -> bool:
        try:
            step = self.load(run_id).steps.get(step_id)
        except NotFoundError:  # not in the replay (yet)
            return False
        return step is not None and step.status == "waiting" and step.wait.get("kind") == "manual"


# -- what the record holds -----------------------------------------------------------------------------------


def record(runner: FormulaRunner, root: RunRecord) -> Recording:
    """What ``root``'s tree recorded, read from ``runner``'s store."""
    store = runner.store
    recording = Recording()
    pending = [root]
    while pending:
        run = pending.pop(0)
        recording.logs.append((run.id, "step"))
        try:
            state = runner.load(run.id)
        except NotFoundError:
            continue  # created, never started: nothing of it to play back
        recording.plans[run.id] = _start_plan(runner, run, state.plan)
        events = store.events(run.id)
        _read_steps(recording, store, run.id, state.plan, events)
        _read_answers(recording, store, run.id)
        pending.extend(_children(store, run.id, "formula"))
        for agent in _children(store, run.id, "agent"):
            step = step_of_child(run.id, agent.id)
            if step is not None:
                recording.logs.append((agent.id, "round"))
                _read_agent(recording, store, (run.id, step), agent)
    return recording


def _start_plan(runner: FormulaRunner, run: RunRecord, stored: Plan) -> Plan:
    """The plan the run started from, with every step's model left to the recorded one."""
    plan = stored
    if stored.loops:  # an until loop grows the stored plan: the formula, cooked again, gives the first
        try:
            vars_ = run.input.get("vars")
            plan = runner.plan(str(run.input.get("formula")), vars_ if isinstance(vars_, dict) else {})
        except (FormulaError, ConfigError) as exc:
            raise InteractionError(
                f"run {run.id!r}: an until loop grew its plan while it ran, and its formula cannot be cooked "
                f"here to rebuild the plan it started from ({exc})"
            ) from None
        if plan_digest(plan) != run.input.get(DIGEST_KEY):
            raise InteractionError(
                f"run {run.id!r}: an until loop grew its plan while it ran, and its formula "
                f"{run.input.get('formula')!r} changed since: the plan it started from cannot be rebuilt"
            )
    data = plan.to_dict()
    _unpin_models(data)
    return Plan.from_dict(data)


def _unpin_models(node: JsonValue) -> None:
    """Leave every ``llm`` and agent step of a stored plan (loop bodies and expansions too) to the runner's
    model: the recorded one."""
    if isinstance(node, list):
        for item in node:
            _unpin_models(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") in ("llm", "agent") and "model" in node:
        node["model"] = None
    for key in ("llm", "agent"):
        inner = node.get(key)
        if isinstance(inner, dict) and "model" in inner:
            inner["model"] = None
    for value in node.values():
        _unpin_models(value)


def _children(store: Store, run_id: str, kind: RunKind) -> list[RunRecord]:
    found: list[RunRecord] = []
    cursor: str | None = None
    while True:
        page = store.list_runs(parent_run_id=run_id, kind=kind, limit=1000, cursor=cursor)
        found.extend(page.items)
        if page.next_cursor is None:
            return sorted(found, key=lambda child: child.created_at)
        cursor = page.next_cursor


def _read_steps(recording: Recording, store: Store, run_id: str, plan: Plan, events: list[Event]) -> None:
    """Each launched attempt's result: a read rebuilt from the state it ended in, a write's from its
    receipt (unknown when the record says so), an ``llm`` step's raw text."""
    launched: dict[str, tuple[int, bool]] = {}  # step -> (attempt, a write) while its work runs
    calls: dict[str, tuple[str, int]] = {}  # a write's call id -> (step, attempt)
    waits: dict[str, str] = {}  # step -> what it last waited for
    for event in events:
        if isinstance(event, StepStateEvent):
            kind = str((event.wait or {}).get("kind", ""))
            if event.status == "running" and kind != "children":
                launched[event.step_id] = (event.attempt, kind == "write")
            elif event.step_id in launched:
                attempt, write = launched.pop(event.step_id)
                if not write:
                    _attempt_ended(recording, (run_id, event.step_id, attempt), plan, event)
            if event.status == "complete" and waits.get(event.step_id) == "manual":
                recording.manual[(run_id, event.step_id)] = dict(event.output or {})
            waits[event.step_id] = kind if event.status == "waiting" else ""
        elif isinstance(event, ToolCallEvent) and event.step_id in launched:
            calls[event.call_id] = (event.step_id, launched[event.step_id][0])
        elif isinstance(event, StatusEvent) and event.stage == "step" and event.code == "outcome_unknown":
            step_id = event.text.split(":", 1)[0]
            unknown = [call for call, (step, _) in calls.items() if step == step_id]
            if unknown:  # the call came back cut off: unknown again in the replay
                step, attempt = calls.pop(unknown[-1])
                cut_off = ToolResult.failed("outcome_unknown", "the recorded call's outcome was unknown")
                _add(recording.attempt((run_id, step, attempt)).results, _tool_of(plan, step), cut_off)
        elif isinstance(event, ToolResultEvent) and event.call_id in calls:
            step, attempt = calls.pop(event.call_id)
            _add(recording.attempt((run_id, step, attempt)).results, event.tool, _receipt(store, event))


def _attempt_ended(recording: Recording, key: AttemptKey, plan: Plan, event: StepStateEvent) -> None:
    step = plan.index.get(event.step_id)
    if step is None or event.status in ("skipped", "cancelled") or event.reason == INTERRUPTED:
        return  # cut off before it ended: the replay makes the attempt the record lacks
    executor = step.executor
    ended_well = event.status in ("complete", "waiting", "running")
    if isinstance(executor, ToolExecutor):
        _add(recording.attempt(key).results, executor.name, _read_result(executor.name, event, ended_well))
    elif isinstance(executor, LlmExecutor):
        text = event.raw if event.raw is not None else _text_of(executor, event.output)
        if text is not None:
            _add(recording.attempt(key).outputs, "generate", text)


def _read_result(tool: str, event: StepStateEvent, ended_well: bool) -> ToolResult:
    """What the tool returned, as the step's state recorded it (``tool_outcome`` read backwards)."""
    said = event.reason.removeprefix(f"{tool}: ")
    output = dict(event.output or {})
    if ended_well:
        text = json.dumps(output, ensure_ascii=False, sort_keys=True)
        return ToolResult(status="done", success=True, observation=text, summary=said, data=output)
    code = output.get("error_code")
    return ToolResult.failed(code if isinstance(code, str) and code else "tool_error", said)


def _text_of(executor: LlmExecutor, output: Mapping[str, JsonValue] | None) -> str | None:
    """An ``llm`` step's answer recorded before its raw text was kept: its text, or its JSON output."""
    if not output:
        return None
    text = output.get("text")
    if isinstance(text, str):
        return text
    if executor.output_schema is None:
        return None
    value = output["value"] if set(output) == {"value"} else dict(output)
    return json.dumps(value, ensure_ascii=False)


def _tool_of(plan: Plan, step_id: str) -> str:
    step = plan.index.get(step_id)
    return step.executor.name if step is not None and isinstance(step.executor, ToolExecutor) else ""


def _read_agent(recording: Recording, store: Store, key: StepKey, agent: RunRecord) -> None:
    events = store.events(agent.id)
    found = record_of(events, [])
    played = recording.steps.setdefault(key, Played())
    for purpose, texts in found.outputs.items():
        played.outputs.setdefault(purpose, []).extend(texts)
    for tool, results in found.results.items():
        played.results.setdefault(tool, []).extend(results)
    try:
        played.model = read_input(agent.id, agent.input)[1].model
    except ConfigError:
        pass  # its settings are unreadable: the replay says where it then differs
    if any(event.type == "round" for event in events):
        played.wire = wire_of(events)
    _read_answers(recording, store, agent.id)


def _read_answers(recording: Recording, store: Store, run_id: str) -> None:
    answered = sorted(
        (item for item in store.list_interactions(run_id=run_id) if item.resolution is not None),
        key=lambda item: item.created_at,
    )
    for item in answered:
        key = (item.run_id, item.step_id, item.kind)
        recording.answers.setdefault(key, []).append((item.resolution or {}, item.resolved_by))


def _receipt(store: Store, event: ToolResultEvent) -> ToolResult:
    """What a write's call returned: its receipt's result as its intent keeps it (the data too), else as
    its event said."""
    intent = store.get_write_intent(event.call_id)
    if intent is not None and intent.result:
        try:
            return ToolResult.model_validate(intent.result)
        except ValueError:
            pass  # not a result this plangate reads: the event's account of it
    return result_of(event)


def _add(table: dict[str, list[T]], name: str, item: T) -> None:
    table.setdefault(name, []).append(item)


# -- the tools played back -----------------------------------------------------------------------------------


def played_tools(registry: ToolRegistry, names: list[str], recording: Recording) -> ToolRegistry:
    """The tools of the recorded plans as this process has them (schema, effect, validation), each
    returning what the record holds for the step that calls it; a write is never called.

    Raises:
        ConfigError: this process lacks one of them (its schema is needed to replay it).
    """
    require_tools(registry, names)
    return ToolRegistry([_played_back(registry.get(name), recording) for name in names])


def _played_back(tool: Tool, recording: Recording) -> Tool:
    def recorded(**_: object) -> ToolResult:
        played = recording.played()
        queue = played.results.get(tool.name, []) if played is not None else []
        if not queue:
            why = f"the record holds no further result of {tool.name} here: the replay made a call it did not"
            return ToolResult.failed("not_recorded", why, observation=why)
        return queue.pop(0)

    # its own idempotence kept: a recorded cut-off write is unknown again, as it was
    return dataclasses.replace(tool, function=recorded, reconcile=None, timeout=None)


# -- the replay's side ---------------------------------------------------------------------------------------


def _events(store: Store, run_id: str) -> list[Event]:
    try:
        return store.events(run_id)
    except Exception:  # the replay never made this run
        return []


def _place(root: str, run_id: str) -> str:
    return "" if run_id == root else run_id.removeprefix(f"{root}.")


def _new_runs(store: Store, root: str, recording: Recording) -> Iterator[tuple[str, str]]:
    """The runs the replay made that the record has not (a sub-run a step now starts), each once."""
    known = {run_id for run_id, _ in recording.logs}
    pending = [root]
    while pending:
        parent = pending.pop(0)
        for kind, unit in _TREE:
            for child in _children(store, parent, kind):
                if child.id not in known:
                    known.add(child.id)
                    yield child.id, unit
                if unit == "step":
                    pending.append(child.id)


__all__ = [
    "DEFAULT_LIMIT",
    "Played",
    "Recording",
    "StepModel",
    "played_tools",
    "record",
    "replay",
    "replay_run",
]
