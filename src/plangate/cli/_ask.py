"""``plangate ask "QUESTION" --data PATH_OR_URL``: a copilot turn in a terminal.

For: running a turn and showing it as it happens, with rich: the formula growing op by op, the check's
issues, the run's progress step by step, the review's signals, then the answer and the rows it rests on;
``--json`` prints the turn as one JSON object instead; ``--save NAME`` writes its formula to
``formulas/NAME.formula.toml`` (a name that cannot be saved is refused before the turn runs). Exit status: 0
for a ``done`` or ``partial`` turn, 1 for ``unusable`` or ``failed`` or a save that failed, 2 for a mistake,
130 when interrupted. Not for: any turn logic (``plangate.copilot``).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import re
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import urlsplit

import typer
from pydantic import JsonValue
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from plangate.cli._console import err, fail, out, print_json
from plangate.cli._options import ConfigOpt, JsonOpt, ModelOpt, StoreOpt
from plangate.cli._report import usage_text
from plangate.cli._session import session
from plangate.cli._working import Working, say_if_busy
from plangate.config import Config
from plangate.copilot import AskStream, Copilot, Turn
from plangate.copilot.saving import save_formula, save_path
from plangate.errors import UserError
from plangate.events import Event, OpEvent, ReviewEvent, StatusEvent, StepStateEvent
from plangate.tools.data import DataSources, shown_cell
from plangate.tools.data.postgres import URL_SCHEMES

_SEVERITY = {"broken": "red", "degraded": "yellow", "benign": "dim", "ok": "green"}
_STATUS = {"done": "green", "partial": "yellow", "unusable": "red", "failed": "red", "cancelled": "dim"}
_STEP = {"complete": "green", "failed": "red", "skipped": "dim", "running": "cyan", "cancelled": "dim"}
_ROWS_SHOWN = 20
_NAME = re.compile(r"[^A-Za-z0-9_-]+")

DataOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        "-d",
        help="A SQLite file, a postgresql:// URL (of a read-only role) or the name of a [[sources]] entry "
        "of plangate.toml; default: the bundled shop data.",
    ),
]
PrivilegedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-privileged",
        help="Query a PostgreSQL URL even though its role can do more than read (a superuser, one that "
        "can write): only for a database you accept the risk on.",
    ),
]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="The name to register the data under; default: the file's stem.")
]
ConversationOpt = Annotated[
    str | None, typer.Option("--conversation", "-c", help="Continue this conversation (its id).")
]
SaveOpt = Annotated[
    str | None, typer.Option("--save", help="Write the turn's formula to formulas/NAME.formula.toml.")
]
ReviewOpt = Annotated[
    bool, typer.Option("--review", help="Let the model also review answers the rules flagged.")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, help="Input and output tokens the turn may use ([budget])."),
]
MaxCostOpt = Annotated[
    float | None, typer.Option("--max-cost", min=0.0, help="The most the turn may cost, by [prices].")
]


def register(app: typer.Typer) -> None:
    """Add ``ask`` to ``app``."""
    app.command("ask")(ask_command)


def _step_text(step: object) -> str:
    if not isinstance(step, dict):
        return ""
    for kind in ("tool", "llm", "agent", "human", "formula"):
        spec = step.get(kind)
        if isinstance(spec, dict):
            if kind == "tool":
                args = spec.get("args") if isinstance(spec.get("args"), dict) else {}
                brief = jsonlib.dumps(args, ensure_ascii=False)
                return f"{spec.get('name')} {brief if len(brief) <= 160 else brief[:159] + '…'}"
            prompt = str(spec.get("prompt", "")).replace("\n", " ")
            return f"{kind}: {prompt if len(prompt) <= 80 else prompt[:79] + '…'}"
    return "no executor"


def op_line(op: Mapping[str, object]) -> str | None:
    """The terminal line of one op (rich markup), or None for ops not worth a line."""
    name = op.get("op")
    error = f" [red]({escape(str(op['error']))})[/]" if op.get("error") else ""
    if name == "plan":
        return f"[bold]plan[/] {escape(str(op.get('summary', '')))}"
    if name == "look":
        return f"[blue]look[/] {escape(str(op.get('table', '')))}"
    if name == "add_step":
        step = op.get("step")
        step_id = step.get("id") if isinstance(step, dict) else "?"
        return f"[green]+ {escape(str(step_id))}[/] {escape(_step_text(step))}{error}"
    if name == "update_step":
        fields = ", ".join(k for k in op if k not in ("op", "id", "error", "attempt"))
        return f"[yellow]~ {escape(str(op.get('id')))}[/] {escape(fields)}{error}"
    if name == "remove_step":
        return f"[red]- {escape(str(op.get('id')))}[/]{error}"
    if name == "done":
        return f"[bold]done[/] {escape(str(op.get('explanation', '')))}"
    if name in ("reply", "ask"):
        return f"[bold]{name}[/] {escape(str(op.get('text', '')))}"
    return None


def event_line(event: Event, ask_run: str) -> str | None:
    """The terminal line of a turn's event (rich markup), or None."""
    if isinstance(event, OpEvent):
        return op_line(event.op)
    if isinstance(event, ReviewEvent):
        if not event.signals:
            return "[green]review: clean[/]"
        # Only the severity: the review's verdict is the rules' wish, and the policy decides whether a retry
        # follows (its own "retrying" line says so), so a "retry" here could announce one that never comes.
        lines = [f"[bold]review[/] ({event.severity or 'ok'})"]
        for signal in event.signals:
            style = _SEVERITY.get(str(signal.get("severity")), "white")
            lines.append(
                f"  [{style}]{escape(str(signal.get('kind')))}[/]: {escape(str(signal.get('detail')))}"
            )
        return "\n".join(lines)
    if isinstance(event, StepStateEvent):
        if event.status not in ("running", "complete", "failed", "skipped", "cancelled"):
            return None
        style = _STEP.get(event.status, "white")
        reason = f": {escape(event.reason)}" if event.reason and event.status != "running" else ""
        return f"  [{style}]{escape(event.step_id)} {event.status}[/]{reason}"
    if isinstance(event, StatusEvent) and event.run_id == ask_run:
        return _status_line(event)
    return None


