"""``plangate run | resume | status | runs | events | approve | reject | answer | complete | cancel``.

For: driving formula runs from a terminal: live progress (each step's state, gates with their reasons),
questions asked in the terminal unless ``--detach``, and ``--json`` for scripts. ``approve``, ``reject``,
``answer`` and ``resume`` hand an agent run over to ``cli/_agent.py``, unless a formula's agent step started
it: then its formula runner answers it and the formula continues. Not for: any run logic
(``plangate.formulas.runtime``, ``plangate.agent``).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from plangate.agent import Agent
from plangate.cli import _agent
from plangate.cli._console import err, fail, out, parse_vars, print_json, prog
from plangate.cli._events import STEP_STYLE, EventPrinter
from plangate.cli._loading import (
    ConfigOpt,
    StoreOpt,
    ToolsOpt,
    model_from,
    project_tools,
    step_model,
    store_from,
)
from plangate.cli._worker import BrokerOpt, queue_for
from plangate.errors import InteractionError, NotFoundError, StaleInteraction, UserError
from plangate.events import (
    Event,
    GateEvent,
    InteractionOpenedEvent,
    OutcomeEvent,
    StatusEvent,
    StepStateEvent,
    event_to_dict,
)
from plangate.formulas._runstate import StepRun
from plangate.formulas.plan import AgentExecutor, LlmExecutor, Plan
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Answer, Approve, Reject
from plangate.store import TERMINAL_STATUSES, Commit, Interaction, Store

PathOpt = Annotated[
    list[Path] | None, typer.Option("--path", "-p", help="A directory to search first (repeatable).")
]
VarOpt = Annotated[list[str] | None, typer.Option("--var", help="A var value, NAME=VALUE (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
DetachOpt = Annotated[
    bool, typer.Option("--detach", help="Leave the run waiting when a person is needed; don't ask here.")
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Run write steps without asking for consent (always_execute; recorded in the run's events).",
    ),
]

_STYLE = STEP_STYLE


def register(app: typer.Typer) -> None:
    """Add the run commands to ``app``."""
    app.command("run")(run_command)
    app.command("resume")(resume_command)
    app.command("status")(status_command)
    app.command("runs")(runs_command)
    app.command("events")(events_command)
    app.command("approve")(approve_command)
    app.command("reject")(reject_command)
    app.command("answer")(answer_command)
    app.command("complete")(complete_command)
    app.command("cancel")(cancel_command)


# -- live progress ----------------------------------------------------------------------------------------


class _Progress:
    """A run's progress in the terminal: a line per event worth reading (its steps, tool calls and results,
    its agent steps' rounds and questions, the outcome with its reason) and a table of its steps, live on a
    terminal (the lines printed above it) and printed once at the end elsewhere."""

    def __init__(
        self, store: Store, steps: list[str] | Mapping[str, StepRun] | None = None, *, root: str | None = None
    ) -> None:
        self.store = store
        if isinstance(steps, Mapping):  # a run that exists: its steps as they stand
            self.rows = {sid: (run.status, run.reason) for sid, run in steps.items()}
        else:
            self.rows = {step: ("pending", "") for step in steps or []}
        self.root = root
        self.gates: dict[str, str] = {}
        self.live = Live(self._table(), console=out, refresh_per_second=8, transient=False)
        # on a terminal the live table shows each step's state; elsewhere a line says each change
        self.printer = EventPrinter(store, root, steps=not out.is_terminal)

    current: _Progress | None = None

    def __enter__(self) -> _Progress:
        self.unsubscribe = self.store.subscribe(self._on_commit)
        self.printer.__enter__()
        if out.is_terminal:
            self.live.start()
        _Progress.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _Progress.current = None
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
        progress = _Progress.current
        live = progress.live if progress is not None and progress.live.is_started else None
        if live is not None:
            live.stop()
        try:
            yield
        finally:
            if live is not None:
                live.start()

    @staticmethod
    def shown(interaction_id: str) -> bool:
        """Whether the question was printed already (opened in this process, while progress showed)."""
        progress = _Progress.current
        return progress is not None and interaction_id in progress.printer.asked

    def _on_commit(self, commit: Commit) -> None:
        root = self.root or self.printer.root
        for event in commit.events:
            if root is not None and event.run_id != root:
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
            style = _STYLE.get(status, "white")
            why = reason or self.gates.get(step_id, "")
            table.add_row(escape(step_id), f"[{style}]{status}[/]", escape(why))
        return table


def _drive(runner: FormulaRunner, first: Any, *, detach: bool, interactive: bool | None) -> FormulaResult:
    """Run ``first`` (a coroutine) and, while a person is needed and we may ask, ask and go on.

    The questions are the agent command's (``_agent.ask``): one set of prompts for every run."""
    ask_here = (sys.stdin.isatty() if interactive is None else interactive) and not detach
    result: FormulaResult = asyncio.run(first)
    while result.status == "waiting" and result.interaction is not None and ask_here:
        interaction = result.interaction
        with _Progress.paused():
            if not _Progress.shown(interaction.id):
                out.print(f"[bold yellow]? {interaction.kind}[/] {escape(interaction.prompt)}")
            resolution = _agent.ask(interaction)
        try:
            asyncio.run(runner.answer(interaction.id, resolution, by="terminal"))
        except StaleInteraction:
            raise
        except InteractionError as exc:
            # A resolution that does not fit (an edit the tool refuses) changed nothing: ask again.
            out.print(f"[red]{escape(str(exc))}[/]")
            continue
        result = asyncio.run(runner.resume(result.run_id))
    return result


