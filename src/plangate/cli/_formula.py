"""``plangate formula check | show | cook``: look at a formula before running it (``check`` also checks a
data source's semantic layer, ``<source>.semantic.toml``, against its database: ``cli/_semantic.py``).

For: printing issues, the step DAG (a tree and a Mermaid graph) and the cooked plan, as rich text or JSON.
Not for: running formulas (``plangate run``) or any formula logic (``plangate.formulas``).

Exit codes: 0 fine (warnings allowed); 1 error-level issues (``check`` and ``show`` report a formula that
cannot be cooked as issues); 2 the file cannot be loaded, or ``cook`` fails: one line naming the file and the
path, never a traceback (``check --json`` prints its JSON then too, the problem as an issue).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from plangate.cli._console import fail, out, parse_vars, print_json
from plangate.cli._loading import project_tool_specs
from plangate.cli._options import ConfigOpt, ToolsOpt
from plangate.cli._semantic import check_semantic_file, is_semantic_file
from plangate.cli._session import Session, session
from plangate.errors import ConfigError, FormulaError, FormulaNotFound
from plangate.formulas import CookedStep, Formula, Issue, Plan, check_formula, cook, has_errors, load_formula
from plangate.formulas._schema_errors import FormulaSchemaError
from plangate.formulas.loader import FormulaLoader
from plangate.formulas.plan import AgentExecutor, ToolExecutor

NameArg = Annotated[str, typer.Argument(help="A formula name, or a path to a .formula.toml / .formula.json.")]
PathOpt = Annotated[
    list[Path] | None, typer.Option("--path", "-p", help="A directory to search first (repeatable).")
]
VarOpt = Annotated[list[str] | None, typer.Option("--var", help="A var value, NAME=VALUE (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
DataOpt = Annotated[
    str | None,
    typer.Option("--data", help="For a .semantic.toml: the database it describes (default: the one beside)."),
]


def register(app: typer.Typer) -> None:
    """Add the ``formula`` command group to ``app``."""
    group = typer.Typer(name="formula", help="Check, show and cook formulas.", no_args_is_help=True)
    group.command("check")(_check)
    group.command("show")(_show)
    group.command("cook")(_cook)
    app.add_typer(group, name="formula")


def _check(
    ctx: typer.Context,
    name: NameArg,
    path: PathOpt = None,
    var: VarOpt = None,
    tools: ToolsOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
    data: DataOpt = None,
) -> None:
    """Check a formula: unknown steps, cycles, bad conditions, vars (give required ones with --var), tools.
    Given a data source's semantic file (NAME.semantic.toml), check it against its database instead.

    With tools (--tools, $PLANGATE_TOOLS, or plangate.toml's tools and [[mcp]] servers, which are started
    to list theirs), tool names are checked too, and a write step that says nothing of consent is a
    warning. With --json, the issues are printed as JSON whatever happens, a formula that cannot be read
    included.

    Exit codes: 0 no errors (warnings allowed); 1 error-level issues; 2 the formula cannot be read (not
    found, bad TOML, a schema error), an option is wrong, or a tool source cannot be loaded."""
    if is_semantic_file(name):
        check_semantic_file(name, data, json)
        return
    s = session(ctx, config=config, tools=tools)
    try:
        formula = load_formula(name, path)
        plan, issues = _checked(s, formula, var, path)
    except (FormulaError, ConfigError) as exc:
        if json:
            print_json({"formula": name, "ok": False, "steps": None, "issues": _load_issues(exc)})
            raise typer.Exit(2) from None
        fail(str(exc))
        return
    failed = has_errors(issues)
    if json:
        print_json(
            {
                "formula": formula.formula,
                "ok": not failed,
                "steps": len(plan.steps) if plan is not None else None,
                "issues": [issue.model_dump() for issue in issues],
            }
        )
    else:
        _print_issues(formula, plan, issues)
        if any(issue.code == "missing-var" for issue in issues):
            out.print("[dim]give the formula's vars with --var NAME=VALUE[/]")
    if failed:
        raise typer.Exit(1)


def _checked(
    s: Session, formula: Formula, var: list[str] | None, path: list[Path] | None
) -> tuple[Plan | None, list[Issue]]:
    """``check_formula`` with this command's tools, when it has any (its MCP servers started to list
    theirs); without, tool names and effects go unchecked."""
    vars = parse_vars(var)
    if not project_tool_specs(s.config, s.tool_flags) and not s.config.mcp:
        plan, issues = check_formula(formula, vars, search_paths=path)
        return plan, issues + (_unverified(plan) if plan is not None else [])
    return check_formula(formula, vars, tools=s.tools(), search_paths=path)


def _unverified(plan: Plan) -> list[Issue]:
    """A warning for each tool a step names that a check without tools cannot verify (it may not exist)."""
    found: list[Issue] = []
    for step in plan.steps:
        at = step.source or step.id
        executor = step.executor
        named = [(executor.name, f"{at}.tool.name")] if isinstance(executor, ToolExecutor) else []
        if isinstance(executor, AgentExecutor):
            named = [(tool, f"{at}.agent.tools") for tool in executor.tools]
        found.extend(
            Issue(
                level="warning",
                code="unverified-tool",
                path=where,
                message=f"tool {tool!r} is not verified: no tools are named here (give them with --tools "
                "MODULE:ATTR or FILE.py:ATTR, $PLANGATE_TOOLS, or plangate.toml's tools)",
            )
            for tool, where in named
        )
    return found


def _load_issues(exc: FormulaError | ConfigError) -> list[dict[str, str]]:
    """What stopped a check before it began, as issues (one per schema problem)."""
    if isinstance(exc, FormulaSchemaError):
        problems = exc.problems
        where = f"{exc.source}: " if exc.source else ""
        return [_issue("schema", path, f"{where}{message}") for path, message in problems]
    if isinstance(exc, FormulaError):
        code = "not-found" if isinstance(exc, FormulaNotFound) else "load-error"
        return [_issue(code, exc.path, f"{exc.source}: {exc.detail}" if exc.source else exc.detail)]
    return [_issue("bad-option", "", str(exc))]


def _issue(code: str, path: str, message: str) -> dict[str, str]:
    return {"level": "error", "code": code, "path": path, "message": message}


def _show(name: NameArg, path: PathOpt = None, var: VarOpt = None, json: JsonOpt = False) -> None:
    """Show the steps of a formula as a tree and as a Mermaid graph (missing vars get stand-ins)."""
    formula = _load(name, path)
    plan, issues = check_formula(formula, parse_vars(var), search_paths=path)
    if plan is None:
        _print_issues(formula, plan, issues)
        raise typer.Exit(1)
    graph = mermaid(plan)
    if json:
        steps = [
            {
                "id": s.id,
                "title": s.title,
                "needs": s.needs,
                "parent": s.parent,
                "children": s.children,
                "executor": s.executor.type,
            }
            for s in plan.steps
        ]
        print_json({"formula": plan.formula, "steps": steps, "mermaid": graph})
        return
    out.print(tree(plan))
    out.print()
    print(graph)


def _cook(name: NameArg, path: PathOpt = None, var: VarOpt = None, json: JsonOpt = False) -> None:
    """Cook a formula with its vars into a plan and print it (every var must be valid)."""
    formula = _load(name, path)
    try:
        plan = cook(formula, parse_vars(var), loader=FormulaLoader.beside(formula, path))
    except FormulaError as exc:
        fail(str(exc))
        return
    if json:
        print_json(plan.to_dict())
        return
    table = Table(title=f"{plan.formula}: {len(plan.steps)} steps", title_justify="left")
    for column in ("id", "title", "needs", "executor", "gate"):
        table.add_column(column)
    for step in plan.steps:
        table.add_row(
            escape(step.id),
            escape(step.title),
            escape(", ".join(own_needs(plan, step))),
            escape(_executor_text(step)),
            escape(_gate_text(step)),
        )
    out.print(table)


def _load(name: str, path: list[Path] | None) -> Formula:
    try:
        return load_formula(name, path)
    except FormulaError as exc:
        fail(str(exc))
        raise  # fail() leaves; this keeps the type checker informed


def _print_issues(formula: Formula, plan: Plan | None, issues: list[Issue]) -> None:
    where = escape(formula.source or formula.formula)
    if not issues and plan is not None:
        out.print(f"[green]ok[/] {where}: {len(plan.steps)} steps, no issues")
        return
    for issue in issues:
        colour = "red" if issue.level == "error" else "yellow"
        at = f"{escape(issue.path)}: " if issue.path else ""
        out.print(f"[{colour}]{issue.level}[/] {at}{escape(issue.message)} [dim]({issue.code})[/]")
    errors = sum(1 for issue in issues if issue.level == "error")
    warnings = len(issues) - errors
    out.print(f"{where}: {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}")


def own_needs(plan: Plan, step: CookedStep) -> list[str]:
    """A step's needs without those it only inherits from its parent (what the formula says)."""
    if step.parent is None or step.parent not in plan.index:
        return list(step.needs)
    inherited = set(plan.index[step.parent].needs)
    return [need for need in step.needs if need not in inherited]


