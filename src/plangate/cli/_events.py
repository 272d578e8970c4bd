"""What a run says in the terminal while it runs: one line per event worth reading, as the console's timeline.

For: ``event_line`` (the rich-markup line of one event: an agent's round with its decision, the tool call,
its result with the error code of a blocked or failed call, a question, the outcome with its reason; a
formula step's new state, its gate opening or closing) and ``EventPrinter``, which prints the lines of every
commit of a run and of the runs under it (a formula's agent steps and sub-runs, their lines marked with
the step they belong to). Not for: asking anything (``_drive.ask``) or a run's final report (``_report.py``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable

from rich.markup import escape

from plangate.cli._console import out
from plangate.events import (
    CorrectionEvent,
    Event,
    GateEvent,
    InteractionOpenedEvent,
    InteractionResolvedEvent,
    OutcomeEvent,
    PlanEvent,
    RoundEvent,
    SpeakEvent,
    StatusEvent,
    StepAdvancedEvent,
    StepStartedEvent,
    StepStateEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.store import Commit, Store

OUTCOME_STYLE = {
    "completed": "green",
    "failed": "red",
    "aborted": "red",
    "exhausted": "yellow",
    "cancelled": "dim",
    "waiting": "yellow",
}
STEP_STYLE = {
    "complete": "green",
    "failed": "red",
    "skipped": "dim",
    "cancelled": "dim",
    "running": "cyan",
    "waiting": "yellow",
    "ready": "blue",
    "pending": "white",
}
_RESOLVED = {"approve": "approved", "reject": "rejected", "answer": "answered", "edit": "approved, edited"}
QUIET_AFTER = 5.0
"""Seconds without a line, while a run works, before the terminal says it still does."""

# A formula's agent step runs its agent as ``<run>.<step>.agent<N>``: its lines are marked with the step.
_AGENT_CHILD = re.compile(r"\.agent\d+$")


def event_line(event: Event) -> str | None:
    """The terminal line (rich markup) of an event, or None for events not worth a line."""
    if isinstance(event, SpeakEvent):
        return escape(event.text)
    if isinstance(event, ThinkingEvent):
        return f"[dim italic]{escape(event.text)}[/]"
    if isinstance(event, PlanEvent):
        steps = "\n".join(f"  {i}. {escape(s.content)}" for i, s in enumerate(event.steps, start=1))
        return f"[bold]plan[/]\n{steps}"
    if isinstance(event, StepStartedEvent):
        return f"[cyan]→ step {event.step_index + 1}:[/] {escape(event.content)}"
    if isinstance(event, StepAdvancedEvent):
        return f"[green]✓ step {event.from_index + 1} done:[/] {escape(event.goal_check)}"
    if isinstance(event, RoundEvent):
        return _round_line(event)
    if isinstance(event, ToolCallEvent):
        arguments = json.dumps(event.arguments, ensure_ascii=False, sort_keys=True)
        return f"  [blue]↳ {escape(event.tool)}[/] {escape(arguments)}"
    if isinstance(event, ToolResultEvent):
        return _result_line(event)
    if isinstance(event, CorrectionEvent):
        return f"[yellow]correction ({escape(event.code)}):[/] {escape(event.message)}"
    if isinstance(event, InteractionOpenedEvent):
        return f"[bold yellow]? {event.kind}[/] {escape(event.prompt)} [dim]({event.interaction_id})[/]"
    if isinstance(event, InteractionResolvedEvent):
        verb = _RESOLVED.get(event.resolution, event.resolution)
        by = f" by {event.by}" if event.by else ""
        return f"[dim]{event.kind} {event.interaction_id}: {verb}{escape(by)}[/]"
    if isinstance(event, OutcomeEvent):
        return _outcome_line(event)
    if isinstance(event, StepStateEvent):
        return _step_line(event)
    if isinstance(event, StatusEvent) and event.code != "started" and event.stage != "run":
        text = f"[{event.stage}] {event.code}" + (f": {event.text}" if event.text else "")
        return f"[dim]{escape(text)}[/]"
    return None


def _round_line(event: RoundEvent) -> str:
    result = event.result or {}
    action = str(result.get("action", event.decision.get("action", "?")))
    tool = result.get("tool")
    line = f"[dim]round {event.round}[/] [bold]{escape(action)}[/]" + (
        f" {escape(str(tool))}" if tool else ""
    )
    failed = [
        str(event.validation.get(f"{check}_reason", ""))
        for check in ("flow", "evidence", "safety")
        if event.validation.get(f"{check}_passed") is False
    ]
    return line + (f" [red]({escape(failed[0])})[/]" if failed else "")


def _result_line(event: ToolResultEvent) -> str:
    if event.success:
        return f"  [green]← {escape(event.summary or event.status)}[/]"
    code = f" ({event.error_code})" if event.error_code else ""
    message = event.error_message or event.summary
    return f"  [red]← {event.status}{escape(code)}[/]" + (f": {escape(message)}" if message else "")


def _outcome_line(event: OutcomeEvent) -> str:
    style = OUTCOME_STYLE.get(event.status, "white")
    line = f"[bold {style}]outcome: {event.status}[/] ({escape(event.code)})"
    # a completed run's message is its answer, said already; any other ending says why here
    if event.status != "completed" and event.user_message:
        line += f": {escape(event.user_message)}"
    return line


def _step_line(event: StepStateEvent) -> str | None:
    if event.status in ("pending", "ready"):
        return None  # the final table shows them; a line each would only repeat "not yet"
    style = STEP_STYLE.get(event.status, "white")
    reason = f": {escape(event.reason)}" if event.reason else ""
    return f"[{style}]■ {escape(event.step_id)} {event.status}[/]{reason}"


def _gate_line(event: GateEvent) -> str:
    state = "[green]open[/]" if event.satisfied else "[yellow]closed[/]"
    return f"[dim]gate {escape(event.step_id)}:[/] {state} ({escape(event.reason)})"


class EventPrinter:
    """Prints the lines of a run's events, and of the runs under it, as the store commits them.

    While the run works with nothing to say (a model thinking, a slow tool), a line says so every
    ``quiet_after`` seconds, so that a person never waits on a silent terminal; none while the run waits on
    a person or has ended.

    Args:
        store: the store whose commits to follow (this process's commits).
        root: the run whose lines are printed bare; runs under it (``<root>.…`` ids) get a mark naming
            their step; None: the first run that commits is the root.
        steps: whether to print a formula's step states too (off where a live table shows them).
        quiet_after: seconds of silence, while the run works, before a line says it still does (None:
            ``QUIET_AFTER``).
    """

    def __init__(
        self, store: Store, root: str | None = None, *, steps: bool = True, quiet_after: float | None = None
    ) -> None:
        self.store = store
        self.root = root
        self.steps = steps
        self.gates: dict[tuple[str, str], bool] = {}
        self.asked: set[str] = set()  # the interactions whose question was printed
        self.unsubscribe: Callable[[], None] | None = None
        self.quiet_after = QUIET_AFTER if quiet_after is None else quiet_after
        self.last = self.said = time.monotonic()  # the last event line, the last line of any kind
        self.idle = False  # the run waits on a person, or ended: silence is expected
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> EventPrinter:
        self.unsubscribe = self.store.subscribe(self.on_commit)
        self.last = self.said = time.monotonic()
        self._stop.clear()
        self._ticker = threading.Thread(target=self._tick, name="plangate-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        if self.unsubscribe is not None:
            self.unsubscribe()
            self.unsubscribe = None

    def on_commit(self, commit: Commit) -> None:
        for event in commit.events:
            self._note(event)
            line = self.line(event)
            if line is not None:
                self.last = self.said = time.monotonic()
                out.print(line)

    def _note(self, event: Event) -> None:
        """Whether the run is idle after ``event``: waiting on a person, or ended."""
        root = self.root is None or event.run_id == self.root
        if isinstance(event, InteractionOpenedEvent):
            self.idle = True
        elif isinstance(event, OutcomeEvent) and root:
            self.idle = True
        elif isinstance(event, StatusEvent) and event.stage == "run" and event.code == "waiting" and root:
            self.idle = True
        elif not isinstance(event, OutcomeEvent | StatusEvent):
            self.idle = False

    def _tick(self) -> None:
        while not self._stop.wait(min(self.quiet_after, 1.0)):
            now = time.monotonic()
            if self.idle or now - self.said < self.quiet_after:
                continue
            self.said = now
            out.print(f"[dim]… still working ({now - self.last:.0f} s since the last event)[/]")

    def line(self, event: Event) -> str | None:
        """The line printed for ``event`` (marked with its step when it belongs to a run under the root)."""
        if isinstance(event, GateEvent):
            key = (event.run_id, event.step_id)
            if self.gates.get(key) == event.satisfied:
                return None  # re-evaluated, unchanged: nothing new to say
            self.gates[key] = event.satisfied
            line: str | None = _gate_line(event)
        elif isinstance(event, StepStateEvent) and not self.steps:
            line = None
        elif isinstance(event, InteractionOpenedEvent):
            self.asked.add(event.interaction_id)
            line = event_line(event)
        else:
            line = event_line(event)
        if line is None:
            return None
        if self.root is None:
            self.root = event.run_id
        mark = self.mark(event.run_id)
        if not mark:
            return line
        return "\n".join(f"[magenta]{escape(mark)} ›[/] {part}" for part in line.split("\n"))

    def mark(self, run_id: str) -> str:
        """What a run under the root is called in the lines: its step (an agent step's agent), or the
        rest of its id (a sub-run); the root itself has none."""
        if self.root is None or run_id == self.root or not run_id:
            return ""
        prefix = f"{self.root}."
        rest = run_id[len(prefix) :] if run_id.startswith(prefix) else run_id
        return _AGENT_CHILD.sub("", rest)


__all__ = ["OUTCOME_STYLE", "STEP_STYLE", "EventPrinter", "event_line"]
