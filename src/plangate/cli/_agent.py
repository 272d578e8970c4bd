"""``plangate agent "PROMPT"``, and the agent side of ``approve | reject | answer | resume``.

For: running an agent from a terminal: every committed event printed live (speak text, the plan, each
round's decision, tool calls and results, corrections, questions, the outcome), consent and questions
asked in the terminal (approve, reject with a reason, or edit the arguments as JSON) unless ``--detach``,
which prints the interaction id and the commands that answer it; ``--json`` prints the result for
scripts. Not for: any run logic (``plangate.agent``).
"""

from __future__ import annotations

import json as jsonlib
import sys
from contextlib import nullcontext
from typing import Annotated

import typer
from rich.markup import escape
from rich.prompt import Prompt

from plangate.agent import Agent, AgentResult, Mode
from plangate.cli._console import fail, out, print_json, prog
from plangate.cli._events import OUTCOME_STYLE, EventPrinter, event_line
from plangate.cli._loading import (
    ConfigOpt,
    StoreOpt,
    ToolsOpt,
    config_hint,
    model_from,
    project_tools,
    store_from,
    tool_specs,
)
from plangate.errors import InteractionError, StaleInteraction, UserError
from plangate.interactions import Answer, Approve, Edit, Reject, Resolution
from plangate.store import Interaction, LeaseBook, Store

MODEL_ENV = "PLANGATE_MODEL"

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help=(
            f"The model spec (openai:gpt-4o-mini, anthropic:…, local, scripted:file.json); default "
            f"${MODEL_ENV}, else a hosted model whose API key is set, else the offline local model."
        ),
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON for scripts (no live events).")
]

def register(app: typer.Typer) -> None:
    """Add ``agent`` to ``app``."""
    app.command("agent")(agent_command)


# -- asking in the terminal -------------------------------------------------------------------------------


def ask(interaction: Interaction) -> Resolution:
    """Ask the person at the terminal: an answer to a question; approve, reject or edit for consent."""
    if interaction.kind == "ask_user":
        return Answer(text=Prompt.ask("[bold]your answer[/]", console=out))
    choices = ["a", "r", "e"] if interaction.tool is not None else ["a", "r"]
    labels = "approve / reject / edit the arguments" if interaction.tool is not None else "approve / reject"
    choice = Prompt.ask(f"[bold]{labels}[/]", choices=choices, default="a", console=out)
    if choice == "a":
        return Approve()
    if choice == "r":
        return Reject(reason=Prompt.ask("reason", default="", console=out))
    return _edit(interaction)


def _edit(interaction: Interaction) -> Edit:
    current = jsonlib.dumps(interaction.tool.arguments if interaction.tool else {}, ensure_ascii=False)
    while True:
        text = Prompt.ask("arguments (JSON)", default=current, console=out)
        try:
            value = jsonlib.loads(text)
        except jsonlib.JSONDecodeError as exc:
            out.print(f"[red]not JSON:[/] {escape(exc.msg)} at column {exc.colno}")
            continue
        if isinstance(value, dict):
            return Edit(arguments=value)
        out.print(f"[red]expected a JSON object, got {type(value).__name__}[/]")


def drive(agent: Agent, result: AgentResult, *, ask_here: bool) -> AgentResult:
    """While the run waits on a person and we may ask here, ask and resume."""
    while result.waiting and result.interaction is not None and ask_here:
        interaction = result.interaction
        resolution = ask(interaction)
        try:
            result = agent.resume(result.run_id, interaction.id, resolution, by="terminal")
        except StaleInteraction:
            raise
        except InteractionError as exc:
            # A resolution that does not fit (an edit the tool refuses) changed nothing: ask again.
            out.print(f"[red]{escape(str(exc))}[/]")
    return result


def report(result: AgentResult, json: bool, hint: str = "") -> None:
    """Print where the run stands (or its JSON form); exit 1 when it did not complete."""
    if json:
        print_json(
            {
                "run_id": result.run_id,
                "status": result.status,
                "outcome": result.outcome.model_dump(mode="json") if result.outcome else None,
                "interaction": result.interaction.model_dump(mode="json") if result.interaction else None,
                "answer": result.answer,
            }
        )
    elif result.waiting and result.interaction is not None:
        interaction = result.interaction
        out.print(
            f"run [bold]{result.run_id}[/] waits on interaction [bold]{interaction.id}[/] "
            f"({interaction.kind}): {escape(interaction.prompt)}"
        )
        out.print(f"  answer with: {escape(answer_commands(interaction, hint))}")
    else:
        style = OUTCOME_STYLE.get(result.status, "white")
        code = f" ({result.outcome.code})" if result.outcome else ""
        out.print(f"run [bold]{result.run_id}[/] [{style}]{result.status}[/]{code}")
    if result.status in ("aborted", "exhausted", "cancelled"):
        raise typer.Exit(1)


def answer_commands(interaction: Interaction, hint: str = "") -> str:
    """The commands that resolve ``interaction`` from another terminal."""
    suffix = f" {hint}" if hint else ""
    command = prog()
    if interaction.kind == "ask_user":
        return f'{command} answer {interaction.id} "YOUR ANSWER"{suffix}'
    return (
        f"{command} approve {interaction.id}{suffix}  |  "
        f'{command} reject {interaction.id} --reason "WHY"{suffix}'
    )


