"""``plangate check-condition``: compile one condition, evaluate it against a steps file, print the verdict.

Interface only: reading and checking the steps file (a format that belongs to this command) and printing.
The language itself is ``plangate.conditions``. Exit codes: 0 satisfied, 1 not satisfied, 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from plangate._json import json_type
from plangate.cli._console import err, fail, out, parse_vars, print_json
from plangate.conditions import (
    Condition,
    ConditionContext,
    ConditionSyntaxError,
    StepState,
    compile_condition,
)
from plangate.conditions.ast import STATUSES, dump
from plangate.conditions.errors import caret_lines
from plangate.errors import UserError, number_too_long

# One paragraph per line: the help renderer wraps paragraphs itself and keeps hard line breaks.
_HELP = "\n\n".join(
    [
        "Evaluate a condition EXPR against step states and print whether it holds, and why.",
        "Exit code: 0 when satisfied, 1 when not, 2 for a syntax error or a bad steps file.",
        'The --steps file is JSON: {"steps": [STEP, ...], "vars": {"name": "value"}, "current": "step-id"}, '
        'where a STEP is {"id": "build", "status": "complete", "output": {...}, "children": [STEP or '
        '"step-id", ...]}. Only "steps" is required, and in a STEP only "id" and "status". A status is one '
        "of: pending, ready, running, waiting, complete, failed, skipped, cancelled. Children may be written "
        "in place or named by the id of another step; steps written in place can be referred to by id too.",
        "env.NAME reads the process environment, limited to the names in PLANGATE_ENV_ALLOW (default: CI). "
        "file.exists is refused unless --root is given.",
    ]
)


class StepsFileError(UserError):
    """A steps file that cannot be used; the message says where in it and what is wrong."""


def register(app: typer.Typer) -> None:
    """Add the ``check-condition`` command to ``app``."""
    app.command("check-condition", help=_HELP)(check_condition)


def check_condition(
    expression: Annotated[
        str, typer.Argument(metavar="EXPR", help="The condition, e.g. \"build.status == 'complete'\".")
    ],
    steps: Annotated[
        Path | None, typer.Option("--steps", metavar="FILE.json", help="Step states to evaluate against.")
    ] = None,
    current: Annotated[
        str | None, typer.Option("--current", metavar="ID", help="The current step (bare 'status' means it).")
    ] = None,
    var: Annotated[
        list[str] | None, typer.Option("--var", metavar="NAME=VALUE", help="A formula variable; repeatable.")
    ] = None,
    root: Annotated[
        Path | None, typer.Option("--root", metavar="DIR", help="The directory file.exists is confined to.")
    ] = None,
    show_ast: Annotated[bool, typer.Option("--ast", help="Also print the syntax tree.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")] = False,
) -> None:
    variables = parse_vars(var)
    try:
        condition = compile_condition(expression)
    except ConditionSyntaxError as exc:
        _syntax_error(exc, as_json)
    states: dict[str, StepState] = {}
    file_vars: dict[str, str] = {}
    file_current: str | None = None
    if steps is not None:
        try:
            states, file_vars, file_current = load_steps(steps)
        except StepsFileError as exc:
            fail(f"{steps}: {exc}")
    ctx = ConditionContext(
        steps=states,
        current_step=current if current is not None else file_current,
        vars={**file_vars, **variables},
        root=root,
    )
    result = condition.explain(ctx)
    if as_json:
        _print_json(condition, result.satisfied, result.reason, show_ast)
    else:
        if show_ast:
            out.print("ast:")
            out.print(escape(dump(condition.ast, indent=2)))
        verdict = "[bold green]satisfied[/]" if result.satisfied else "[bold red]not satisfied[/]"
        out.print(f"{verdict}: {escape(result.reason)}")
    raise typer.Exit(0 if result.satisfied else 1)


def _syntax_error(exc: ConditionSyntaxError, as_json: bool) -> NoReturn:
    if as_json:
        error = {"message": exc.message, "position": exc.position, "expected": exc.expected}
        print_json({"expression": exc.expression, "error": {**error, "found": exc.found}})
    else:
        err.print(f"[bold red]error:[/] {escape(exc.message)}")
        for line in caret_lines(exc.expression, exc.position).splitlines():
            err.print(f"  {escape(line)}")
    raise typer.Exit(2)


def _print_json(condition: Condition, satisfied: bool, reason: str, show_ast: bool) -> None:
    payload: dict[str, object] = {
        "expression": condition.expression,
        "satisfied": satisfied,
        "reason": reason,
        "references": list(condition.references),
    }
    if show_ast:
        payload["ast"] = dump(condition.ast)
    print_json(payload)


# -- the steps file ------------------------------------------------------------------------------------------


def load_steps(path: Path) -> tuple[dict[str, StepState], dict[str, str], str | None]:
    """Read a steps file: the step states by id, the variables, and the current step id.

    Raises:
        StepsFileError: the file cannot be read, is not JSON, or does not have the documented shape.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StepsFileError("no such file") from None
    except IsADirectoryError:
        raise StepsFileError("is a directory, expected a JSON file") from None
    except UnicodeDecodeError:
        raise StepsFileError("is not UTF-8 text") from None
    except OSError as exc:
        raise StepsFileError(f"cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise StepsFileError(f"is not valid JSON: {exc.msg} at {where}") from None
    except ValueError as exc:
        raise StepsFileError(f"cannot be read: {number_too_long(exc)}") from None
    except RecursionError:
        raise StepsFileError("is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise StepsFileError(f"expected a JSON object with a 'steps' list, found {_kind(data)}")
    unknown = sorted(set(data) - {"steps", "vars", "current"})
    if unknown:
        raise StepsFileError(f"unknown key '{unknown[0]}' at the top level (expected steps, vars, current)")
    if "steps" not in data:
        raise StepsFileError("missing the 'steps' list")
    return _StepsReader(data["steps"]).read(), _vars(data.get("vars", {})), _current(data.get("current"))


def _vars(raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise StepsFileError(f"vars: expected an object of strings, found {_kind(raw)}")
    for name, value in raw.items():
        if not isinstance(value, str):
            raise StepsFileError(f"vars.{name}: expected a string, found {_kind(value)}")
    return dict(raw)


def _current(raw: object) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise StepsFileError(f"current: expected a step id (a string), found {_kind(raw)}")
    return raw


class _StepsReader:
    """Checks every step, then builds ``StepState``s children first (children may be named by id)."""

    def __init__(self, raw: object) -> None:
        if not isinstance(raw, list):
            raise StepsFileError(f"steps: expected a list, found {_kind(raw)}")
        self._raw = raw
        self._entries: dict[str, tuple[dict[str, object], str, list[tuple[str, str]]]] = {}
        self._built: dict[str, StepState] = {}

    def read(self) -> dict[str, StepState]:
        for index, item in enumerate(self._raw):
            self._collect(item, f"steps[{index}]")
        try:
            for step_id in self._entries:
                self._build(step_id, ())
        except RecursionError:
            raise StepsFileError("children are nested too deeply") from None
        return self._built

    def _collect(self, item: object, where: str) -> str:
        if not isinstance(item, dict):
            raise StepsFileError(f"{where}: expected a step object, found {_kind(item)}")
        unknown = sorted(set(item) - {"id", "status", "output", "children"})
        if unknown:
            expected = "expected id, status, output, children"
            raise StepsFileError(f"{where}: unknown key '{unknown[0]}' ({expected})")
        step_id = item.get("id")
        if not isinstance(step_id, str) or not step_id:
            raise StepsFileError(f"{where}.id: expected a non-empty string, found {_kind(step_id)}")
        status = item.get("status")
        if status not in STATUSES:
            shown = repr(status) if isinstance(status, str) else _kind(status)
            raise StepsFileError(f"{where}.status: expected one of {', '.join(STATUSES)}, found {shown}")
        if not isinstance(item.get("output", {}), dict):
            raise StepsFileError(f"{where}.output: expected an object, found {_kind(item.get('output'))}")
        if step_id in self._entries:
            first = self._entries[step_id][1]
            raise StepsFileError(f"{where}.id: '{step_id}' is used twice (first at {first})")
        children: list[tuple[str, str]] = []
        self._entries[step_id] = (item, where, children)
        raw_children = item.get("children", [])
        if not isinstance(raw_children, list):
            raise StepsFileError(f"{where}.children: expected a list, found {_kind(raw_children)}")
        for index, child in enumerate(raw_children):
            child_where = f"{where}.children[{index}]"
            child_id = child if isinstance(child, str) else self._collect(child, child_where)
            children.append((child_id, child_where))
        return step_id

    def _build(self, step_id: str, path: tuple[str, ...]) -> StepState:
        built = self._built.get(step_id)
        if built is not None:
            return built
        if step_id in path:
            cycle = " -> ".join((*path[path.index(step_id) :], step_id))
            raise StepsFileError(f"children form a cycle: {cycle}")
        item, at, children = self._entries[step_id]
        kids = []
        for child_id, where in children:
            if child_id not in self._entries:
                raise StepsFileError(f"{where}: no step has the id '{child_id}'")
            kids.append(self._build(child_id, (*path, step_id)))
        output = item.get("output", {})
        if not isinstance(output, dict):  # _collect refused this already
            raise StepsFileError(f"{at}.output: expected an object, found {_kind(output)}")
        state = StepState(step_id, str(item["status"]), output, kids)
        self._built[step_id] = state
        return state


def _kind(value: object) -> str:
    # A steps file is written by people: a list is a list to them, and an empty string is worth saying.
    return "an empty string" if value == "" else json_type(value, article=True, array="list")


__all__ = ["StepsFileError", "check_condition", "load_steps", "register"]
