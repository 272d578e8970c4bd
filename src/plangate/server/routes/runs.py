"""``/v1/runs``: start agent and formula runs, list them, show one, cancel, fork or retry one, compare two.

For: the HTTP side of runs; every lookup is scoped to the caller's owner (another owner's run is a 404, and
another owner's fork is never listed).
Not for: executing runs (the ``Runs`` facade and the engines) or their event streams (``routes/events.py``).

The store calls made here never run on the event loop (one may wait seconds on another process's write
lock): routes that only read are plain functions, which FastAPI runs in its thread pool, and the others hand
their own store calls to it (``run_in_threadpool``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from pydantic import JsonValue
from starlette.concurrency import run_in_threadpool

from plangate.conditions import ConditionSyntaxError, compile_done_when
from plangate.errors import ConfigError
from plangate.formulas import Plan
from plangate.formulas.engine import FormulaEngine
from plangate.runs.diff import diff_runs
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._formulas import checked_plan
from plangate.server._problems import Problem
from plangate.server._public import public_text
from plangate.server._quotas import budget_left, queue_position
from plangate.server._rate import LimitedOwnerDep
from plangate.server.schemas import (
    AgentRunRequest,
    CancelRequest,
    ForkRunRequest,
    FormulaRunRequest,
    RunRequest,
    interaction_view,
    run_view,
)
from plangate.store import Interaction, RunKind, RunRecord, RunStatus, Store

router = APIRouter(prefix="/v1/runs", tags=["runs"])


@router.post("", status_code=201, response_model=None, summary="Start an agent run or a formula run")
async def create_run(
    body: Annotated[RunRequest, Body()], services: ServicesDep, owner: LimitedOwnerDep
) -> dict[str, JsonValue]:
    """Start a run; it executes in the background, or, when the owner has its ``runs_at_once`` going, waits
    ``queued`` (in order; ``queue_position``) until one of them ends. A formula that does not pass check is a
    422 listing the issues, and nothing is stored; an owner past its daily budget gets a 429 with
    ``Retry-After``."""
    limits = await run_in_threadpool(budget_left, services, owner)
    formulas = services.engines.formulas
    if isinstance(body, FormulaRunRequest):
        plan = await run_in_threadpool(checked_plan, formulas.runner, body.formula, body.vars)
        run_id = await run_in_threadpool(_start_formula, formulas, plan, owner, body)
    else:
        run_id = await _start_agent(services, body, owner)
    await services.runs.start(run_id, owner=owner, runs_at_once=limits.runs_at_once)
    return await run_in_threadpool(_started_view, services, run_id, owner)


@router.get("", response_model=None, summary="List the caller's runs, newest first")
def list_runs(
    services: ServicesDep,
    owner: OwnerDep,
    status: Annotated[
        list[RunStatus] | None, Query(description="Only runs with one of these statuses.")
    ] = None,
    kind: Annotated[RunKind | None, Query(description="Only runs of this kind.")] = None,
    top_level: Annotated[
        bool, Query(description="Only runs that are no other run's sub-run (the console's list).")
    ] = False,
    parent: Annotated[str | None, Query(max_length=200, description="Only the sub-runs of this run.")] = None,
    origin: Annotated[
        str | None, Query(max_length=200, description="Only the forks and retries of this run.")
    ] = None,
    cursor: Annotated[
        str | None, Query(max_length=64, description="`next_cursor` of the previous page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, JsonValue]:
    """One page of runs; pass ``next_cursor`` back as ``cursor`` for the next one (null: no more). Each run
    says whether it has sub-runs (``has_sub_runs``: a fan-out's, a sub-formula's, an agent step's agent),
    listed with ``?parent=<its id>``; a run's forks and retries are listed with ``?origin=<its id>``."""
    store = services.store
    try:
        page = store.list_runs(
            status=status or None,
            kind=kind,
            owner=owner,
            parent_run_id=parent,
            top_level=top_level,
            limit=limit,
            cursor=cursor,
            origin_run_id=origin,
        )
    except ConfigError as exc:
        raise Problem(400, "invalid-cursor", str(exc)) from None
    items: list[JsonValue] = []
    for run in page.items:
        item = run_view(run)
        item["has_sub_runs"] = bool(store.list_runs(parent_run_id=run.id, limit=1).items)
        items.append(item)
    return {"items": items, "next_cursor": page.next_cursor}


@router.get(
    "/{run_id}", response_model=None, summary="Show a run: its record, its open interaction and its steps"
)
def get_run(run_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The run; for a formula run also each step's state and reason; the open interaction (of the run or of
    one of its sub-runs: the one place to answer it), if any; its sub-runs (the first 100, newest first;
    ``sub_runs_more`` when there are more, listed by ``GET /v1/runs?parent=``); its parentage both ways:
    ``origin`` (the run it was forked or retried from, and where: ``{run_id, relation, at}``, or null),
    its ``forks`` and ``retries`` (the first 100 of either, newest first, each with where it starts;
    ``derived_more`` when there are more, listed by ``GET /v1/runs?origin=``)."""
    store = services.store
    run = store.get_run(run_id, owner=owner)
    interaction = _open_interaction(store, run)
    children = store.list_runs(parent_run_id=run.id, limit=_SUB_RUNS)
    data: dict[str, JsonValue] = {
        "run": run_view(run),
        "interaction": interaction_view(interaction) if interaction is not None else None,
        "active": services.runs.active(run.id),
        "sub_runs": [_sub_run(child) for child in children.items],
        "sub_runs_more": children.next_cursor is not None,
        "queue_position": queue_position(services, run.id) if run.status == "queued" else None,
    }
    data.update(services.runs.lineage(run, owner=owner, limit=_SUB_RUNS).as_json(_sub_run))
    data.update(_public_detail(services.runs.engine(run).describe(run)))
    return data


@router.post("/{run_id}/cancel", response_model=None, summary="Cancel a run that has not ended")
async def cancel_run(
    run_id: str,
    services: ServicesDep,
    owner: OwnerDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> dict[str, JsonValue]:
    """Stop the run: its unfinished steps (and sub-runs) are cancelled and its interaction expires. A run
    that already ended is a 409."""
    run = await run_in_threadpool(services.store.get_run, run_id, owner=owner)
    await services.runs.cancel(run, (body or CancelRequest()).reason)
    return {"run": run_view(await run_in_threadpool(services.store.get_run, run_id, owner=owner))}


@router.post(
    "/{run_id}/fork",
    response_model=None,
    status_code=201,
    summary="Fork an agent run before a round, or retry a formula run from a step",
)
async def fork_run(
    run_id: str, body: ForkRunRequest, services: ServicesDep, owner: OwnerDep
) -> dict[str, JsonValue]:
    """A new run whose history is this run's up to the point, continued from there (in the background):
    writes completed before it are not made again, one at or after it asks for consent in the new run (a
    formula's retry keeps the results of the steps that do not depend on ``from_step``). Another owner's run
    is a 404; a point the run does not have, or a formula changed since without ``formula_changed``, a 409;
    a field the run's kind does not take, a 422."""
    request: dict[str, JsonValue] = body.model_dump(mode="json", exclude_none=True)
    limits = await run_in_threadpool(budget_left, services, owner)
    fork_id = await services.runs.fork(run_id, request, owner=owner, runs_at_once=limits.runs_at_once)
    return await run_in_threadpool(_started_view, services, fork_id, owner)


@router.get(
    "/{run_id}/diff/{other_id}",
    response_model=None,
    summary="Two runs side by side, aligned by round or step, the first divergence marked",
)
def diff_two_runs(run_id: str, other_id: str, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The run and another of the caller's runs (its fork, its retry, its origin, or any other), aligned
    by round (two agent runs) or by step: ``rows`` of ``{key, a, b, differs}`` (``a`` / ``b``: the point in
    one line, null where a run has none), ``first_divergence`` (the key of the first row that differs, or
    null) and ``why`` (the part that differs there, in words). Either run of another owner is a 404."""
    found = diff_runs(services.store, run_id, other_id, owner=owner).as_json()
    found["why"] = public_text(str(found["why"]))
    return found


_SUB_RUNS = 100


def _started_view(services: ServicesDep, run_id: str, owner: str) -> dict[str, JsonValue]:
    """A new run as its start answers: its record, and where it stands among its owner's waiting runs."""
    data: dict[str, JsonValue] = {"run": run_view(services.store.get_run(run_id, owner=owner))}
    data["queue_position"] = queue_position(services, run_id)
    return data


def _sub_run(run: RunRecord) -> dict[str, JsonValue]:
    """What a run's page shows of one of its sub-runs: enough for a line and a link."""
    return {
        "id": run.id,
        "kind": run.kind,
        "name": run.name,
        "status": run.status,
        "updated_at": run.updated_at,
    }


def _start_formula(formulas: FormulaEngine, plan: Plan, owner: str, body: FormulaRunRequest) -> str:
    try:
        return formulas.create(
            plan,
            owner,
            always_execute=body.always_execute,
            max_tokens=body.max_tokens,
            max_cost=body.max_cost,
        )
    except ConfigError as exc:  # a max_cost its models' prices cannot hold it to
        raise Problem(422, "invalid-formula-run", str(exc)) from None


async def _start_agent(services: ServicesDep, body: AgentRunRequest, owner: str) -> str:
    if body.done_when is not None:
        _check_done_when(body.done_when)
    await run_in_threadpool(services.model.require, body.model)
    agents = services.engines.agents
    try:
        return await run_in_threadpool(
            lambda: agents.create(
                body.prompt,
                owner,
                model=body.model,
                tools=body.tools,
                max_rounds=body.max_rounds if body.max_rounds is not None else 60,
                mode=body.mode or "auto",
                always_execute=body.always_execute,
                plan_consent=body.plan_consent,
                done_when=body.done_when,
                max_tokens=body.max_tokens,
                max_cost=body.max_cost,
            )
        )
    except ConfigError as exc:
        raise Problem(422, "invalid-agent-run", str(exc)) from None


def _check_done_when(done_when: str) -> None:
    """A 422 naming the field and the column when ``done_when`` is not a condition over receipts."""
    try:
        compile_done_when(done_when)
    except ConditionSyntaxError as exc:
        column = exc.position + 1
        raise Problem(
            422,
            "invalid-agent-run",
            f"done_when: {exc.message}",
            errors=[{"field": "done_when", "message": exc.message, "column": column}],
        ) from None


def _open_interaction(store: Store, run: RunRecord) -> Interaction | None:
    opened = store.list_interactions(status="open", run_id=run.id)
    if opened:
        return opened[0]
    for child in store.list_runs(parent_run_id=run.id, status="waiting", limit=100).items:
        found = _open_interaction(store, child)
        if found is not None:
            return found
    return None


def _public_detail(detail: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """An engine's detail of a run (a formula's steps) with the reasons it shows as clients may see them."""
    steps = detail.get("steps")
    if isinstance(steps, list):
        for step in steps:
            if isinstance(step, dict) and isinstance(step.get("reason"), str):
                step["reason"] = public_text(str(step["reason"]))
    return detail
