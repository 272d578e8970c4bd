"""What running one formula step means, per executor: call a tool, run a sub-formula, fan out, ask a model.

For: the work a step does once the scheduler has committed it as ``running``; each function returns a
``StepOutcome`` and never raises for a failure of the step itself. ``llm`` steps are here too, with the check
of their answer against the step's JSON schema (``fits_schema``). Not for: gates, people or bookkeeping (the
scheduler in ``_scheduler.py`` owns those, and opens the interactions) or agent steps (``_agent_steps.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from pydantic import JsonValue

from plangate.config import ModelPrice
from plangate.decisions import DecisionParseError, load_json
from plangate.errors import ConfigError, FormulaError, PlangateError, RunLeased, StoreError
from plangate.formulas.plan import CookedStep, FormulaExecutor, LlmExecutor, ToolExecutor
from plangate.formulas.schema import OnComplete
from plangate.formulas.templates import render_runtime, to_text
from plangate.models import Message, Model, ModelRequest, ResponseSchema, complete, resolve_model
from plangate.runs import telemetry
from plangate.runs.usage import call_usage
from plangate.tools import ToolRegistry, ToolResult, json_schema


@dataclass(frozen=True)
class WriteReport:
    """What became of a write step's call, for the receipt that settles its intent.

    Attributes:
        key: the intent's idempotency key.
        tool: the write tool's name.
        result: what the call returned, or None when its outcome is unknown (a person is asked).
        recorded: the intent's receipt is committed already (nothing to complete).
        note: ``(code, text)`` of a status event saying how recovery settled it, if it did.
    """

    key: str
    tool: str
    result: ToolResult | None
    recorded: bool = False
    note: tuple[str, str] | None = None


@dataclass(frozen=True)
class StepOutcome:
    """How a step's work ended.

    Attributes:
        status: ``complete``, ``failed``, ``waiting`` (a sub-run waits on a person; ``run_ids`` say which),
            or ``unknown`` (a write whose outcome nobody can tell: a person is asked).
        write: for a write step, what became of its call.
        raw: for an ``llm`` step, what the model returned, as text (recorded with the step's state).
        usage: the model usage of the step's own call (an ``llm`` step), as an outcome shows it.
        exhausted: the step stopped on the run's budget (its call or run was not started, or the run it
            started reached what was left of it): a retry cannot help.
    """

    status: Literal["complete", "failed", "waiting", "unknown"]
    output: dict[str, JsonValue] = field(default_factory=dict)
    reason: str = ""
    run_ids: list[str] = field(default_factory=list)
    write: WriteReport | None = None
    raw: str | None = None
    usage: dict[str, JsonValue] | None = None
    exhausted: bool = False


_ENDED_BADLY = frozenset({"failed", "cancelled", "exhausted"})
"""How a sub-run that did not complete ended."""

STOPS_THE_RUN = (StoreError, RunLeased)
"""What a step's work meets that is not the step's failure: the store cannot keep the run's record (a
database restarting), or this process lost the run's lease. The run stops where its last commit left it, as
a crash would, and whoever resumes it goes on from there."""

MAX_NESTING = 20
"""The most runs one inside another: a sub-formula or fan-out element that would be deeper fails its step
(a formula that runs itself would otherwise nest without end)."""

SubRun = Callable[[str, dict[str, JsonValue], str], Awaitable[tuple[str, str, dict[str, JsonValue]]]]
"""Start or adopt a sub-formula under the id its parent committed: ``(formula, vars, run_id) -> (run_id,
status, outputs)``."""


def subformula_run_id(run_id: str, step_id: str, attempt: int) -> str:
    """The id of the sub-run that attempt ``attempt`` of the ``formula`` step ``step_id`` starts."""
    return f"{run_id}.{step_id}.sub{attempt}"


def fanout_run_ids(run_id: str, step_id: str, attempt: int, count: int) -> list[str]:
    """The ids of the ``count`` sub-runs that attempt ``attempt`` of step ``step_id`` fans out to."""
    return [f"{run_id}.{step_id}.fan{attempt}.{index}" for index in range(count)]


def fanout_ids(
    run_id: str, step: CookedStep, attempt: int, output: Mapping[str, JsonValue], existing: Sequence[str] = ()
) -> list[str]:
    """The sub-run ids of a fan-out: one per element of the step's ``for_each`` list, those ``existing``
    (committed already) first; a run stored before ids were committed gets the rest now."""
    items = items_at(output, _fan_out_of(step).for_each)
    count = len(items) if isinstance(items, list) else 0
    if len(existing) >= count:
        return list(existing)
    return [*existing, *fanout_run_ids(run_id, step.id, attempt, count)[len(existing) :]]


def _as_output(value: JsonValue, observation: str) -> dict[str, JsonValue]:
    if isinstance(value, dict):
        return dict(value)
    if value is None:
        return {"result": observation}
    return {"result": value}


async def run_tool(
    step: CookedStep,
    executor: ToolExecutor,
    tools: ToolRegistry,
    vars: Mapping[str, JsonValue],
    outputs: Mapping[str, Mapping[str, JsonValue]],
) -> StepOutcome:
    """Render the step's arguments from earlier outputs and call the tool."""
    try:
        args = render_runtime(executor.args, vars, outputs, path=f"{step.id}.tool.args")
    except PlangateError as exc:
        return StepOutcome("failed", reason=f"arguments: {exc}")
    return tool_outcome(executor.name, await tools.call(executor.name, args))