def _report(result: FormulaResult, json: bool, hint: str = "", *, quiet: bool = False) -> None:
    if quiet:
        print(result.run_id)
    elif json:
        print_json(
            {
                "run_id": result.run_id,
                "status": result.status,
                "reason": result.reason,
                "steps": {
                    sid: {"status": s.status, "reason": s.reason, "output": s.output}
                    for sid, s in result.steps.items()
                },
                "interaction": result.interaction.model_dump(mode="json") if result.interaction else None,
            }
        )
    else:
        style = _STYLE.get({"completed": "complete"}.get(result.status, result.status), "white")
        out.print(f"run [bold]{result.run_id}[/] [{style}]{result.status}[/]: {escape(result.reason)}")
        if result.interaction is not None:
            out.print(
                f"waiting on interaction [bold]{result.interaction.id}[/]: "
                f"{escape(result.interaction.prompt)}\n"
                f"  answer with: {escape(_agent.answer_commands(result.interaction, hint))}"
            )
    if result.status == "failed":
        raise typer.Exit(1)


InteractiveOpt = Annotated[
    bool | None,
    typer.Option(
        "--interactive/--no-interactive", help="Ask in the terminal (default: when stdin is a TTY)."
    ),
]


@contextmanager
def _runner_for(
    store: str | None,
    tools: list[str] | None,
    *,
    run_id: str | None = None,
    interaction_id: str | None = None,
    model: str | None = None,
) -> Iterator[FormulaRunner]:
    """A runner for an existing run, with the tools this command names (``--tools``, ``plangate.toml``):
    never the ones its stored input names; missing ones are an error that says which."""
    opened = store_from(store)
    if run_id is None and interaction_id is not None:
        run_id = opened.get_interaction(interaction_id).run_id
    with project_tools(tools, run=(opened, run_id) if run_id is not None else None) as loaded:
        yield FormulaRunner(opened, loaded.registry, tool_specs=loaded.specs, model=step_model(model))


def _root(store: Store, run_id: str) -> str:
    """The run at the top of ``run_id``'s parents (itself when it has none)."""
    while (parent := store.get_run(run_id).parent_run_id) is not None:
        run_id = parent
    return run_id


StepModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model of agent and llm steps that name none (default: $PLANGATE_MODEL, else the default).",
    ),
]


