"""Retrying a formula run from a step: a new run of the same formula and variables, in which the steps that
do not depend on the chosen one keep their stored results, and the chosen step and everything downstream of
it run again.

For: ``plan_digest`` (what a run records of the formula it was cooked from), ``retry_run`` (the new run,
stored ``queued`` with its origin in its input) and ``materialize`` (its first commit: the carried steps
``complete`` with their outputs, every other step pending, in one transaction; a process killed between the
two commits leaves a retry with no state, which its first load commits: the origin is only read).

The promises: a carried step is history (a write it made is not made again); a write step downstream asks
for consent again, unless the origin ran with ``always_execute`` (``--yes``), which the retry records
explicitly, or the step says ``consent = "auto"``; fan-out sub-runs downstream are new sub-runs. A write of
a step that does not run again whose outcome the origin never settled (its call started, no receipt came)
stays unknown: the retry asks a person whether it happened (its own intent, settled by the answer), and
never runs it again, ``--yes`` or not. A formula
whose file changed since the origin was cooked is never mixed in silently: the retry asks for
``formula_changed`` (``use-new``: cook the file as it is now; ``use-recorded``: the origin's plan).
Not for: scheduling (the runner does, once the retry is stored).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import JsonValue

from plangate.errors import ConfigError, FormulaError, InteractionError, StoreError
from plangate.events import StatusEvent, StepStateEvent, ToolCallEvent
from plangate.formulas._budget import BUDGET_KEY
from plangate.formulas._runstate import SNAPSHOT_VERSION, RunState, StepRun
from plangate.formulas.plan import Plan
from plangate.runs import tools as tool_identities
from plangate.runs.contract import Transactions
from plangate.store import RunRecord, Store, WriteIntent


class FormulaRunner(Protocol):
    """What a retry needs of the runner (``plangate.formulas.runtime.FormulaRunner``, which imports this
    module: the runtime is above it)."""

    store: Store
    tool_specs: list[str]

    def plan(self, formula: str, vars: Mapping[str, object] | None = None) -> Plan:
        """The formula cooked and checked."""
        ...

    def load(self, run_id: str) -> RunState:
        """A run's committed state."""
        ...

    def input_for(self, plan: Plan, always_execute: bool) -> dict[str, object]:
        """What a new run of ``plan`` stores as its input."""
        ...


RETRY_KEY = "retried_from"
"""Where a retry's input names its origin: ``{"run_id", "step", "formula"}``."""

CARRIED = "carried from run"
"""How the state of a step a retry carried begins its reason (``carried from run <origin>``)."""

DIGEST_KEY = "formula_digest"
"""Where a run's input keeps the digest of the plan it was cooked to."""

FormulaChanged = Literal["use-new", "use-recorded"]


def plan_digest(plan: Plan) -> str:
    """The digest of a cooked plan (its file's place left out): equal for the same formula and variables."""
    text = plan.model_dump_json(exclude={"source"})
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class FormulaChangedError(InteractionError):
    """The formula's file changed since the run was cooked: the caller must choose which to use."""