def tree(plan: Plan) -> Tree:
    """The plan as a rich tree: parents hold their children; each line shows executor, needs and gate."""
    root = Tree(f"[bold]{escape(plan.formula)}[/]")
    nodes: dict[str, Tree] = {}
    for step in plan.steps:
        label = f"[bold]{escape(step.id)}[/]"
        if step.title != step.id:
            label += f" {escape(step.title)}"
        label += f" [dim]{escape(_executor_text(step))}[/]"
        needs = own_needs(plan, step)
        if needs:
            label += f" [cyan]needs {escape(', '.join(needs))}[/]"
        gate = _gate_text(step)
        if gate:
            label += f" [yellow]gate {escape(gate)}[/]"
        parent = nodes.get(step.parent) if step.parent is not None else None
        nodes[step.id] = (parent or root).add(label)
    return root


def mermaid(plan: Plan) -> str:
    """The plan as a Mermaid flowchart: ``graph TD``, parents as subgraphs, an edge from each need."""
    names = {step.id: f"s{i}" for i, step in enumerate(plan.steps)}
    lines = ["graph TD"]

    def emit(step: CookedStep, depth: int) -> None:
        pad = "  " * depth
        label = _mermaid_label(step.id if step.title == step.id else f"{step.id}: {step.title}")
        if step.children:
            lines.append(f'{pad}subgraph {names[step.id]} ["{label}"]')
            for child in step.children:
                if child in plan.index:
                    emit(plan.index[child], depth + 1)
            lines.append(f"{pad}end")
        else:
            lines.append(f'{pad}{names[step.id]}["{label}"]')

    for step in plan.steps:
        if step.parent is None or step.parent not in plan.index:
            emit(step, 1)
    for step in plan.steps:
        for need in own_needs(plan, step):
            if need in names:
                lines.append(f"  {names[need]} --> {names[step.id]}")
    return "\n".join(lines)


def _mermaid_label(text: str) -> str:
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _executor_text(step: CookedStep) -> str:
    executor = step.executor
    if executor.type in ("tool", "formula"):
        return f"{executor.type}: {getattr(executor, 'name', '')}"
    return executor.type


def _gate_text(step: CookedStep) -> str:
    gate = step.gate
    if gate is None:
        return ""
    parts = []
    if gate.condition:
        parts.append(gate.condition)
    if gate.timer:
        parts.append(f"timer {gate.timer}s")
    if gate.human is not None:
        parts.append("human approval")
    if gate.timeout:
        parts.append(f"timeout {gate.timeout}s")
    return "; ".join(parts)


__all__ = ["mermaid", "own_needs", "register", "tree"]