def _status_line(event: StatusEvent) -> str | None:
    text = escape(event.text)
    if event.stage == "generate" and event.code == "attempt":
        return f"\n[bold cyan]{text}[/]"
    if event.stage == "check":
        return f"[yellow]check: {text}[/]" if event.code == "issues" else f"[green]check passed[/] ({text})"
    if event.stage == "run" and event.code == "started":
        return f"[cyan]run[/] {text}"
    if event.stage == "run":
        style = "green" if event.code == "completed" else "red"
        return f"[{style}]run {escape(event.code)}[/]: {text}"
    if event.stage == "review" and event.code == "retry":
        return f"[yellow]retrying[/]: {text}"
    if event.stage == "scope":
        return f"[red]data: {text}[/]"
    return None


async def _follow(stream: AskStream) -> None:
    """Print the turn's lines as they come, a spinner below them (on a terminal) naming its phase."""
    with Working("starting") as working:
        async for event in stream:
            working.note(event)
            line = event_line(event, stream.run_id)
            if line is not None:
                out.print(line)


def _show(turn: Turn, usage: Mapping[str, JsonValue] | None) -> None:
    style = _STATUS.get(turn.status, "white")
    body = escape(turn.answer) if turn.answer else f"[dim]no answer:[/] {escape(turn.reason)}"
    subtitle = escape(turn.reason) if turn.answer and turn.status != "done" else None
    out.print(Panel(body, title=f"[{style}]{turn.status}[/]", subtitle=subtitle, expand=False))
    if turn.result.columns and turn.answer:
        table = Table(*turn.result.columns, show_lines=False)
        for row in turn.result.rows[:_ROWS_SHOWN]:
            table.add_row(*(escape(shown_cell(value)) for value in row))  # as the console shows them
        out.print(table)
        if len(turn.result.rows) > _ROWS_SHOWN:
            out.print(f"[dim]… {len(turn.result.rows) - _ROWS_SHOWN:,} more rows[/]")
    shown = "" if usage is None else f" · {usage_text(usage)}"  # its own calls and its formula runs'
    out.print(f"[dim]turn {turn.id} · conversation {turn.conversation_id} · run {turn.run_id}{shown}[/]")