def retry_run(
    runner: FormulaRunner,
    run_id: str,
    step: str,
    *,
    owner: str | None = None,
    formula_changed: FormulaChanged | None = None,
) -> str:
    """Store a retry of the formula run ``run_id`` from ``step`` (``queued``); returns its id.

    Raises:
        NotFoundError: no such run (of ``owner``).
        InteractionError: it is not a root formula run, or has no step ``step``.
        FormulaChangedError: the formula changed since, and ``formula_changed`` does not say what to use.
        FormulaError: the formula cannot be cooked now, with ``use-new``.
    """
    origin = runner.store.get_run(run_id, owner=owner)
    if origin.kind != "formula" or origin.parent_run_id is not None:
        what = "a sub-run" if origin.parent_run_id is not None else f"a {origin.kind} run"
        raise InteractionError(f"run {run_id!r} is {what}; only a root formula run is retried from a step")
    recorded = runner.load(origin.id)
    if step not in recorded.steps:
        known = ", ".join(list(recorded.steps)[:20])
        raise InteractionError(f"run {run_id!r} has no step {step!r}; its steps are {known}")
    plan, which = _plan_to_use(runner, origin, recorded.plan, formula_changed)
    if step not in plan.index:
        raise InteractionError(f"the formula as it is now has no step {step!r}; retry with use-recorded")
    data: dict[str, object] = {
        "formula": plan.formula,
        "vars": dict(plan.vars),
        "tools": list(runner.tool_specs),
        tool_identities.INPUT_KEY: origin.input.get(tool_identities.INPUT_KEY, {}),
        DIGEST_KEY: plan_digest(plan),
        RETRY_KEY: {"run_id": origin.id, "step": step, "formula": which},
    }
    if origin.input.get("always_execute") is True:
        data["always_execute"] = True
    if BUDGET_KEY in origin.input:  # the same limits, for what the retry itself spends
        data[BUDGET_KEY] = origin.input[BUDGET_KEY]
    if which == "use-new":
        data[tool_identities.INPUT_KEY] = runner.input_for(plan, False)[tool_identities.INPUT_KEY]
        data["plan"] = plan.to_dict()
    run = runner.store.create_run("formula", plan.formula, data, owner=origin.owner, origin_run_id=origin.id)
    return run.id


def _plan_to_use(
    runner: FormulaRunner, origin: RunRecord, recorded: Plan, choice: FormulaChanged | None
) -> tuple[Plan, str]:
    if choice == "use-recorded":
        return recorded, "use-recorded"
    vars_ = origin.input.get("vars")
    try:
        current = runner.plan(str(origin.input.get("formula")), vars_ if isinstance(vars_, dict) else {})
    except (FormulaError, ConfigError) as exc:
        if choice == "use-new":
            raise
        if DIGEST_KEY not in origin.input:
            return recorded, "recorded"
        raise FormulaChangedError(
            f"run {origin.id!r}: its formula cannot be cooked now ({exc}); retry with "
            "--formula-changed=use-recorded to use the plan it ran"
        ) from None
    if choice == "use-new":
        return current, "use-new"
    digest = origin.input.get(DIGEST_KEY)
    if digest is None or digest == plan_digest(current):
        return recorded, "unchanged" if digest is not None else "recorded"
    raise FormulaChangedError(
        f"run {origin.id!r}: the formula {origin.input.get('formula')!r} changed since the run was cooked "
        "from it; retry with --formula-changed=use-new (the file as it is now) or "
        "--formula-changed=use-recorded (the plan the run ran)"
    )


def formula_changed(runner: FormulaRunner, run: RunRecord) -> str | None:
    """Why the formula run ``run`` (a root) would now be cooked differently than it was, or None."""
    digest = run.input.get(DIGEST_KEY)
    if digest is None or run.parent_run_id is not None:
        return None
    vars_ = run.input.get("vars")
    try:
        current = runner.plan(str(run.input.get("formula")), vars_ if isinstance(vars_, dict) else {})
    except (FormulaError, ConfigError):
        return None
    if plan_digest(current) == digest:
        return None
    return f"the formula {run.input.get('formula')!r} changed since run {run.id!r} was cooked from it"


def downstream(plan: Plan, step: str) -> set[str]:
    """``step`` and every step that runs again with it: those that need it (transitively), the children
    of each, and the containers above each (which complete again when their children do)."""
    needed_by: dict[str, list[str]] = {}
    for item in plan.steps:
        for need in item.needs:
            needed_by.setdefault(need, []).append(item.id)
    found: set[str] = set()
    pending = [step]
    while pending:
        current = pending.pop()
        if current in found or current not in plan.index:
            continue
        found.add(current)
        pending.extend(needed_by.get(current, ()))
        planned = plan.index[current]
        pending.extend(planned.children)
        if planned.parent is not None:
            pending.append(planned.parent)
    return found


