"""``plangate run FORMULA`` and ``plangate agent "PROMPT"``: start a run, then drive it here or hand it on.

For: the two commands that create runs. Each has its own options, for the kind of run it creates (a
formula's vars and search path; an agent's prompt, mode and rounds); once the run exists, both go the one
way every run goes: handed to the workers with ``--broker``, else advanced here under live progress, with
consent and questions asked in the terminal unless ``--detach``, then reported (``_drive.py``,
``_report.py``). Not for: any run logic (the engines).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from plangate.agent import Mode
from plangate.cli._console import fail, parse_vars
from plangate.cli._drive import asks_here, drive, progress
from plangate.cli._options import (
    BrokerOpt,
    ConfigOpt,
    DetachOpt,
    InteractiveOpt,
    JsonOpt,
    ModelOpt,
    PathOpt,
    StoreOpt,
    ToolsOpt,
)
from plangate.cli._report import Standing, command_hint, queued, report
from plangate.cli._session import OWNER, Session, session
from plangate.cli._working import say_if_busy
from plangate.errors import UserError
from plangate.formulas.plan import AgentExecutor, LlmExecutor, Plan

YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Run write steps without asking for consent (always_execute; recorded in the run's events).",
    ),
]
StepModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model of agent and llm steps that name none (default: $PLANGATE_MODEL, else the default).",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="Print only the run's id (for scripts: run=$(plangate run NAME --detach -q))."
    ),
]
ModeOpt = Annotated[str, typer.Option(help="auto (route first), plan (always plan) or react (no plan).")]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, help="Input and output tokens the run may use ([budget])."),
]
MaxCostOpt = Annotated[
    float | None, typer.Option("--max-cost", min=0.0, help="The most the run may cost, by [prices].")
]
DoneWhenOpt = Annotated[
    str | None,
    typer.Option(
        "--done-when",
        help="The goal as a condition over the run's receipts, checked after each one, e.g. "
        "\"receipts.any(tool == 'place' and success)\".",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``agent`` to ``app``."""
    app.command("run")(run_command)
    app.command("agent")(agent_command)


def run_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A formula name, or a path to a formula file.")],
    var: Annotated[
        list[str] | None, typer.Option("--var", help="A var value, NAME=VALUE (repeatable).")
    ] = None,
    path: PathOpt = None,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    model: StepModelOpt = None,
    yes: YesOpt = False,
    quiet: QuietOpt = False,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_cost: MaxCostOpt = None,
) -> None:
    """Run a formula: live progress, and questions asked here when a person is needed (a write step asks
    for consent to its exact call first, unless the step says consent = "auto" or --yes is given). With
    --max-tokens / --max-cost, its llm steps and the agents and sub-formulas its steps start share one budget.

    With --broker, the run is checked, stored and handed to the workers (`plangate worker`); the command
    returns at once."""
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        s.tools()
        formulas = s.engines(s.step_model(model), search_paths=path).formulas
        s.runs(broker)  # a bad --broker is refused before anything is stored
        plan = formulas.runner.plan(name, parse_vars(var))
        if broker is None and not (json or quiet):
            _say_step_model(s, plan, model)
        run_id = formulas.create(plan, OWNER, always_execute=yes, max_tokens=max_tokens, max_cost=max_cost)
        _go_on(s, run_id, broker, json=json, quiet=quiet, ask_here=asks_here(interactive, detach or quiet))
    except UserError as exc:
        fail(str(exc))
        return
    if broker is None:
        report(Standing.of(s.runs(), run_id), json=json, hint=command_hint(s, model), quiet=quiet)


def agent_command(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: ModelOpt = None,
    tools: ToolsOpt = None,
    mode: ModeOpt = "auto",
    max_rounds: Annotated[int, typer.Option("--max-rounds", help="Planning and execute calls allowed.")] = 60,
    always_execute: Annotated[
        bool, typer.Option("--always-execute", help="Run write tools without asking for consent.")
    ] = False,
    detach: DetachOpt = False,
    done_when: DoneWhenOpt = None,
    interactive: InteractiveOpt = None,
    store: StoreOpt = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON for scripts (no live events).")
    ] = False,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_cost: MaxCostOpt = None,
) -> None:
    """Run an agent: live events, and consent and questions asked here when a person is needed.

    With --broker, the run is stored and handed to the workers (`plangate worker`); the command returns at
    once."""
    if mode not in ("auto", "plan", "react"):
        fail(f"--mode: expected auto, plan or react; found {mode!r}")
    chosen_mode: Mode = "plan" if mode == "plan" else ("react" if mode == "react" else "auto")
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        chosen = s.model(model)
        if broker is None:
            say_if_busy(chosen, json=json)
        s.tools()
        agents = s.engines(chosen).agents
        s.runs(broker)  # a bad --broker is refused before anything is stored
        run_id = agents.create(
            prompt,
            OWNER,
            max_rounds=max_rounds,
            mode=chosen_mode,
            always_execute=always_execute,
            done_when=done_when,
            max_tokens=max_tokens,
            max_cost=max_cost,
        )
        _go_on(s, run_id, broker, json=json, ask_here=asks_here(interactive, detach))
    except UserError as exc:
        fail(str(exc))
        return
    if broker is None:
        report(Standing.of(s.runs(), run_id), json=json, hint=command_hint(s, model or chosen.name))


def _go_on(
    s: Session, run_id: str, broker: str | None, *, json: bool, ask_here: bool, quiet: bool = False
) -> None:
    """After a run is created: hand it to the workers (``--broker``; nothing runs here), or drive it here
    under live progress (none with ``--json`` or ``--quiet``)."""
    runs = s.runs(broker)
    if broker is not None:
        asyncio.run(runs.advance(run_id))  # the facade hands it to the workers' queue
        sent = all(s.queue.sent)
        if quiet:
            print(run_id)
        else:
            queued(run_id, sent, json)
        return
    with progress(runs, run_id, shown=not (json or quiet)):
        drive(s, run_id, ask_here=ask_here)


def _say_step_model(s: Session, plan: Plan, model: str | None) -> None:
    """Name the model that the plan's agent and llm steps without a model of their own will use."""
    if any(
        isinstance(step.executor, AgentExecutor | LlmExecutor) and step.executor.model is None
        for step in plan.steps
    ):
        s.model(model, of="model of agent and llm steps")


__all__ = ["agent_command", "register", "run_command"]
