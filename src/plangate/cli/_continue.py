"""``plangate approve | reject | answer | complete | resume | cancel``: continue or end a stored run.

For: the commands that act on a run that exists, the same way for every kind of run. An answer goes
through the ``Runs`` facade (``Runs.answer``), which commits it wherever the run is; then the run's root is
advanced here by its engine under live progress and reported, or, with ``--broker``, the facade hands it
to the workers. ``resume`` advances the root by its engine (asking in the terminal unless ``--detach``),
``complete`` finishes a formula's manual step first, ``cancel`` goes through ``Runs.cancel``. A stored run
is continued only with the tools this command names, all there before anything changes. Not for: any run
logic (the engines) or how a run's progress and report look (``_drive.py``, ``_report.py``).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
from datetime import UTC, datetime
from typing import Annotated

import typer

from plangate.cli._console import err, fail, out, prog
from plangate.cli._drive import advance, advance_due, answer, asks_here, drive, progress
from plangate.cli._options import (
    BrokerOpt,
    ConfigOpt,
    DetachOpt,
    InteractiveOpt,
    JsonOpt,
    PathOpt,
    StoreOpt,
    ToolsOpt,
)
from plangate.cli._report import Standing, answered_for_workers, command_hint, open_interaction, report
from plangate.cli._session import Session, session
from plangate.errors import ConfigError, InteractionError, UserError, number_too_long
from plangate.interactions import Answer, Approve, Edit, Reject, Resolution
from plangate.runs import Runs
from plangate.store import Interaction, RunRecord

ResumeOpt = Annotated[bool, typer.Option("--resume/--no-resume", help="Continue the run here afterwards.")]
IdArg = Annotated[
    str,
    typer.Argument(
        help="The interaction id, or a run's id: the one question it (or one of its sub-runs or agent "
        "steps) waits on."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model to continue with: of the run's agents, and of a formula's agent and llm steps "
        "(default: the run's own).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the commands that continue or end a stored run to ``app``."""
    app.command("resume")(resume_command)
    app.command("approve")(approve_command)
    app.command("reject")(reject_command)
    app.command("answer")(answer_command)
    app.command("complete")(complete_command)
    app.command("cancel")(cancel_command)


