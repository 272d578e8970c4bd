"""What running one formula step means, per executor: call a tool, run a sub-formula, fan out.

For: the work a step does once the scheduler has committed it as ``running``; each function returns a
``StepOutcome`` and never raises for a failure of the step itself. Not for: gates, people or bookkeeping
(the scheduler in ``runtime.py`` owns those, and opens the interactions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from plangate.errors import PlangateError
from plangate.formulas.plan import FormulaExecutor, PlanStep, ToolExecutor
from plangate.formulas.templates import render_runtime
from plangate.tools import ToolRegistry


@dataclass(frozen=True)
class StepOutcome:
    """How a step's work ended.

    Attributes:
        status: ``complete``, ``failed``, or ``waiting`` (a sub-run waits on a person; ``run_ids`` say which).
    """

    status: Literal["complete", "failed", "waiting"]
    output: dict[str, JsonValue] = field(default_factory=dict)
    reason: str = ""
    run_ids: list[str] = field(default_factory=list)


SubRun = Callable[[str, dict[str, JsonValue], str | None], Awaitable[tuple[str, str, dict[str, JsonValue]]]]
"""Start or resume a sub-formula: ``(formula, vars, run_id) -> (run_id, status, outputs)``."""


def _as_output(value: JsonValue, observation: str) -> dict[str, JsonValue]:
    if isinstance(value, dict):
        return dict(value)
    if value is None:
        return {"result": observation}
    return {"result": value}


async def run_tool(
    step: PlanStep,
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
    result = await tools.call(executor.name, args)
    if result.success:
        return StepOutcome("complete", _as_output(result.data, result.observation), result.summary)
    message = result.error_message or result.observation or result.status
    return StepOutcome("failed", {"error_code": result.error_code}, f"{executor.name}: {message}")


async def run_subformula(
    step: PlanStep,
    executor: FormulaExecutor,
    sub_run: SubRun,
    vars: Mapping[str, JsonValue],
    outputs: Mapping[str, Mapping[str, JsonValue]],
    existing: Sequence[str] = (),
) -> StepOutcome:
    """Run (or resume) the step's sub-formula; its outputs become the step's output."""
    try:
        sub_vars = render_runtime(executor.vars, vars, outputs, path=f"{step.id}.formula.vars")
    except PlangateError as exc:
        return StepOutcome("failed", reason=f"vars: {exc}")
    assert isinstance(sub_vars, dict)
    run_id, status, sub_outputs = await sub_run(executor.name, sub_vars, existing[0] if existing else None)
    return _from_runs(step, [(run_id, status, sub_outputs)], wait_any=False)


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
    step: PlanStep,
    output: dict[str, JsonValue],
    sub_run: SubRun,
    existing: Sequence[str] = (),
) -> StepOutcome:
    """Run ``on_complete.formula`` once per element of ``on_complete.for_each`` (resuming known sub-runs)."""
    spec = step.on_complete
    assert spec is not None
    items = items_at(output, spec.for_each)
    if isinstance(items, str):
        return StepOutcome("failed", output, items)

    async def one(index: int, item: JsonValue) -> tuple[str, str, dict[str, JsonValue]]:
        sub_vars = _substitute_item(dict(spec.vars), item, index)
        assert isinstance(sub_vars, dict)
        known = existing[index] if index < len(existing) else None
        return await sub_run(spec.formula, sub_vars, known)

    if spec.parallel:
        results = list(await asyncio.gather(*(one(i, item) for i, item in enumerate(items))))
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
    step: PlanStep,
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
    failed = [
        f"{rid} {st}" for rid, st in zip(run_ids, statuses, strict=True) if st in {"failed", "cancelled"}
    ]
    if failed and not wait_any:
        return StepOutcome("failed", output, "sub-run failed: " + ", ".join(failed), run_ids)
    if done == total:
        return StepOutcome("complete", output, f"{done} sub-run(s) completed", run_ids)
    if failed and len(failed) == total:
        return StepOutcome("failed", output, "every sub-run failed: " + ", ".join(failed), run_ids)
    return StepOutcome("waiting", output, f"waiting on sub-runs ({done} of {total} completed)", run_ids)


__all__ = ["StepOutcome", "SubRun", "fan_out", "items_at", "run_subformula", "run_tool"]