def command_hint(store: str | None, tools: list[str] | None, model: str | None = None) -> str:
    """The options a command printed for later needs to find this run again: the store, the config, the
    tools named on this command line (a run's stored specs are never imported), a scripted model."""
    parts = [f"--store {store}"] if store else []
    if config_hint():
        parts.append(config_hint())
    parts.extend(f"--tools {spec}" for spec in tool_specs(tools))
    if model and model.startswith("scripted:"):
        parts.append("--model scripted:NEXT.json")
    return " ".join(parts)


# -- commands ---------------------------------------------------------------------------------------------


def agent_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: ModelOpt = None,
    tools: ToolsOpt = None,
    mode: Annotated[
        str, typer.Option(help="auto (route first), plan (always plan) or react (no plan).")
    ] = "auto",
    max_rounds: Annotated[int, typer.Option("--max-rounds", help="Planning and execute calls allowed.")] = 60,
    always_execute: Annotated[
        bool, typer.Option("--always-execute", help="Run write tools without asking for consent.")
    ] = False,
    detach: Annotated[
        bool, typer.Option("--detach", help="Leave the run waiting when a person is needed; don't ask here.")
    ] = False,
    done_when: Annotated[
        str | None,
        typer.Option(
            "--done-when",
            help="The goal as a condition over the run's receipts, checked after each one, e.g. "
            "\"receipts.any(tool == 'place' and success)\".",
        ),
    ] = None,
    interactive: Annotated[
        bool | None,
        typer.Option(
            "--interactive/--no-interactive", help="Ask in the terminal (default: when stdin is a TTY)."
        ),
    ] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    broker: Annotated[
        str | None,
        typer.Option(
            "--broker",
            help="The Redis URL of the workers' queue: the run is stored and handed to the workers "
            "(plangate worker), and the command returns at once.",
        ),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Run an agent: live events, and consent and questions asked here when a person is needed."""
    if mode not in ("auto", "plan", "react"):
        fail(f"--mode: expected auto, plan or react; found {mode!r}")
    chosen: Mode = "plan" if mode == "plan" else ("react" if mode == "react" else "auto")
    ask_here = (sys.stdin.isatty() if interactive is None else interactive) and not detach
    try:
        chosen_model = model_from(model)
        with project_tools(tools) as loaded:
            opened = store_from(store)
            runner = Agent(
                model=chosen_model,
                tools=loaded.registry,
                tool_specs=loaded.specs,
                store=opened,
                max_rounds=max_rounds,
                mode=chosen,
                always_execute=always_execute,
                leases=LeaseBook(opened),
                done_when=done_when,
            )
            if broker is not None:
                _hand_over(runner, prompt, broker, json)
                return
            with EventPrinter(runner.store) if not json else nullcontext():
                result = drive(runner, runner.run(prompt), ask_here=ask_here)
    except UserError as exc:
        fail(str(exc))
        return
    report(result, json, command_hint(store, tools, model or chosen_model.name))


def _hand_over(agent: Agent, prompt: str, broker: str, json: bool) -> None:
    from plangate.cli._runs import queued
    from plangate.cli._worker import queue_for

    queue = queue_for(broker)
    try:
        run_id = agent.submit(prompt)
        sent = queue.enqueue(run_id)
    finally:
        queue.close()
    queued(run_id, sent, json)


def record(
    store: Store, interaction: Interaction, resolution: Resolution, *, tools: list[str] | None
) -> None:
    """Commit the resolution of an agent run's interaction and nothing more (a worker continues it)."""
    # Only the answer is committed here: the worker runs the approved call, with its own tools.
    with project_tools(tools) as loaded:
        runner = Agent(tools=loaded.registry, store=store, leases=LeaseBook(store))
        runner.resolve(interaction.run_id, interaction.id, resolution, by="cli")


def resolve(
    store: Store,
    interaction: Interaction,
    resolution: Resolution,
    *,
    tools: list[str] | None,
    model: str | None,
    json: bool,
    store_url: str | None = None,
) -> None:
    """Resolve an agent run's interaction from the command line and continue the run here.

    The run's tools come from this command (``--tools``, ``plangate.toml``), never from what it stored.
    Under the run's lease, fencing every commit: a run another live process advances is refused
    (``RunLeased``), unchanged.
    """
    with project_tools(tools, run=(store, interaction.run_id)) as loaded:
        runner = Agent(model=model, tools=loaded.registry, store=store, leases=LeaseBook(store))
        with EventPrinter(store) if not json else nullcontext():
            result = runner.resume(interaction.run_id, interaction.id, resolution, by="cli")
    report(result, json, command_hint(store_url, tools, model))


def resume(
    store: Store,
    run_id: str,
    *,
    tools: list[str] | None,
    model: str | None,
    json: bool,
    store_url: str | None = None,
) -> None:
    """Continue an agent run whose process stopped (``plangate resume`` on an agent run)."""
    with project_tools(tools, run=(store, run_id)) as loaded:
        runner = Agent(model=model, tools=loaded.registry, store=store, leases=LeaseBook(store))
        with EventPrinter(store) if not json else nullcontext():
            result = runner.resume(run_id)
    report(result, json, command_hint(store_url, tools, model))


__all__ = [
    "agent_command",
    "answer_commands",
    "ask",
    "command_hint",
    "drive",
    "event_line",
    "register",
    "report",
    "resolve",
    "resume",
]
