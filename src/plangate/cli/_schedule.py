"""``plangate schedule add | list | pause | resume | delete``: formula runs on a schedule.

For: the operator's view of the store's schedules (``runs/schedules.py``): a formula with its vars on a cron
expression (``--cron "0 9 * * MON" --timezone Europe/Paris``) or an interval (``--every 30s``), with its
missed-slot and overlap policies. Every ``plangate serve`` and ``plangate worker`` on the store fires them.
Not for: firing them (``runs/scheduler.py``).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import fail, out, parse_vars, print_json
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt
from plangate.cli._session import session
from plangate.errors import UserError
from plangate.runs.schedules import Schedule, Schedules, next_slot, parse_every

OwnerOpt = Annotated[str, typer.Option(help="The owner the schedule's runs belong to.")]
RefArg = Annotated[str, typer.Argument(help="The schedule's name (or id).")]


def register(app: typer.Typer) -> None:
    """Add the ``schedule`` group to ``app``."""
    group = typer.Typer(
        name="schedule", help="Run formulas on a schedule (every server and worker fires them)."
    )
    group.command("add")(schedule_add)
    group.command("list")(schedule_list)
    group.command("pause")(schedule_pause)
    group.command("resume")(schedule_resume)
    group.command("delete")(schedule_delete)
    app.add_typer(group, name="schedule", no_args_is_help=True)


def schedule_add(
    ctx: typer.Context,
    formula: Annotated[str, typer.Argument(help="The formula to run (by name, as servers find it).")],
    cron: Annotated[str | None, typer.Option(help="A cron expression: '0 9 * * MON'.")] = None,
    every: Annotated[str | None, typer.Option(help="An interval instead: 30s, 5m, 1h30m.")] = None,
    var: Annotated[
        list[str] | None, typer.Option("--var", metavar="NAME=VALUE", help="A formula variable; repeatable.")
    ] = None,
    timezone: Annotated[str, typer.Option(help="The cron expression's time zone.")] = "UTC",
    name: Annotated[str | None, typer.Option(help="The schedule's name (default: the formula's).")] = None,
    missed: Annotated[
        str, typer.Option(help="Slots missed while no server ran: skip, or catch_up (one run for them).")
    ] = "skip",
    overlap: Annotated[
        str, typer.Option(help="A slot while the previous slot's run still goes: skip, queue or allow.")
    ] = "skip",
    owner: OwnerOpt = "local",
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Add a schedule: FORMULA runs at each slot of --cron or --every."""
    s = session(ctx, config=config, store=store)
    try:
        seconds = parse_every(every) if every is not None else None
        added = Schedules(s.store).add(
            owner,
            name or formula,
            formula,
            vars=dict(parse_vars(var)),
            cron=cron,
            every=seconds,
            timezone=timezone,
            missed=missed,
            overlap=overlap,
        )
    except UserError as exc:
        fail(str(exc))
        return
    _show([added], json, one=True)


def schedule_list(
    ctx: typer.Context,
    owner: Annotated[str | None, typer.Option(help="Only this owner's schedules.")] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List schedules: when each fires, its policies, whether it is paused, its latest slot."""
    s = session(ctx, config=config, store=store)
    try:
        found = Schedules(s.store).listed(owner=owner)
    except UserError as exc:
        fail(str(exc))
        return
    _show(found, json)


def schedule_pause(
    ctx: typer.Context,
    ref: RefArg,
    owner: OwnerOpt = "local",
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Pause a schedule: no slot fires until it is resumed."""
    _set_paused(ctx, ref, True, owner, store, config)


def schedule_resume(
    ctx: typer.Context,
    ref: RefArg,
    owner: OwnerOpt = "local",
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Resume a schedule from now (the slots while it was paused never run)."""
    _set_paused(ctx, ref, False, owner, store, config)


def schedule_delete(
    ctx: typer.Context,
    ref: RefArg,
    owner: OwnerOpt = "local",
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Delete a schedule (the runs it started stay)."""
    s = session(ctx, config=config, store=store)
    try:
        gone = Schedules(s.store).delete(ref, owner=owner)
    except UserError as exc:
        fail(str(exc))
        return
    out.print(f"deleted schedule {escape(gone.name)} ({gone.id})")


def _set_paused(
    ctx: typer.Context, ref: str, paused: bool, owner: str, store: str | None, config: Path | None
) -> None:
    s = session(ctx, config=config, store=store)
    try:
        changed = Schedules(s.store).set_paused(ref, paused, owner=owner)
    except UserError as exc:
        fail(str(exc))
        return
    out.print(f"schedule {escape(changed.name)} ({changed.id}) {'paused' if paused else 'resumed'}")


def _when(schedule: Schedule) -> str:
    if schedule.cron is not None:
        return f"cron '{schedule.cron}' ({schedule.timezone})"
    return f"every {schedule.every:g} s"


def _show(schedules: list[Schedule], json: bool, *, one: bool = False) -> None:
    if json:
        items = [schedule.model_dump(mode="json") for schedule in schedules]
        print_json(items[0] if one else {"items": items})
        return
    if one:
        added = schedules[0]
        out.print(
            f"schedule [bold]{escape(added.name)}[/] ({added.id}): {escape(added.formula)} {_when(added)}"
        )
        return
    table = Table("name", "owner", "formula", "when", "missed", "overlap", "state", "last slot", "next slot")
    now = time.time()
    for schedule in schedules:
        last = _utc(schedule.last_slot)
        upcoming = next_slot(schedule, now)
        table.add_row(
            escape(schedule.name),
            escape(schedule.owner),
            escape(schedule.formula),
            escape(_when(schedule)),
            schedule.missed,
            schedule.overlap,
            "paused" if schedule.paused else "active",
            last,
            "" if upcoming is None else _utc(upcoming),
        )
    out.print(table)


def _utc(at: float) -> str:
    try:
        return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # past year 9999: an interval stored before it was capped
        return "never"
