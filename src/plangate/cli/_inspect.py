"""``plangate status | runs | events``: look at stored runs without changing them.

For: a run's record with what its engine describes of it (a steps table when it has steps), its parentage
both ways (the run it was forked or retried from, its forks and retries) and its open interactions; the
list of runs (a run's forks and retries with ``--origin``); a run's events, printed once or followed until
it ends, as text or one JSON object a line. Not for: acting on a run (``_continue.py``) or the live lines of
a run advanced here (``_events.py``).
"""

from __future__ import annotations

import json as jsonlib
import time
from typing import Annotated

import typer
from pydantic import JsonValue
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import fail, out, print_json, prog
from plangate.cli._events import STEP_STYLE
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt
from plangate.cli._report import described_steps
from plangate.cli._session import session
from plangate.errors import UserError
from plangate.events import (
    Event,
    GateEvent,
    InteractionOpenedEvent,
    OutcomeEvent,
    StatusEvent,
    StepStateEvent,
    event_to_dict,
)
from plangate.runs import Lineage
from plangate.store import TERMINAL_STATUSES


def register(app: typer.Typer) -> None:
    """Add ``status``, ``runs`` and ``events`` to ``app``."""
    app.command("status")(status_command)
    app.command("runs")(runs_command)
    app.command("events")(events_command)


def status_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Show a run: its status, the run it was forked or retried from and its own forks and retries, each of
    its steps (when it has steps) with its state and why, and its open interactions."""
    s = session(ctx, config=config, store=store, existing=True)
    try:
        run = s.store.get_run(run_id)
        steps = described_steps(s.runs(), run)
        lineage = s.runs().lineage(run)
        interactions = s.store.list_interactions(status="open", run_id=run_id)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        by_id: dict[str, JsonValue] = {
            str(step["id"]): {key: value for key, value in step.items() if key != "id"} for step in steps
        }
        print_json(
            {
                "run": run.model_dump(mode="json"),
                "steps": by_id or None,
                "interactions": [i.model_dump(mode="json") for i in interactions],
                **lineage.as_json(),
            }
        )
        return
    out.print(f"run [bold]{run.id}[/] ({run.kind} {escape(run.name)}): {run.status}")
    for line in _lineage_lines(run.id, lineage):
        out.print(line)
    if steps:
        table = Table("step", "state", "why")
        for step in steps:
            status = str(step.get("status"))
            table.add_row(
                escape(str(step["id"])),
                f"[{STEP_STYLE.get(status, 'white')}]{status}[/]",
                escape(str(step.get("reason") or "")),
            )
        out.print(table)
    for interaction in interactions:
        out.print(
            f"open interaction [bold]{interaction.id}[/] ({interaction.kind}): {escape(interaction.prompt)}"
        )


_WORDS = {"fork": ("forked from", "forks"), "retry": ("retried from", "retries")}


def _lineage_lines(run_id: str, lineage: Lineage) -> list[str]:
    """``forked from run_a before round 2``; ``forks: run_b (completed, before round 1), …``."""
    lines: list[str] = []
    if lineage.origin is not None:
        said = _WORDS[lineage.origin.relation][0]
        lines.append(f"{said} [bold]{lineage.origin.run_id}[/] {escape(lineage.origin.at)}")
    for relation, (_, plural) in _WORDS.items():
        made = [(child, origin) for child, origin in lineage.derived if origin.relation == relation]
        if made:
            listed = ", ".join(f"{child.id} ({child.status}, {escape(origin.at)})" for child, origin in made)
            lines.append(f"{plural}: {listed}")
    if lineage.more:
        lines.append(f"  and more: {prog()} runs --origin {run_id}")
    return lines


def runs_command(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    origin: Annotated[str | None, typer.Option(help="Only the forks and retries of this run.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 20,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List runs, newest first."""
    s = session(ctx, config=config, store=store, existing=True)
    try:
        page = s.store.list_runs(status=status, limit=limit, origin_run_id=origin)  # type: ignore[arg-type]
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json([r.model_dump(mode="json") for r in page.items])
        return
    table = Table("run", "kind", "name", "status", "updated")
    for r in page.items:
        table.add_row(
            r.id,
            r.kind,
            escape(r.name),
            r.status,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.updated_at)),
        )
    out.print(table)


def _event_line(event: Event) -> str:
    data = event_to_dict(event)
    for key in ("run_id", "seq", "at", "type"):
        data.pop(key, None)
    if isinstance(event, StepStateEvent):
        return f"{event.step_id} → {event.status}" + (f": {event.reason}" if event.reason else "")
    if isinstance(event, GateEvent):
        return f"gate {event.step_id}: {'open' if event.satisfied else 'closed'} ({event.reason})"
    if isinstance(event, StatusEvent):
        return f"[{event.stage}] {event.code}" + (f": {event.text}" if event.text else "")
    if isinstance(event, InteractionOpenedEvent):
        return f"asks ({event.kind}, {event.interaction_id}): {event.prompt}"
    if isinstance(event, OutcomeEvent):
        return f"{event.status} ({event.stage} · {event.code}): {event.user_message}"
    return jsonlib.dumps(data, ensure_ascii=False, default=str)


def events_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run whose events to print.")],
    after: Annotated[int, typer.Option(help="Only events with a seq above this.")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until the run ends.")
    ] = False,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Print a run's events (one JSON object per line with --json)."""
    s = session(ctx, config=config, store=store, existing=True)
    try:
        opened = s.store
        opened.get_run(run_id)
        while True:
            for event in opened.events(run_id, after=after):
                after = event.seq
                if json:
                    print(jsonlib.dumps(event_to_dict(event), ensure_ascii=False, default=str), flush=True)
                else:
                    out.print(f"[dim]{event.seq:>4}[/] [bold]{event.type}[/] {escape(_event_line(event))}")
            run = opened.get_run(run_id)
            if not follow or run.status in TERMINAL_STATUSES:
                return
            time.sleep(0.2)
    except UserError as exc:
        fail(str(exc))


__all__ = ["register"]