def run_command(
    name: Annotated[str, typer.Argument(help="A formula name, or a path to a formula file.")],
    var: VarOpt = None,
    path: PathOpt = None,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    model: StepModelOpt = None,
    yes: YesOpt = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print only the run's id (for scripts: run=$(plangate run NAME --detach -q)).",
        ),
    ] = False,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Run a formula: live progress, and questions asked here when a person is needed (a write step asks
    for consent to its exact call first, unless the step says consent = "auto" or --yes is given).

    With --broker, the run is checked, stored and handed to the workers (`plangate worker`); the command
    returns at once."""
    shown = not (json or quiet)
    try:
        with project_tools(tools) as loaded:
            runner = FormulaRunner(
                store_from(store),
                loaded.registry,
                search_paths=path,
                tool_specs=loaded.specs,
                model=step_model(model),
            )
            plan = runner.plan(name, parse_vars(var))
            if broker is not None:
                _hand_over(runner, plan, broker, yes, json, quiet)
                return
            if shown:
                _say_step_model(plan, model)
            with _Progress(runner.store, [s.id for s in plan.steps]) if shown else nullcontext():
                first = runner.start(plan, always_execute=yes)
                result = _drive(runner, first, detach=detach or quiet, interactive=interactive)
    except UserError as exc:
        fail(str(exc))
        return
    _report(result, json, _agent.command_hint(store, tools, model), quiet=quiet)


def _hand_over(
    runner: FormulaRunner, plan: Plan, broker: str, yes: bool, json: bool, quiet: bool = False
) -> None:
    """Store the run for the workers and enqueue it; nothing runs here."""
    queue = queue_for(broker)
    try:
        run_id = runner.submit(plan, always_execute=yes)
        sent = queue.enqueue(run_id)
    finally:
        queue.close()
    if quiet:
        print(run_id)
        return
    queued(run_id, sent, json)


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


def _say_step_model(plan: Plan, model: str | None, pending: Mapping[str, StepRun] | None = None) -> None:
    """Name the model that the plan's agent and llm steps without a model of their own will use: of an
    existing run (``pending``: its step states), only those not started yet, unless ``--model`` is given
    (a started agent step goes on with the model its agent recorded)."""
    if any(
        isinstance(step.executor, AgentExecutor | LlmExecutor)
        and step.executor.model is None
        and (pending is None or model is not None or pending[step.id].status in ("pending", "ready"))
        for step in plan.steps
        if pending is None or step.id in pending
    ):
        model_from(model, of="model of agent and llm steps")


def resume_command(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    interactive: InteractiveOpt = None,
    json: JsonOpt = False,
    model: StepModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Continue a run from its last committed transition (after a crash, or once a person answered).

    The run's lease is taken first: a run that another live process advances is refused, unchanged."""
    try:
        opened = store_from(store)
        found = opened.get_run(run_id)
        if found.kind == "agent" and found.parent_run_id is None:
            _agent.resume(opened, run_id, tools=tools, model=model, json=json, store_url=store)
            return
        run_id = _root(opened, run_id)  # an agent step's agent, or a sub-run, continues with its formula
        with _runner_for(store, tools, run_id=run_id, model=model) as runner:
            steps = runner.load(run_id).steps
            with _Progress(runner.store, steps, root=run_id) if not json else nullcontext():
                result = _drive(runner, runner.resume(run_id), detach=detach, interactive=interactive)
    except UserError as exc:
        fail(str(exc))
        return
    _report(result, json, _agent.command_hint(store, tools))