def _sources(
    config: Config, data: str | None, name: str | None, allow_privileged: bool
) -> tuple[DataSources | None, str | None]:
    """The source ``data`` names in plangate.toml's ``[[sources]]``, or a URL opened as the flags say, and
    the name to ask about; (None, ``data``) when the copilot should open ``data`` itself (a file, a URL,
    the bundled data)."""
    declared = next((entry for entry in config.sources if entry.name == data), None)
    if declared is not None:
        target = declared.target()
        if urlsplit(target).scheme not in URL_SCHEMES:
            target = str(config.resolve(target.removeprefix("sqlite://")))
        sources = DataSources()
        sources.register(
            declared.name,
            target,
            schemas=declared.schemas,
            allow_privileged=declared.allow_privileged or allow_privileged,
            semantic=config.semantic_of(declared),
        )
        return sources, declared.name
    if data is not None and allow_privileged and urlsplit(data.strip()).scheme in URL_SCHEMES:
        sources = DataSources()
        chosen = name or _NAME.sub("_", urlsplit(data.strip()).path.strip("/")).strip("_") or "postgres"
        sources.register(chosen, data.strip(), allow_privileged=True)
        return sources, chosen
    return None, data


def ask_command(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question about the data.")],
    data: DataOpt = None,
    model: ModelOpt = None,
    conversation: ConversationOpt = None,
    save: SaveOpt = None,
    name: NameOpt = None,
    store: StoreOpt = None,
    review: ReviewOpt = False,
    json: JsonOpt = False,
    allow_privileged: PrivilegedOpt = False,
    config: ConfigOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_cost: MaxCostOpt = None,
) -> None:
    """Ask a question about data: the copilot builds a formula, checks, runs and reviews it, then answers."""
    s = session(ctx, config=config, store=store)
    try:
        if save is not None:
            save_path(save)  # a name that cannot be saved is refused before the model is called
        chosen = s.model(model, of="copilot model")
        say_if_busy(chosen, json=json)
        sources, data = _sources(s.config, data, name, allow_privileged)
        if sources is not None:
            name = None  # the source is registered under its name already
        copilot = Copilot(
            model=chosen,
            store=s.store,
            model_review=review,
            sources=sources,
            prices=s.config.prices,
            **s.config.budget.for_run(max_tokens, max_cost),
        )
        if json:
            turn = copilot.ask(question, data, conversation=conversation, name=name)
        else:
            stream = copilot.stream(question, data, conversation=conversation, name=name)
            asyncio.run(_follow(stream))
            if stream.turn is None:
                fail("the turn ended without a result")
                return
            turn = stream.turn
    except KeyboardInterrupt:
        err.print("[dim]interrupted: the turn is stored as cancelled[/]")
        raise typer.Exit(130) from None
    except UserError as exc:
        fail(str(exc))
        return
    saved = unsaved = None
    if save is not None:
        try:
            saved = save_formula(turn, save)
        except UserError as exc:
            unsaved = str(exc)
            err.print(f"[bold red]error:[/] {escape(unsaved)}")
    if json:
        data_out = turn.to_json()
        if saved is not None:
            data_out["saved"] = str(saved)
        print_json(data_out)
    else:
        _show(turn, turn.usage)
        if saved is not None:
            out.print(f"formula saved to [bold]{escape(str(saved))}[/]")
    if turn.status not in ("done", "partial") or unsaved is not None:
        raise typer.Exit(1)  # a script sees that the turn, or the save it asked for, did not succeed


__all__ = ["ask_command", "event_line", "op_line", "register"]