def tool_outcome(name: str, result: ToolResult, write: WriteReport | None = None) -> StepOutcome:
    """A step's outcome from what its tool returned."""
    if result.success:
        # a summary that is only the start of a JSON dump says nothing a person can read in one line
        summary = result.summary if not result.summary.startswith(("{", "[")) else "done"
        output = _as_output(result.data, result.observation)
        return StepOutcome("complete", output, f"{name}: {summary}", write=write)
    message = result.error_message or result.observation or result.status
    return StepOutcome("failed", {"error_code": result.error_code}, f"{name}: {message}", write=write)


async def run_subformula(
    step: CookedStep,
    executor: FormulaExecutor,
    sub_run: SubRun,
    vars: Mapping[str, JsonValue],
    outputs: Mapping[str, Mapping[str, JsonValue]],
    run_id: str,
) -> StepOutcome:
    """Run (or adopt) the step's sub-formula ``run_id``; its outputs become the step's output."""
    try:
        sub_vars = render_runtime(executor.vars, vars, outputs, path=f"{step.id}.formula.vars")
    except PlangateError as exc:
        return StepOutcome("failed", reason=f"vars: {exc}")
    if not isinstance(sub_vars, dict):  # a table of vars renders as one
        return StepOutcome("failed", reason=f"vars: expected an object, found {type(sub_vars).__name__}")
    try:
        found, status, sub_outputs = await sub_run(executor.name, sub_vars, run_id)
    except STOPS_THE_RUN:
        raise
    except PlangateError as exc:  # it cannot start (a budget its models' prices cannot hold, ...)
        return StepOutcome("failed", reason=f"sub-formula {executor.name}: {exc}")
    return _from_runs(step, [(found, status, sub_outputs)], wait_any=False)


def items_at(output: Mapping[str, JsonValue], path: str) -> list[JsonValue] | str:
    """The list ``on_complete.for_each`` names (``output.items``), or why there is none."""
    keys = path.split(".")
    if keys and keys[0] == "output":
        keys = keys[1:]
    value: Any = output
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return f"for_each: the step's output has no {path!r}"
        value = value[key]
    if not isinstance(value, list):
        return f"for_each: {path!r} is not a list"
    return list(value)


def _fan_out_of(step: CookedStep) -> OnComplete:
    if step.on_complete is None:  # the scheduler fans out only a step with on_complete
        raise FormulaError(f"step {step.id!r} has no on_complete: nothing to fan out", path=step.source)
    return step.on_complete


def _substitute_item(value: JsonValue, item: JsonValue, index: int) -> JsonValue:
    """``{item}``, ``{item.key}`` and ``{index}`` in fan-out vars (single braces: not a template)."""
    if isinstance(value, dict):
        return {k: _substitute_item(v, item, index) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_item(v, item, index) for v in value]
    if not isinstance(value, str):
        return value
    if value == "{item}":
        return item
    text = value.replace("{index}", str(index))
    if isinstance(item, dict):
        for key, sub in item.items():
            text = text.replace(f"{{item.{key}}}", sub if isinstance(sub, str) else str(sub))
    return text.replace("{item}", item if isinstance(item, str) else str(item))


