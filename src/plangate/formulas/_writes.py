"""Write steps: a ``tool`` step whose tool is a write keeps the run contract's promises (SPEC §2, §6).

For: the formula's side of the one write protocol (``plangate.runs.writes``). The registry, not the
formula, says a tool writes; such a step first asks a person for consent to the exact call
(``plangate.runs.consent``; the interaction carries the tool, its arguments and their digest) unless the step
says ``consent = "auto"`` or the run was started with ``always_execute``. Its intent is committed with its
``running`` state (``intent_key``), the call runs under that key (``run_write``) and its receipt commits
with the step's end. After a restart a write whose receipt was never committed is settled by the
protocol's one decision tree (``settle``), and a write whose outcome is unknown is put to a person
(``ask_unknown``). ``start``, ``settled``, ``retry_wait`` and ``ask_unknown`` are the scheduler's write
phase: they decide the step's transitions and the commits that go with them. Not for: the scheduling
loop (``_scheduler.py``), applying a person's answer (``_answers.py``) or the decision tree itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from pydantic import JsonValue

from plangate.errors import PlangateError, StoreError
from plangate.events import InteractionTool, StatusEvent, ToolCallEvent, ToolResultEvent
from plangate.formulas._executors import StepOutcome, WriteReport, tool_outcome
from plangate.formulas._runcontext import RunContext
from plangate.formulas._runstate import StepRun
from plangate.formulas.plan import CookedStep, ToolExecutor
from plangate.formulas.templates import render_runtime
from plangate.runs import consent
from plangate.runs import writes as protocol
from plangate.store import Store, Transaction
from plangate.tools import Tool, ToolArgumentsError, ToolRegistry

#: How a write step got its consent, as its ``running`` state records it.
BY_PERSON = "person"
BY_STEP = "auto"
BY_RUN = "always_execute"

_REASONS = {
    BY_PERSON: "running the call a person approved",
    BY_STEP: 'running without asking: the step says consent = "auto"',
    BY_RUN: "running without asking: the run was started with always_execute (--yes)",
}


# -- the scheduler's write phase ----------------------------------------------------------------------------


def start(run_ctx: RunContext, step: CookedStep, run: StepRun, executor: ToolExecutor, tool: Tool) -> None:
    """Ask for consent to the exact call; or, consented (or needing none), commit its intent with the
    step's ``running`` state and launch the call."""
    wait = run.wait
    interaction_id: str | None = None
    if wait.get("kind") == "consent" and wait.get("approved"):
        arguments, digest, how = wait.get("arguments"), str(wait.get("digest")), BY_PERSON
        interaction_id = str(wait.get("interaction_id"))
    else:
        state = run_ctx.state
        prepared = prepare(step, executor, tool, state.plan.vars, state.outputs())
        if isinstance(prepared, str):
            run_ctx.transition(run, "failed", prepared, attempt=run.attempt + 1)
            return
        arguments, digest = prepared
        if executor.consent != "auto" and not run_ctx.always_execute:
            asked = InteractionTool(name=tool.name, arguments=arguments, arguments_digest=digest)
            details: dict[str, JsonValue] = {"tool": tool.name, "arguments": arguments, "digest": digest}
            prompt = consent_prompt(tool, arguments, step)
            run_ctx.ask(step, run, "confirm", prompt, wait_kind="consent", tool=asked, details=details)
            return
        how = BY_STEP if executor.consent == "auto" else BY_RUN
    if not isinstance(arguments, dict):  # what the consent request stored is always an object
        raise StoreError(
            f"run {run_ctx.run_id!r}, step {step.id!r}: the approved call's arguments are not an object"
        )
    attempt = run.attempt + 1
    key = intent_key(run_ctx.run_id, step.id, attempt, interaction_id, run_ctx.store)
    running: dict[str, JsonValue] = {
        "kind": "write",
        "key": key,
        "tool": tool.name,
        "arguments": arguments,
        "digest": digest,
        "consent": how,
    }
    if interaction_id is not None:
        running["interaction_id"] = interaction_id
    run_ctx.transition(run, "running", _REASONS[how], attempt=attempt, wait=running)
    name = tool.name

    def promise(tx: Transaction) -> None:
        tx.record_write_intent(key, name, digest)

    run_ctx.on_commit(promise)
    run_ctx.emit(ToolCallEvent(call_id=key, tool=name, arguments=arguments, step_id=step.id))
    run_ctx.launch(step.id, "write")


def settled(run_ctx: RunContext, step: CookedStep, report: WriteReport) -> None:
    """Commit the receipt that settles a write's intent, with the step's end (the caller's transition)."""
    if report.note is not None:
        run_ctx.emit(StatusEvent(stage="step", code=report.note[0], text=f"{step.id}: {report.note[1]}"))
    result = report.result
    if result is None or report.recorded:
        return
    key, index, payload = report.key, run_ctx.graph.position[step.id], result.model_dump(mode="json")
    success, summary = result.success, result.summary

    def receipt(tx: Transaction) -> None:
        tx.complete_write_intent(key, step_index=index, success=success, summary=summary, result=payload)

    run_ctx.on_commit(receipt)
    run_ctx.emit(
        ToolResultEvent(
            call_id=key,
            tool=report.tool,
            status=result.status,
            success=result.success,
            summary=result.summary,
            observation=result.observation,
            error_code=result.error_code,
            error_message=result.error_message,
            step_id=step.id,
        )
    )