def materialize(runner: FormulaRunner, run: RunRecord, transaction: Transactions) -> RunState:
    """The retry's first commit: carried steps complete with the origin's outputs, the rest pending.

    Raises:
        StoreError: the origin can no longer be read.
    """
    record = run.input[RETRY_KEY]
    if not isinstance(record, dict):
        raise StoreError(f"run {run.id!r}: its retry record is not an object")
    origin_id, step = str(record["run_id"]), str(record["step"])
    origin = runner.load(origin_id)
    stored_plan = run.input.get("plan")
    plan = Plan.from_dict(dict(stored_plan)) if isinstance(stored_plan, dict) else origin.plan
    state = RunState.new(plan)
    state.prices = dict(origin.prices)  # its calls are costed as the origin's were
    again = downstream(plan, step)
    carried: list[StepRun] = []
    for step_id, done in origin.steps.items():
        if step_id in state.steps and step_id not in again and done.status == "complete":
            kept = StepRun(step_id, "complete", done.attempt, f"{CARRIED} {origin_id}", done.output)
            state.steps[step_id] = kept
            carried.append(kept)
    doubts: list[WriteIntent] = []
    for step_id, intent, call in in_doubt(runner.store, origin_id, origin, again):
        if step_id not in state.steps:
            continue
        key = f"{run.id}:{step_id}:carried"
        why = f"its outcome in run {origin_id} was never settled"
        wait: dict[str, JsonValue] = {
            "kind": "outcome_unknown",
            "key": key,
            "tool": intent.tool,
            "arguments": dict(call.arguments),
            "digest": intent.arguments_digest,
            "why": why,
        }
        reason = f"its write {intent.tool} has an unknown outcome in run {origin_id}: a person is asked"
        kept = StepRun(step_id, "ready", origin.steps[step_id].attempt, reason, None, wait)
        state.steps[step_id] = kept
        carried.append(kept)
        doubts.append(intent.model_copy(update={"key": key}))
    with transaction(run.id) as tx:
        text = f"retrying {plan.formula} from step {step} of run {origin_id}"
        tx.append(StatusEvent(stage="run", code="started", text=text))
        tx.append(StatusEvent(stage="run", code="retried", text=text))
        if run.input.get("always_execute") is True:
            what = "write steps run without asking a person: the origin ran with always_execute (--yes)"
            tx.append(StatusEvent(stage="run", code="always_execute", text=what))
        for doubt in doubts:  # the retry's own intent: a person's answer settles it, in the retry
            tx.record_write_intent(doubt.key, doubt.tool, doubt.arguments_digest)
        for kept in carried:
            tx.append(
                StepStateEvent(
                    step_id=kept.id,
                    status=kept.status,
                    reason=kept.reason,
                    attempt=kept.attempt,
                    output=kept.output,
                    wait=kept.wait or None,
                )
            )
        tx.set_status("queued")
        tx.set_snapshot(state.to_snapshot(), version=SNAPSHOT_VERSION)
        state.seq = tx.events[-1].seq
    return state


def in_doubt(
    store: Store, origin_id: str, origin: RunState, again: set[str]
) -> list[tuple[str, WriteIntent, ToolCallEvent]]:
    """The writes of ``origin_id`` whose call started and never got a receipt (their outcome is unknown),
    of steps that did not complete and do not run again: ``(step, intent, call)``."""
    pending = {intent.key: intent for intent in store.pending_write_intents(origin_id)}
    if not pending:
        return []
    found: list[tuple[str, WriteIntent, ToolCallEvent]] = []
    for event in store.events(origin_id):
        if not isinstance(event, ToolCallEvent) or event.call_id not in pending or event.step_id is None:
            continue
        step = origin.steps.get(event.step_id)
        if step is not None and step.status != "complete" and event.step_id not in again:
            found.append((event.step_id, pending.pop(event.call_id), event))
    return found


def retry_of(data: Mapping[str, object]) -> Mapping[str, JsonValue] | None:
    """The ``retried_from`` record of a run's input, or None for a run that is no retry."""
    found = data.get(RETRY_KEY)
    return found if isinstance(found, dict) else None


__all__ = [
    "CARRIED",
    "DIGEST_KEY",
    "RETRY_KEY",
    "FormulaChanged",
    "FormulaChangedError",
    "downstream",
    "formula_changed",
    "in_doubt",
    "materialize",
    "plan_digest",
    "retry_of",
    "retry_run",
]