async def fan_out(
    step: CookedStep,
    output: dict[str, JsonValue],
    sub_run: SubRun,
    run_ids: Sequence[str],
) -> StepOutcome:
    """Run ``on_complete.formula`` once per element of ``on_complete.for_each``, element ``i`` as the sub-run
    ``run_ids[i]`` (committed by the parent before any starts; one that exists already is adopted)."""
    spec = _fan_out_of(step)
    items = items_at(output, spec.for_each)
    if isinstance(items, str):
        return StepOutcome("failed", output, items)
    if len(run_ids) < len(items):
        return StepOutcome("failed", output, f"{len(items)} items but {len(run_ids)} sub-run ids recorded")

    async def one(index: int, item: JsonValue) -> tuple[str, str, dict[str, JsonValue]]:
        sub_vars = {key: _substitute_item(value, item, index) for key, value in spec.vars.items()}
        try:
            return await sub_run(spec.formula, sub_vars, run_ids[index])
        except STOPS_THE_RUN:
            raise
        except PlangateError as exc:
            # one element that cannot run fails the fan-out, and never leaves its siblings running unawaited
            return run_ids[index], "failed", {"error": str(exc)}

    if spec.parallel:
        # what stops the run stops every element, none left running unawaited (the group cancels them)
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(i, item)) for i, item in enumerate(items)]
        except BaseExceptionGroup as stopped:
            raise stopped.exceptions[0] from None
        results = [task.result() for task in tasks]
    else:
        results = []
        for i, item in enumerate(items):
            results.append(await one(i, item))
            if results[-1][1] not in {"completed"}:
                break  # sequential: a waiting or failed element holds the rest
    any_mode = step.waits_for is not None and step.waits_for.mode == "any-children"
    outcome = _from_runs(step, results, wait_any=any_mode, base=output, expected=len(items))
    return outcome


def _from_runs(
    step: CookedStep,
    results: Sequence[tuple[str, str, dict[str, JsonValue]]],
    *,
    wait_any: bool,
    base: Mapping[str, JsonValue] | None = None,
    expected: int | None = None,
) -> StepOutcome:
    run_ids = [r[0] for r in results]
    statuses = [r[1] for r in results]
    runs: list[JsonValue] = [{"run_id": r[0], "status": r[1], "outputs": r[2]} for r in results]
    output: dict[str, JsonValue] = dict(base or {})
    if base is None and len(results) == 1:
        output.update({"run_id": results[0][0], "outputs": results[0][2]})
    else:
        output["runs"] = runs
    total = expected if expected is not None else len(results)
    done = statuses.count("completed")
    if wait_any and done:
        return StepOutcome("complete", output, f"{done} of {total} sub-runs completed", run_ids)
    failed = [_ended_badly(result) for result in results if result[1] in _ENDED_BADLY]
    exhausted = "exhausted" in statuses  # a sub-run ran out of what was left of the run's budget
    if failed and not wait_any:
        reason = "sub-run failed: " + ", ".join(failed)
        return StepOutcome("failed", output, reason, run_ids, exhausted=exhausted)
    if done == total:
        return StepOutcome("complete", output, f"{done} sub-run(s) completed", run_ids)
    if failed and len(failed) == total:
        reason = "every sub-run failed: " + ", ".join(failed)
        return StepOutcome("failed", output, reason, run_ids, exhausted=exhausted)
    return StepOutcome("waiting", output, f"waiting on sub-runs ({done} of {total} completed)", run_ids)


def _ended_badly(result: tuple[str, str, dict[str, JsonValue]]) -> str:
    """A sub-run that ended badly, as a step's reason names it: with why, when it could not even start."""
    run_id, status, outputs = result
    error = outputs.get("error")
    return f"{run_id} {status}" + (f" ({error})" if isinstance(error, str) else "")


# -- llm steps ----------------------------------------------------------------------------------------------


class CallBudget(Protocol):
    """The budget an ``llm`` step's call is made under (a formula run's ``RunBudget``)."""

    def calling(self) -> AbstractAsyncContextManager[object]:
        """Held from the check before a call until its usage is counted: one call of the run at a time."""
        ...

    def refusal(self, model: str) -> StepOutcome | None:
        """Why a call of ``model`` may not be made now, as the step's outcome; None: it may."""
        ...

    def hold(self, step_id: str, usage: dict[str, JsonValue] | None) -> None:
        """Count a call's usage until the step's next transition carries it into the run's state."""
        ...


_JSON_ONLY = (
    "Reply with one JSON value that fits this JSON schema, and nothing else (no prose, no code fence):\n"
    "{schema}"
)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)


