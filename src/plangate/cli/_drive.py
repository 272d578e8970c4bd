"""Driving a run from the terminal, whatever its kind: its live progress, the questions asked here, and
advancing it here until it waits or ends.

For: ``Progress`` (a line per event worth reading, and a table of the run's steps when it has any: live on
a terminal, printed once elsewhere), ``ask`` (approve, reject with a reason or edit the arguments of a
consent request; the answer to a question), and ``drive`` / ``advance_due``: the root advanced by its
engine here and, while it waits on a person and the command may ask, the question asked, answered through
the ``Runs`` facade and the run advanced again. Not for: what a run does (the engines) or the report a
command ends with (``_report.py``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import NoReturn

import typer
from pydantic import JsonValue
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from plangate.cli import _prompts as prompts
from plangate.cli._console import err, out
from plangate.cli._events import STEP_STYLE, EventPrinter
from plangate.cli._report import QUESTIONS, answer_commands, command_hint, described_steps, open_questions
from plangate.cli._session import Session
from plangate.cli._working import Working
from plangate.errors import InteractionError, StaleInteraction
from plangate.events import GateEvent, StepStateEvent
from plangate.interactions import Answer, Approve, Edit, Reject, Resolution
from plangate.runs import Runs
from plangate.store import TERMINAL_STATUSES, Commit, Interaction, Store


class Progress:
    """A run's progress in the terminal: a line per event worth reading (its steps, tool calls and results,
    its agent steps' rounds and questions, the outcome with its reason) and, for a run with steps, a table
    of them, live on a terminal (the lines printed above it) and printed once at the end elsewhere.

    Args:
        store: the store whose commits to follow.
        root: the run shown (the runs under it are marked with their step).
        steps: its steps as its engine describes them (none: no table).
    """

    current: Progress | None = None

    def __init__(self, store: Store, root: str, steps: list[dict[str, JsonValue]]) -> None:
        self.store = store
        self.root = root
        self.rows = {
            str(step["id"]): (str(step.get("status")), str(step.get("reason") or "")) for step in steps
        }
        self.gates: dict[str, str] = {}
        self.live = Live(self._table(), console=out, refresh_per_second=8, transient=False)
        # on a terminal the live table shows each step's state; elsewhere a line says each change
        self.printer = EventPrinter(store, root, steps=not (out.is_terminal and self.rows))
        # a run without steps (an agent's) gets a spinner naming its phase instead, on a terminal only
        self.working = Working(shown=None if not self.rows else False)

    def __enter__(self) -> Progress:
        self.unsubscribe = self.store.subscribe(self._on_commit)
        self.printer.__enter__()
        if out.is_terminal and self.rows:
            self.live.start()
        self.working.resume()
        Progress.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        Progress.current = None
        self.working.pause()
        self.printer.__exit__()
        self.unsubscribe()
        if self.live.is_started:
            self.live.stop()
        elif self.rows:
            out.print(self._table())

    @staticmethod
    @contextmanager
    def paused() -> Iterator[None]:
        """Stop redrawing while the terminal asks a question (a live display would overwrite it)."""
        progress = Progress.current
        live = progress.live if progress is not None and progress.live.is_started else None
        if live is not None:
            live.stop()
        if progress is not None:
            progress.working.pause()
        try:
            yield
        finally:
            if live is not None:
                live.start()
            if progress is not None:
                progress.working.resume()

    @staticmethod
    def shown(interaction_id: str) -> bool:
        """Whether the question was printed already (opened in this process, while progress showed)."""
        progress = Progress.current
        return progress is not None and interaction_id in progress.printer.asked

    def _on_commit(self, commit: Commit) -> None:
        for event in commit.events:
            self.working.note(event)
            if event.run_id != self.root:
                continue  # a sub-run's or an agent step's: the table is the root's steps
            if isinstance(event, StepStateEvent):
                self.rows[event.step_id] = (event.status, event.reason)
            elif isinstance(event, GateEvent):
                self.gates[event.step_id] = event.reason
        if self.live.is_started:
            self.live.update(self._table())

    def _table(self) -> Table:
        table = Table(show_header=True, header_style="bold", expand=False)
        table.add_column("step")
        table.add_column("state")
        table.add_column("why")
        for step_id, (status, reason) in self.rows.items():
            style = STEP_STYLE.get(status, "white")
            why = reason or self.gates.get(step_id, "")
            table.add_row(escape(step_id), f"[{style}]{status}[/]", escape(why))
        return table


def progress(runs: Runs, root: str, *, shown: bool = True) -> AbstractContextManager[object]:
    """The live progress of ``root`` (nothing when not ``shown``: ``--json``)."""
    if not shown:
        return nullcontext()
    return Progress(runs.store, root, described_steps(runs, runs.store.get_run(root)))


# -- asking in the terminal -------------------------------------------------------------------------------


def ask(interaction: Interaction) -> Resolution:
    """Ask the person at the terminal: an answer to a question; approve, reject or edit for consent.

    Raises:
        NoAnswer: the terminal gave none (its input ended, or too many answers were none of the choices).
    """
    if interaction.kind in QUESTIONS:
        return Answer(text=prompts.text("[bold]your answer[/]"))
    choices: dict[str, tuple[str, ...]] = {"approve": prompts.APPROVE_WORDS, "reject": prompts.REJECT_WORDS}
    if interaction.tool is not None:
        choices["edit"] = prompts.EDIT_WORDS
    labels = "approve / reject / edit the arguments" if interaction.tool is not None else "approve / reject"
    choice = prompts.choose(f"[bold]{labels}[/]", choices, default="approve")
    if choice == "approve":
        return Approve()
    if choice == "reject":
        return Reject(reason=prompts.text("reason"))
    arguments = interaction.tool.arguments if interaction.tool is not None else {}
    return Edit(arguments=prompts.json_object("arguments (JSON)", arguments))


def asks_here(interactive: bool | None, detach: bool) -> bool:
    """Whether the command asks in the terminal: ``--interactive``, else when stdin is one; never with
    ``--detach``."""
    return (sys.stdin.isatty() if interactive is None else interactive) and not detach


# -- advancing here ---------------------------------------------------------------------------------------


def advance(runs: Runs, root: str) -> None:
    """Advance the root run here, by its engine, to its next wait or its end.

    Raises:
        RunLeased: another live process advances it; nothing changed.
    """
    run = runs.store.get_run(root)
    if run.status not in TERMINAL_STATUSES:
        asyncio.run(runs.engine(run).advance(root))


def advance_due(session: Session) -> None:
    """Advance here what the facade handed this command to advance (the root of a run just answered)."""
    runs = session.runs()
    for root in session.queue.take():
        advance(runs, root)


def answer(session: Session, interaction_id: str, resolution: Resolution, *, by: str) -> str:
    """Apply the answer through the facade (which commits it, or hands it to the process advancing the
    run); returns the run that asked. What it leaves to advance is advanced by :func:`advance_due`.

    Raises:
        StaleInteraction: it is not open any more; nothing changed.
        InteractionError: the resolution does not fit; nothing changed.
    """
    return asyncio.run(session.runs().answer(interaction_id, resolution, by=by))


def left_waiting(session: Session, root: str, interaction: Interaction, why: str) -> NoReturn:
    """Stop asking: say why, that the run waits (nothing is lost) and how to answer it, then exit with
    :data:`~plangate.cli._prompts.EXIT_NO_ANSWER`."""
    err.print(
        f"[bold yellow]stopped asking:[/] {escape(why)}. Run {root} is left waiting on {interaction.id}; "
        f"answer it with: {escape(answer_commands(interaction, command_hint(session)))}"
    )
    raise typer.Exit(prompts.EXIT_NO_ANSWER)


def drive(session: Session, root: str, *, ask_here: bool) -> None:
    """Advance the root here and, while it waits on a person and we may ask, ask, answer and go on.

    The questions are the same for every run: one set of prompts (:func:`ask`)."""
    runs = session.runs()
    advance(runs, root)
    refused = 0
    while ask_here:
        run = runs.store.get_run(root)
        waiting = open_questions(runs.store, root) if run.status == "waiting" else []
        if not waiting:
            return
        interaction = waiting[0]
        with Progress.paused():
            if not Progress.shown(interaction.id):
                out.print(f"[bold yellow]? {interaction.kind}[/] {escape(interaction.prompt)}")
            try:
                resolution = ask(interaction)
            except prompts.NoAnswer as stopped:
                left_waiting(session, root, interaction, stopped.why)
        try:
            answer(session, interaction.id, resolution, by="terminal")
        except StaleInteraction:
            raise
        except InteractionError as exc:
            # An answer that does not fit (an edit the tool refuses) changed nothing: ask again (a few times).
            out.print(f"[red]{escape(str(exc))}[/]")
            refused += 1
            if refused >= prompts.MAX_INVALID:
                left_waiting(session, root, interaction, f"{refused} answers did not fit")
            continue
        advance_due(session)


__all__ = [
    "Progress",
    "advance",
    "advance_due",
    "answer",
    "ask",
    "asks_here",
    "drive",
    "left_waiting",
    "progress",
]