def status_command(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Show a run: its status and each step's state with the reason."""
    try:
        opened = store_from(store)
        run = opened.get_run(run_id)
        state = FormulaRunner(opened).load(run_id) if run.kind == "formula" else None
        interactions = opened.list_interactions(status="open", run_id=run_id)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json(
            {
                "run": run.model_dump(mode="json"),
                "steps": {sid: s.to_json() for sid, s in state.steps.items()} if state else None,
                "interactions": [i.model_dump(mode="json") for i in interactions],
            }
        )
        return
    out.print(f"run [bold]{run.id}[/] ({run.kind} {escape(run.name)}): {run.status}")
    if state is not None:
        table = Table("step", "state", "why")
        for sid, s in state.steps.items():
            table.add_row(escape(sid), f"[{_STYLE.get(s.status, 'white')}]{s.status}[/]", escape(s.reason))
        out.print(table)
    for interaction in interactions:
        out.print(
            f"open interaction [bold]{interaction.id}[/] ({interaction.kind}): {escape(interaction.prompt)}"
        )


def runs_command(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 20,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List runs, newest first."""
    try:
        page = store_from(store).list_runs(status=status, limit=limit)  # type: ignore[arg-type]
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
    try:
        opened = store_from(store)
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


def _resolve(
    target: str,
    resolution: Approve | Reject | Answer,
    store: str | None,
    tools: list[str] | None,
    resume: bool,
    json: bool,
    model: str | None = None,
    broker: str | None = None,
) -> None:
    try:
        opened = store_from(store)
        interaction = open_interaction(opened, target)
        interaction_id = interaction.id
        asking = opened.get_run(interaction.run_id)
        if broker is not None:
            _resolve_for_workers(opened, interaction, resolution, store, tools, broker, json)
            return
        if asking.kind == "agent" and asking.parent_run_id is None:
            if not resume:
                fail("--no-resume applies to formula runs; an agent run continues as soon as it is answered")
            _agent.resolve(
                opened, interaction, resolution, tools=tools, model=model, json=json, store_url=store
            )
            return
        # a formula's own question, or one of its agent steps' (that agent continues as it is answered)
        with _runner_for(store, tools, interaction_id=interaction_id, model=model) as runner:
            root = _root(runner.store, interaction.run_id)
            state = runner.load(root)
            if not json:
                _say_step_model(state.plan, model, pending=state.steps)
            with _Progress(runner.store, state.steps, root=root) if not json else nullcontext():
                asyncio.run(runner.answer(interaction_id, resolution, by="cli"))
                if not resume:
                    out.print(f"resolved {interaction_id}; run {root} continues with: {prog()} resume {root}")
                    return
                result = asyncio.run(runner.resume(root))
    except UserError as exc:
        fail(str(exc))
        return
    _report(result, json, _agent.command_hint(store, tools))


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
        except NotFoundError:
            raise NotFoundError(f"no interaction and no run {target!r}") from None
    found = _open_questions(store, run.id)
    if len(found) == 1:
        return found[0]
    if not found:
        raise InteractionError(f"run {run.id!r} waits on no question ({run.status}); nothing to answer")
    listed = "; ".join(f"{item.id} ({item.kind}: {item.prompt[:60]})" for item in found)
    raise InteractionError(f"run {run.id!r} waits on {len(found)} questions, name one: {listed}")


def _open_questions(store: Store, run_id: str) -> list[Interaction]:
    found = list(store.list_interactions(status="open", run_id=run_id))
    cursor: str | None = None
    while True:
        page = store.list_runs(parent_run_id=run_id, limit=100, cursor=cursor)
        for child in page.items:
            if child.status not in TERMINAL_STATUSES:
                found.extend(_open_questions(store, child.id))
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def _resolve_for_workers(
    opened: Store,
    interaction: Interaction,
    resolution: Approve | Reject | Answer,
    store: str | None,
    tools: list[str] | None,
    broker: str,
    json: bool,
) -> None:
    """Commit the answer (nothing runs here: an approved write runs on the worker) and enqueue the run."""
    queue = queue_for(broker)
    try:
        run = opened.get_run(interaction.run_id)
        if run.kind == "agent" and run.parent_run_id is None:
            _agent.record(opened, interaction, resolution, tools=tools)
            answered = run.id
        else:
            # Only the answer is committed here: the worker runs the steps, with its own tools.
            with project_tools(tools) as loaded:
                runner = FormulaRunner(opened, loaded.registry, tool_specs=loaded.specs)
                answered = asyncio.run(runner.answer(interaction.id, resolution, by="cli")).run_id
        sent = queue.enqueue(answered)
    finally:
        queue.close()
    if json:
        print_json({"interaction_id": interaction.id, "run_id": answered, "enqueued": sent})
        return
    out.print(f"resolved {interaction.id}; run {answered} continues on a worker")
    if not sent:
        out.print("  (the broker is unreachable: the workers' reaper hands the run on)")


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
        help="Agent runs, and a formula's agent and llm steps: the model to continue with "
        "(default: the run's own).",
    ),
]


def approve_command(
    interaction: IdArg,
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    model: ModelOpt = None,
    broker: BrokerOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Approve an open interaction (a consent request or an approval gate)."""
    _resolve(interaction, Approve(), store, tools, resume, json, model, broker)


def reject_command(
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
    _resolve(interaction, Reject(reason=reason), store, tools, resume, json, model, broker)


def answer_command(
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
    _resolve(interaction, Answer(text=text), store, tools, resume, json, model, broker)


def complete_command(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    step: Annotated[str, typer.Argument(help="The manual step to complete.")],
    output: Annotated[str, typer.Option(help="The step's output, a JSON object.")] = "{}",
    tools: ToolsOpt = None,
    store: StoreOpt = None,
    resume: ResumeOpt = True,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Complete a manual step with an output, then continue the run."""
    try:
        value = jsonlib.loads(output)
    except jsonlib.JSONDecodeError as exc:
        fail(f"--output: not JSON: {exc.msg} at column {exc.colno}")
        return
    if not isinstance(value, dict):
        fail(f"--output: expected a JSON object, got {type(value).__name__}")
        return
    try:
        with _runner_for(store, tools, run_id=run_id) as runner:
            runner.complete_step(run_id, step, value)
            if not resume:
                out.print(f"completed {step}; continue with: {prog()} resume {run_id}")
                return
            steps = runner.load(run_id).steps
            with _Progress(runner.store, steps, root=run_id) if not json else nullcontext():
                result = asyncio.run(runner.resume(run_id))
    except UserError as exc:
        fail(str(exc))
        return
    _report(result, json, _agent.command_hint(store, tools))


def cancel_command(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    reason: Annotated[str, typer.Option(help="Why.")] = "cancelled from the command line",
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Cancel a run that has not ended: a formula run with its sub-runs and steps' agents, or an agent run
    (its open question expires)."""
    try:
        opened = store_from(store)
        if opened.get_run(run_id).kind == "agent":
            Agent(store=opened).cancel(run_id, reason)
        else:
            FormulaRunner(opened).cancel(run_id, reason)
    except UserError as exc:
        fail(str(exc))
        return
    err.print(f"cancelled {run_id}")