async def run_llm(
    step: CookedStep,
    executor: LlmExecutor,
    model: Model | str | None,
    vars: Mapping[str, JsonValue],
    outputs: Mapping[str, Mapping[str, JsonValue]],
    *,
    price: Callable[[str], ModelPrice | None] | None = None,
    budget: CallBudget | None = None,
    trace: telemetry.RunTrace | None = None,
    attempt: int = 0,
) -> StepOutcome:
    """One model call (purpose ``generate``) on the rendered prompt.

    The model is the step's own (``llm.model``), else ``model`` (the runner's), else the default model.
    What it returned is kept as the outcome's ``raw`` text (recorded with the step's state, for a replay).
    Without a schema the output is ``{text}``. With one, the schema is sent as the response schema and the
    answer must be JSON that fits it: an object becomes the output as it is, any other value ``{value}``.
    An answer that does not parse or fit fails the step with the reason and the raw ``text`` in its
    output, so that ``retries`` ask again. The call's usage (its cost by ``price`` of the model) is in the
    outcome, whatever the answer; with tracing on (``trace``) it is a ``chat`` span under the step's.
    ``budget`` (a run with one) is asked just before the call, an outcome it gives ending the step instead,
    and the call's usage is counted in it before another call of the run is asked about: the run's calls
    are made one at a time, so that parallel steps never cross the budget by more than one call.
    """
    try:
        rendered = render_runtime(executor.prompt, vars, outputs, path=f"{step.id}.llm.prompt")
    except PlangateError as exc:
        return StepOutcome("failed", reason=f"prompt: {exc}")
    prompt = rendered if isinstance(rendered, str) else to_text(rendered)
    try:
        chosen = resolve_model(executor.model if executor.model is not None else model)
    except ConfigError as exc:
        return StepOutcome("failed", reason=f"model: {exc}")
    schema = executor.output_schema
    messages = [Message("user", prompt)]
    response_schema: ResponseSchema | None = None
    if schema is not None:
        problem = schema_problem(schema)
        if problem is not None:
            return StepOutcome("failed", reason=f"llm.schema: {problem}")
        rules = _JSON_ONLY.format(schema=json.dumps(schema, ensure_ascii=False, sort_keys=True))
        messages.insert(0, Message("system", rules))
        response_schema = ResponseSchema("output", schema)
    request = ModelRequest("generate", messages, response_schema=response_schema, wire="json")
    async with nullcontext() if budget is None else budget.calling():
        if budget is not None and (refused := budget.refusal(chosen.name)) is not None:
            return refused
        try:
            observed = telemetry.observed(chosen, trace, ("step", step.id, attempt))
            completion = await complete(observed, request)
        except PlangateError as exc:
            return StepOutcome("failed", reason=f"model {chosen.name}: {exc}")
        priced = None if price is None or completion.usage is None else price(chosen.name)
        usage = call_usage(chosen.name, completion.usage, {} if priced is None else {chosen.name: priced})
        if budget is not None:
            budget.hold(step.id, usage)
    text = completion.text
    if schema is None:
        return StepOutcome("complete", {"text": text}, f"llm: {len(text)} characters", raw=text, usage=usage)
    value, problem = parse_json_answer(text)
    if problem is None:
        problem = fits_schema(value, schema)
    if problem is not None:
        return StepOutcome("failed", {"text": text}, f"llm: {problem}", raw=text, usage=usage)
    output: dict[str, JsonValue] = dict(value) if isinstance(value, dict) else {"value": value}
    return StepOutcome("complete", output, "llm: the answer fits the schema", raw=text, usage=usage)


def parse_json_answer(text: str) -> tuple[JsonValue, str | None]:
    """The JSON a model answered (inside a code fence or not), or why there is none."""
    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    if not body:
        return None, "the answer is empty; expected JSON"
    try:
        # Strict: nesting past the decoders' depth limit, NaN, huge numbers and repeated keys are refused,
        # so the schema check below may walk the value recursively.
        value = cast(JsonValue, load_json(body, "answer"))
    except DecisionParseError as exc:
        start = body[:60] + ("..." if len(body) > 60 else "")
        return None, f"the answer is not usable JSON: {exc.reason} ({start!r})"
    return value, None


def schema_problem(schema: Mapping[str, JsonValue]) -> str | None:
    """Why ``schema`` is not a usable JSON schema (None when it is)."""
    return json_schema.schema_problem(schema)


def fits_schema(value: JsonValue, schema: Mapping[str, JsonValue]) -> str | None:
    """Why ``value`` does not fit the JSON schema ``schema``, with where (None when it fits): the whole
    specification, the draft ``$schema`` names, else 2020-12."""
    problem = json_schema.first_problem(schema, value)
    return None if problem is None else f"the answer does not fit the schema: {problem}"


__all__ = [
    "STOPS_THE_RUN",
    "StepOutcome",
    "SubRun",
    "WriteReport",
    "fan_out",
    "fanout_ids",
    "fanout_run_ids",
    "fits_schema",
    "items_at",
    "parse_json_answer",
    "run_llm",
    "run_subformula",
    "run_tool",
    "schema_problem",
    "subformula_run_id",
    "tool_outcome",
]