def retry_wait(run: StepRun) -> dict[str, JsonValue] | None:
    """What a retried write step keeps: a person's consent to the same call (the same digest)."""
    wait = run.wait
    if wait.get("kind") != "write" or wait.get("consent") != BY_PERSON:
        return None
    keys = ("interaction_id", "tool", "arguments", "digest")
    return {"kind": "consent", "approved": True, **{k: wait.get(k) for k in keys}}


def ask_unknown(
    run_ctx: RunContext, step: CookedStep, run: StepRun, details: Mapping[str, JsonValue]
) -> None:
    """Ask a person whether a write happened; its intent stays open until they say."""
    kept = {k: details.get(k) for k in ("key", "tool", "arguments", "digest", "why")}
    arguments = kept["arguments"] if isinstance(kept["arguments"], dict) else {}
    prompt = unknown_prompt(str(kept["tool"]), arguments, str(kept["why"]))
    run_ctx.ask(step, run, "approval", prompt, wait_kind="outcome_unknown", details=kept)


# -- the call and its settling ------------------------------------------------------------------------------


def write_tool(executor: ToolExecutor, tools: ToolRegistry) -> Tool | None:
    """The step's tool when the registry says it writes, else None (a read, or a tool unknown here)."""
    if executor.name not in tools:
        return None
    found = tools.get(executor.name)
    return found if found.effect == "write" else None


def prepare(
    step: CookedStep,
    executor: ToolExecutor,
    tool: Tool,
    vars: Mapping[str, JsonValue],
    outputs: Mapping[str, Mapping[str, JsonValue]],
) -> tuple[dict[str, JsonValue], str] | str:
    """The call's validated arguments and their digest (what consent is bound to), or why there are none."""
    try:
        rendered = render_runtime(executor.args, vars, outputs, path=f"{step.id}.tool.args")
        arguments = tool.validate(rendered)
    except ToolArgumentsError as exc:
        return f"arguments: {exc}"
    except PlangateError as exc:
        return f"arguments: {exc}"
    return arguments, consent.arguments_digest(arguments)


def consent_prompt(tool: Tool, arguments: Mapping[str, JsonValue], step: CookedStep) -> str:
    """What a person reads when asked to allow a write step's call."""
    return consent.consent_prompt(tool, arguments, where=f"step {step.id!r}")


def unknown_prompt(tool: str, arguments: Mapping[str, JsonValue], why: str) -> str:
    """The question asked when nobody can tell whether a write happened."""
    answer = (
        "approve if it happened (the step completes and it is not run again); reject if it did not (the "
        "step fails)."
    )
    return consent.unknown_prompt(tool, arguments, why, answer)


def intent_key(run_id: str, step_id: str, attempt: int, interaction_id: str | None, store: Store) -> str:
    """The idempotency key of a write: the consent's interaction id the first time it is used, else the
    run, the step and the attempt (a retry, or a write that needs no consent)."""
    if interaction_id is not None and store.get_write_intent(interaction_id) is None:
        return interaction_id
    return f"{run_id}:{step_id}:{attempt}"


async def run_write(
    tool: Tool, arguments: Mapping[str, JsonValue], key: str, limit: float | None
) -> StepOutcome:
    """Call the write under its key, for at most ``limit`` seconds (None: no limit)."""
    outcome = await protocol.call(tool, protocol.WriteCall(tool.name, arguments, key), limit=limit)
    return _step_outcome(key, tool.name, outcome)


async def settle(
    store: Store,
    tools: ToolRegistry,
    wait: Mapping[str, JsonValue],
    limit: float | None,
    start: Callable[[str, str, str], Awaitable[None]],
) -> StepOutcome:
    """Settle a write that was cut off before its receipt was committed (after a restart).

    ``start(key, tool, digest)`` commits the write's intent when it has none (the call never started).
    """
    key, name, digest = str(wait.get("key", "")), str(wait.get("tool", "")), str(wait.get("digest", ""))
    raw = wait.get("arguments")
    arguments: dict[str, JsonValue] = dict(raw) if isinstance(raw, dict) else {}

    async def begin() -> None:
        await start(key, name, digest)

    write = protocol.WriteCall(name, arguments, key)
    return _step_outcome(key, name, await protocol.recover(store, tools, write, begin, limit=limit))


def _step_outcome(key: str, tool: str, outcome: protocol.WriteOutcome) -> StepOutcome:
    if isinstance(outcome, protocol.Unknown):
        return StepOutcome("unknown", reason=outcome.why, write=WriteReport(key, tool, None))
    report = WriteReport(key, tool, outcome.result, recorded=outcome.recorded, note=outcome.note)
    return tool_outcome(tool, outcome.result, report)


__all__ = [
    "BY_PERSON",
    "BY_RUN",
    "BY_STEP",
    "ask_unknown",
    "consent_prompt",
    "intent_key",
    "prepare",
    "retry_wait",
    "run_write",
    "settle",
    "settled",
    "start",
    "unknown_prompt",
    "write_tool",
]
