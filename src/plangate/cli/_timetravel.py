"""``plangate fork | retry | replay | diff``: go back in a run's history, try again, replay it, compare runs.

For: the commands of time travel. ``fork`` creates a new run through the ``Runs`` facade (``Runs.fork``)
whose history is the origin's up to a round, then drives it here as ``agent`` does (consent asked in the
terminal unless ``--detach``; a write at or after the fork point is asked for again, in the new run);
``retry`` does the same for a formula run from a step (``Runs.fork`` with ``from_step``); ``replay`` plays
a finished run back offline against its record, whatever its kind (``Runs.replay``); ``diff`` prints
two runs side by side, aligned by round or step, with the first divergence marked (``plangate.runs.diff``).
Not for: any run logic (the engines).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
from typing import Annotated

import typer
from pydantic import JsonValue
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import fail, out
from plangate.cli._drive import asks_here, drive, progress
from plangate.cli._options import (
    ConfigOpt,
    DetachOpt,
    InteractiveOpt,
    JsonOpt,
    PathOpt,
    StoreOpt,
    ToolsOpt,
)
from plangate.cli._report import Standing, command_hint, report
from plangate.cli._session import session
from plangate.errors import ConfigError, UserError, number_too_long
from plangate.runs.diff import Diff, diff_runs

AtOpt = Annotated[int | None, typer.Option("--at", help="Fork before this round (from 1).")]
AtEventOpt = Annotated[
    int | None, typer.Option("--at-event", help="Fork at the start of the round that holds this event (seq).")
]
InstructionOpt = Annotated[
    str | None, typer.Option("--instruction", "-i", help="Words appended to the conversation at the fork.")
]
ForkModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="The fork's model (default: the origin's).")
]
ArgsOpt = Annotated[
    str | None,
    typer.Option(
        "--args",
        help="New arguments (a JSON object) for the tool call of that round: it runs again with them, a "
        "write only with fresh consent.",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Print only the new run's id; ask nothing here (it waits instead)."),
]
YesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Run the fork's writes without asking (recorded in its settings).")
]


FromOpt = Annotated[
    str, typer.Option("--from", help="The step to run again, with every step downstream of it.")
]
ChangedOpt = Annotated[
    str | None,
    typer.Option(
        "--formula-changed",
        help="When the formula's file changed since the run: use-new (the file as it is now) or use-recorded "
        "(the plan the run ran).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``fork``, ``retry``, ``replay`` and ``diff`` to ``app``."""
    app.command("fork")(fork_command)
    app.command("retry")(retry_command)
    app.command("replay")(replay_command)
    app.command("diff")(diff_command)


def fork_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to fork.")],
    at: AtOpt = None,
    at_event: AtEventOpt = None,
    instruction: InstructionOpt = None,
    model: ForkModelOpt = None,
    args: ArgsOpt = None,
    always_execute: YesOpt = False,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Fork an agent run before a round: a new run with its history up to there, continued here.

    Writes completed before the fork point are not made again; one at or after it asks for consent in the
    new run, whatever the origin's person approved."""
    request: dict[str, JsonValue] = {"always_execute": always_execute}
    for key, value in (
        ("at_round", at),
        ("at_event", at_event),
        ("instruction", instruction),
        ("model", model),
    ):
        if value is not None:
            request[key] = value
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        if args is not None:
            request["arguments"] = _arguments(args)
        runs = s.continuing(run_id, model=model)
        fork_id = asyncio.run(runs.fork(run_id, request))
        s.queue.take()  # advanced here, by drive
        with progress(runs, fork_id, shown=not (json or quiet)):
            drive(s, fork_id, ask_here=asks_here(interactive, detach or quiet))
    except UserError as exc:
        fail(str(exc))
        return
    report(Standing.of(runs, fork_id), json=json, hint=command_hint(s, model), quiet=quiet)


def retry_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The formula run to retry.")],
    step: FromOpt,
    formula_changed: ChangedOpt = None,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    path: PathOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Retry a formula run from a step: a new run of the same formula and vars in which the steps that do
    not depend on it keep their results, and it and everything downstream run again (a write step asks for
    consent again, unless the run was started with --yes)."""
    request: dict[str, JsonValue] = {"from_step": step}
    if formula_changed is not None:
        request["formula_changed"] = formula_changed
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        runs = s.continuing(run_id, search_paths=path)  # where the formula is cooked again from
        retried = asyncio.run(runs.fork(run_id, request))
        s.queue.take()  # advanced here, by drive
        with progress(runs, retried, shown=not (json or quiet)):
            drive(s, retried, ask_here=asks_here(interactive, detach or quiet))
    except UserError as exc:
        fail(str(exc))
        return
    report(Standing.of(runs, retried), json=json, hint=command_hint(s, None), quiet=quiet)


def _arguments(text: str) -> dict[str, JsonValue]:
    """``--args`` as a JSON object.

    Raises:
        ConfigError: it is not JSON, or not an object.
    """
    try:
        value = jsonlib.loads(text)
    except jsonlib.JSONDecodeError as exc:
        raise ConfigError(f"--args: not JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise ConfigError(f"--args: {number_too_long(exc)}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--args: expected a JSON object, got {type(value).__name__}")
    return dict(value)


def diff_command(
    ctx: typer.Context,
    run_a: Annotated[str, typer.Argument(help="The first run.")],
    run_b: Annotated[str, typer.Argument(help="The second run.")],
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Two runs side by side, aligned by round (agents) or step (formulas), the first divergence marked."""
    s = session(ctx, config=config, store=store)
    try:
        found = diff_runs(s.store, run_a, run_b)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print(jsonlib.dumps(found.as_json(), ensure_ascii=False, indent=2))
        return
    _print_diff(found)


def replay_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The finished run to replay (agent, or root formula run).")],
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    path: PathOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Replay a finished run offline (its recorded model outputs, tool results and answers; no write is
    called) and report the first point where the runtime now behaves differently; exit 1 if it does."""
    s = session(ctx, config=config, store=store, tools=tools)
    try:
        runs = s.continuing(run_id, search_paths=path)  # every tool the run needs, for its schema
        verdict = asyncio.run(runs.replay(run_id))
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print(jsonlib.dumps(verdict.as_json(), ensure_ascii=False, indent=2))
    elif verdict.reproduced:
        found = verdict.diff
        points = sum(1 for row in found.rows if row.key != "outcome")
        out.print(f"run {run_id} reproduced: {points} {found.unit}(s), the same calls, results and outcome")
    else:
        _print_diff(verdict.diff)
    if not verdict.reproduced:
        raise typer.Exit(1)


def _print_diff(found: Diff) -> None:
    table = Table(title=f"{found.run_a} vs {found.run_b} (aligned by {found.unit})", show_lines=False)
    table.add_column(found.unit)
    table.add_column(found.run_a)
    table.add_column(found.run_b)
    table.add_column("")
    for row in found.rows:
        mark = "[bold red]<- first divergence[/]" if row.key == found.first else ("≠" if row.differs else "")
        table.add_row(escape(row.key), escape(row.a or "—"), escape(row.b or "—"), mark)
    out.print(table)
    if found.first is None:
        out.print("the runs do not diverge")
    else:
        out.print(f"first divergence at {found.unit} {found.first}: {escape(found.why)}")


__all__ = ["diff_command", "fork_command", "register"]