def resume_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    model: ModelOpt = None,
    formula_changed: ChangedOpt = None,
    path: PathOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Continue a run from its last committed transition (after a crash, or once a person answered).

    A sub-run (or a formula's agent step's agent) continues with its root. The run's lease is taken
    first: a run that another live process advances is refused, unchanged. A formula run whose file
    changed since it was cooked is refused, saying so, until --formula-changed says which to use."""
    s = session(ctx, config=config, store=store, tools=tools, existing=True)
    try:
        root = s.store.root_of(s.store.get_run(run_id).id)
        runs = s.continuing(root, model=model, search_paths=path)
        _check_changed(runs, root, formula_changed)
        with progress(runs, root, shown=not json):
            drive(s, root, ask_here=asks_here(interactive, detach))
    except UserError as exc:
        fail(str(exc))
        return
    report(Standing.of(runs, root), json=json, hint=command_hint(s, model))


ChangedOpt = Annotated[
    str | None,
    typer.Option(
        "--formula-changed",
        help="When the run's formula file changed since: use-recorded (go on with the plan the run "
        "recorded) or use-new (refused: retry the run with it instead).",
    ),
]


def _check_changed(runs: Runs, root: str, choice: str | None) -> None:
    """Refuse to go on silently with a run whose source changed since it started (a formula's file).

    Raises:
        ConfigError: it changed and ``choice`` is not use-recorded (or not a choice at all).
    """
    if choice not in (None, "use-new", "use-recorded"):
        raise ConfigError(f"--formula-changed: expected use-new or use-recorded; found {choice!r}")
    why = runs.changed(root)
    if why is None or choice == "use-recorded":
        return
    if choice == "use-new":
        raise ConfigError(
            f"{why}: a run goes on with the plan it recorded; to run the formula as it is now, retry it: "
            f"{prog()} retry {root} --from STEP --formula-changed=use-new"
        )
    raise ConfigError(
        f"{why}: pass --formula-changed=use-recorded to go on with the plan it recorded, or retry it from a "
        f"step with --formula-changed=use-new"
    )


def _resolve(
    s: Session,
    target: str,
    resolution: Resolution,
    *,
    resume: bool,
    json: bool,
    model: str | None,
    broker: str | None,
) -> None:
    """Answer the open interaction ``target`` names, then continue its run here (or on the workers)."""
    try:
        interaction = open_interaction(s.store, target)
        if interaction.status != "open":
            raise InteractionError(answered_already(interaction))
        root = s.store.root_of(interaction.run_id)
        # Recording an answer needs no tools, but for an edit, which the tool's schema validates.
        runs = s.continuing(
            root, model=model, broker=broker, all_tools=resume or isinstance(resolution, Edit)
        )
        if broker is not None:
            # Only the answer is committed here: the worker runs what it allows, with its own tools.
            asked = answer(s, interaction.id, resolution, by="cli")
            answered_for_workers(interaction, asked, all(s.queue.sent), json)
            return
        with progress(runs, root, shown=not json):
            answer(s, interaction.id, resolution, by="cli")
            if not resume:
                out.print(f"resolved {interaction.id}; run {root} continues with: {prog()} resume {root}")
                return
            advance_due(s)
    except UserError as exc:
        fail(str(exc))
        return
    report(Standing.of(runs, root), json=json, hint=command_hint(s, model))


def answered_already(interaction: Interaction) -> str:
    """What to say of an interaction that is not open any more: how it was answered, by whom and when."""
    if interaction.status == "expired":
        return f"interaction {interaction.id} expired (its run ended or moved on); nothing to answer"
    kind = (interaction.resolution or {}).get("kind", "answered")
    how = {"approve": "approved", "reject": "rejected", "edit": "approved with edited arguments"}.get(
        str(kind), "answered"
    )
    when = (
        datetime.fromtimestamp(interaction.resolved_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if interaction.resolved_at is not None
        else "an unknown time"
    )
    who = interaction.resolved_by or "someone"
    return (
        f"interaction {interaction.id} was already {how} by {who} at {when}; "
        f"nothing changed (see the run with: {prog()} status {interaction.run_id})"
    )


def _edited(edit: str | None) -> Resolution:
    """``--edit JSON``: the arguments to approve the call with instead (else a plain approval)."""
    if edit is None:
        return Approve()
    try:
        value = jsonlib.loads(edit)
    except jsonlib.JSONDecodeError as exc:
        value, problem = None, f"not JSON: {exc.msg} at column {exc.colno}"
    except ValueError as exc:
        value, problem = None, number_too_long(exc)
    else:
        problem = f"expected a JSON object of the tool's arguments, got {type(value).__name__}"
    if not isinstance(value, dict):
        fail(f"--edit: {problem}")
        return Approve()  # not reached: fail() exits
    return Edit(arguments=value)


def approve_command(
    ctx: typer.Context,
    interaction: IdArg,
    edit: Annotated[
        str | None,
        typer.Option(
            "--edit",
            help="Approve the call with these arguments instead, a JSON object (validated against the "
            "tool's schema before anything runs).",
        ),
    ] = None,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    model: ModelOpt = None,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Approve an open interaction (a consent request or an approval gate), as asked or with --edit."""
    resolution = _edited(edit)
    s = session(ctx, config=config, store=store, tools=tools, existing=True)
    _resolve(s, interaction, resolution, resume=resume, json=json, model=model, broker=broker)


def reject_command(
    ctx: typer.Context,
    interaction: IdArg,
    reason: Annotated[str, typer.Option(help="Why.")] = "",
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    model: ModelOpt = None,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Reject an open interaction, with a reason."""
    s = session(ctx, config=config, store=store, tools=tools, existing=True)
    _resolve(s, interaction, Reject(reason=reason), resume=resume, json=json, model=model, broker=broker)


def answer_command(
    ctx: typer.Context,
    interaction: IdArg,
    text: Annotated[str, typer.Argument(help="The answer.")],
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    model: ModelOpt = None,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Answer an open question."""
    s = session(ctx, config=config, store=store, tools=tools, existing=True)
    _resolve(s, interaction, Answer(text=text), resume=resume, json=json, model=model, broker=broker)


def complete_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run.")],
    step: Annotated[str, typer.Argument(help="The manual step to complete.")],
    output: Annotated[str, typer.Option(help="The step's output, a JSON object.")] = "{}",
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Complete a formula's manual step with an output, then continue the run."""
    try:
        value = jsonlib.loads(output)
    except jsonlib.JSONDecodeError as exc:
        fail(f"--output: not JSON: {exc.msg} at column {exc.colno}")
        return
    except ValueError as exc:
        fail(f"--output: {number_too_long(exc)}")
        return
    if not isinstance(value, dict):
        fail(f"--output: expected a JSON object, got {type(value).__name__}")
        return
    s = session(ctx, config=config, store=store, tools=tools, existing=True)
    try:
        root = s.store.root_of(s.store.get_run(run_id).id)
        runs = s.continuing(root)
        s.engines().formulas.runner.complete_step(run_id, step, value)
        if not resume:
            out.print(f"completed {step}; continue with: {prog()} resume {run_id}")
            return
        with progress(runs, root, shown=not json):
            advance(runs, root)
    except UserError as exc:
        fail(str(exc))
        return
    report(Standing.of(runs, root), json=json, hint=command_hint(s))


def cancel_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run.")],
    reason: Annotated[str, typer.Option(help="Why.")] = "cancelled from the command line",
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Cancel a run that has not ended, with its sub-runs (a formula's steps' agents among them); its open
    question expires."""
    s = session(ctx, config=config, store=store, existing=True)
    try:
        asyncio.run(_cancel(s.runs(), s.store.get_run(run_id), reason))
    except UserError as exc:
        fail(str(exc))
        return
    err.print(f"cancelled {run_id}")


async def _cancel(runs: Runs, run: RunRecord, reason: str) -> None:
    try:
        await runs.cancel(run, reason)
    finally:
        # A cancelled sub-run's root is asked to notice: that is for whoever resumes it, not this command.
        await runs.close()


__all__ = ["register"]
