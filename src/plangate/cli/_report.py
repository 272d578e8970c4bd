"""Where a run stands once a command is done with it, said in one shape whatever its kind.

For: ``Standing`` (read from the store: the run's status, the reason its log gives, its outcome, the open
question of its tree, its steps as its engine describes them, and what it said last), the report a
command ends with — one line, the open interaction with the commands that answer it, or the JSON of it
all for scripts — and the lines of a run handed to the workers. Not for: the live lines while it runs
(``_drive.py``, ``_events.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import typer
from pydantic import JsonValue
from rich.markup import escape

from plangate.cli._console import out, print_json, prog
from plangate.cli._events import OUTCOME_STYLE
from plangate.cli._loading import tool_specs
from plangate.cli._session import Session
from plangate.errors import InteractionError, NotFoundError
from plangate.events import Event, OutcomeEvent, SpeakEvent, StatusEvent
from plangate.runs import Outcome, Runs
from plangate.store import TERMINAL_STATUSES, Interaction, RunRecord, RunStatus, Store
from plangate.vocab import InteractionKind

UNFINISHED: frozenset[RunStatus] = TERMINAL_STATUSES - {"completed"}
"""The endings a command exits 1 on: the run ended without doing what it was asked."""

QUESTIONS: frozenset[InteractionKind] = frozenset({"ask_user"})
"""The interactions a person answers with text; every other kind is approved or rejected."""


@dataclass(frozen=True)
class Standing:
    """Where a run stands.

    Attributes:
        run: its record.
        reason: why it stands there, as the last ``run`` status of its log says (a formula's "all 3 steps
            finished", what a waiting run waits on, a run left waiting for its tools); empty when none.
        outcome: how it ended, once it ended.
        interaction: the open question of the run or of a run under it (the one place to answer it).
        steps: its steps as its engine describes them (empty for a run without steps).
        answer: what it said last before its outcome (an agent's answer), else its outcome's message;
            None until it ended.
    """

    run: RunRecord
    reason: str
    outcome: Outcome | None
    interaction: Interaction | None
    steps: list[dict[str, JsonValue]]
    answer: str | None

    @classmethod
    def of(cls, runs: Runs, run_id: str) -> Standing:
        """Read where ``run_id`` stands now."""
        store = runs.store
        run = store.get_run(run_id)
        outcome = Outcome.read(run.outcome) if run.status in TERMINAL_STATUSES else None
        reason, spoken = _tail(store, run)
        answer = _last_words(spoken, outcome) if outcome is not None else None
        found = open_questions(store, run.id) if run.status == "waiting" else []
        return cls(run, reason, outcome, found[0] if found else None, described_steps(runs, run), answer)

    def to_json(self) -> dict[str, JsonValue]:
        """The JSON scripts read: the same keys for every kind of run."""
        steps: dict[str, JsonValue] | None = None
        if self.steps:
            steps = {
                str(step["id"]): {
                    "status": step.get("status"),
                    "reason": step.get("reason"),
                    "output": step.get("output"),
                }
                for step in self.steps
            }
        return {
            "run_id": self.run.id,
            "status": self.run.status,
            "reason": self.reason,
            "outcome": self.outcome.model_dump(mode="json") if self.outcome is not None else None,
            "steps": steps,
            "interaction": self.interaction.model_dump(mode="json") if self.interaction else None,
            "answer": self.answer,
        }


def described_steps(runs: Runs, run: RunRecord) -> list[dict[str, JsonValue]]:
    """The run's steps as its engine describes them (none for a run without steps)."""
    steps = runs.engine(run).describe(run).get("steps")
    return [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []


def _tail(store: Store, run: RunRecord) -> tuple[str, str]:
    """The reason the end of the run's log gives (its last ``run`` status: the event before its outcome, or
    its last), and the text it spoke right before its outcome."""
    events: list[Event] = list(store.events(run.id, after=max(0, run.last_seq - 2)))
    if events and isinstance(events[-1], OutcomeEvent):
        events.pop()
    last = events[-1] if events else None
    reason = last.text if isinstance(last, StatusEvent) and last.stage == "run" else ""
    return reason, last.text if isinstance(last, SpeakEvent) else ""


def _last_words(spoken: str, outcome: Outcome) -> str:
    """What a run said last: its outcome's message, unless it spoke something else just before it (an
    agent's closing summary). A message spoken in pieces (a streamed reply) ends with its last piece."""
    if spoken and not outcome.user_message.endswith(spoken):
        return spoken
    return outcome.user_message


def open_questions(store: Store, run_id: str) -> list[Interaction]:
    """The open interactions of the run and of the unfinished runs under it, the run's own first."""
    found = list(store.list_interactions(status="open", run_id=run_id))
    cursor: str | None = None
    while True:
        page = store.list_runs(parent_run_id=run_id, limit=100, cursor=cursor)
        for child in page.items:
            if child.status not in TERMINAL_STATUSES:
                found.extend(open_questions(store, child.id))
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def open_interaction(store: Store, target: str) -> Interaction:
    """The open interaction ``target`` names: an interaction id, or a run whose one open question (its
    own, or one of its sub-runs' or agent steps': one place to answer) is meant.

    Raises:
        NotFoundError: no interaction and no run has that id.
        InteractionError: the run waits on no question, or on several (they are listed).
    """
    try:
        return store.get_interaction(target)
    except NotFoundError:
        try:
            run = store.get_run(target)
        except NotFoundError as exc:  # it names the store it looked in
            raise NotFoundError(f"no interaction and {exc}") from None
    found = open_questions(store, run.id)
    if len(found) == 1:
        return found[0]
    if not found:
        raise InteractionError(f"run {run.id!r} waits on no question ({run.status}); nothing to answer")
    listed = "; ".join(f"{item.id} ({item.kind}: {item.prompt[:60]})" for item in found)
    raise InteractionError(f"run {run.id!r} waits on {len(found)} questions, name one: {listed}")


# -- saying it ----------------------------------------------------------------------------------------------


def report(standing: Standing, *, json: bool, hint: str = "", quiet: bool = False) -> None:
    """Print where the run stands (its id only with ``quiet``, its JSON with ``json``); exit 1 when it
    ended without completing."""
    run = standing.run
    if quiet:
        print(run.id)
    elif json:
        print_json(standing.to_json())
    else:
        style = OUTCOME_STYLE.get(run.status, "white")
        line = f"run [bold]{run.id}[/] [{style}]{run.status}[/]"
        if standing.reason:
            line += f": {escape(standing.reason)}"
        elif standing.outcome is not None:
            line += f" ({escape(standing.outcome.code)})"
        if standing.outcome is not None and standing.outcome.usage is not None:
            line += f" · {usage_text(standing.outcome.usage)}"
        out.print(line)
        if standing.interaction is not None:
            interaction = standing.interaction
            out.print(
                f"waiting on interaction [bold]{interaction.id}[/] ({interaction.kind}): "
                f"{escape(interaction.prompt)}\n"
                f"  answer with: {escape(answer_commands(interaction, hint))}"
            )
    if run.status in UNFINISHED:
        raise typer.Exit(1)


def usage_text(usage: Mapping[str, JsonValue]) -> str:
    """A run's usage on its end line: ``1,234 tokens in (1,000 cached), 56 out · cost 0.001200``."""
    cached = usage.get("cached_input_tokens")
    text = f"{_count(usage.get('input_tokens'))} tokens in"
    if isinstance(cached, int) and cached:
        text += f" ({cached:,} cached)"
    text += f", {_count(usage.get('output_tokens'))} out"
    cost = usage.get("cost")
    if isinstance(cost, int | float):
        text += f" · cost {cost:.6f}"
    return text


def _count(value: JsonValue) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def answer_commands(interaction: Interaction, hint: str = "") -> str:
    """The commands that resolve ``interaction`` from another terminal."""
    suffix = f" {hint}" if hint else ""
    command = prog()
    if interaction.kind in QUESTIONS:
        return f'{command} answer {interaction.id} "YOUR ANSWER"{suffix}'
    return (
        f"{command} approve {interaction.id}{suffix}  |  "
        f'{command} reject {interaction.id} --reason "WHY"{suffix}'
    )


def command_hint(session: Session, model: str | None = None) -> str:
    """The options a command printed for later needs to find this run again: the store, the config, the
    tools named on this command line (a run's stored specs are never imported), a scripted model."""
    parts = [f"--store {session.store_flag}"] if session.store_flag else []
    if session.config_hint():
        parts.append(session.config_hint())
    parts.extend(f"--tools {spec}" for spec in tool_specs(session.tool_flags))
    if model and model.startswith("scripted:"):
        parts.append("--model scripted:NEXT.json")
    return " ".join(parts)


def queued(run_id: str, sent: bool, json: bool) -> None:
    """Say that a run was handed to the workers (or will be, by their reaper, when the broker was down)."""
    if json:
        print_json({"run_id": run_id, "status": "queued", "enqueued": sent})
        return
    how = "handed to the workers"
    if not sent:
        how = "stored; the broker is unreachable, so the workers' reaper hands it on"
    out.print(f"run [bold]{run_id}[/] queued: {how}")
    out.print(f"  follow it with: {prog()} events {run_id} --follow")


def answered_for_workers(interaction: Interaction, run_id: str, sent: bool, json: bool) -> None:
    """Say that an answer is committed and its run continues on a worker."""
    if json:
        print_json({"interaction_id": interaction.id, "run_id": run_id, "enqueued": sent})
        return
    out.print(f"resolved {interaction.id}; run {run_id} continues on a worker")
    if not sent:
        out.print("  (the broker is unreachable: the workers' reaper hands the run on)")


__all__ = [
    "QUESTIONS",
    "UNFINISHED",
    "Standing",
    "answer_commands",
    "answered_for_workers",
    "command_hint",
    "described_steps",
    "open_interaction",
    "open_questions",
    "queued",
    "report",
]
