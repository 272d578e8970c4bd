"""``/v1/formulas`` and ``/v1/tools``: what the server can run, for clients that build or start runs.

For: the formulas on the server's search path (name, description, vars, and the tools its steps name that
this server lacks: such a formula is listed, and says why it cannot start), checking a formula by name or
from its text, and the tool catalogue with JSON schemas (the console's edit form validates against it).
Not for: running anything. Listing and checking read formula files: plain functions, run in FastAPI's
thread pool.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from pydantic import JsonValue

from plangate.errors import FormulaError
from plangate.formulas import Formula, Issue, check_formula, has_errors, parse_formula
from plangate.formulas._schema_errors import FormulaSchemaError
from plangate.formulas.loader import SUFFIXES, read_formula_file, search_dirs
from plangate.formulas.plan import AgentExecutor, ToolExecutor
from plangate.server._deps import OwnerDep, Services, ServicesDep
from plangate.server._problems import Problem, public_issues
from plangate.server._public import public_text
from plangate.server.schemas import CheckRequest

router = APIRouter(tags=["formulas"])


@router.get("/v1/formulas", response_model=None, summary="List the formulas on the server's search path")
def list_formulas(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """Every formula found, first match per name (the order runs use): name, type, description, vars, and
    ``missing_tools``: the tools its steps name that this server does not have (a run of it would be
    refused; empty when it can run). A file that cannot be read is listed with its ``error``."""
    items: list[JsonValue] = []
    seen: set[str] = set()
    for folder in search_dirs(services.search_paths):
        for path in _formula_files(folder):
            name = _name_of(path)
            if name in seen:
                continue
            seen.add(name)
            items.append(_describe(name, path, services))
    return {"items": items}


@router.post("/v1/formulas/check", response_model=None, summary="Check a formula by name or from its text")
def check(body: CheckRequest, services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """The issues ``plangate formula check`` would report (``ok`` is false when any is an error)."""
    tools = services.tools  # the registry: it also tells which steps write (and need consent)
    issues: list[Issue]
    steps: int | None = None
    name = body.formula
    if body.source is not None:
        try:
            formula = parse_formula(body.source, source="<request>")
        except FormulaError as exc:
            return _checked(None, _load_issues(exc), None)
        name = formula.formula
        plan, issues = check_formula(formula, body.vars, tools, search_paths=services.search_paths)
    elif body.formula is not None:
        plan, issues = check_formula(body.formula, body.vars, tools, search_paths=services.search_paths)
    else:  # CheckRequest refuses this already; a request built in code may not have been validated
        raise Problem(
            422, "invalid-request", "expected exactly one of 'formula' (a name) and 'source' (TOML text)"
        )
    if plan is not None:
        steps = len(plan.steps)
    return _checked(name, issues, steps)


@router.get("/v1/tools", response_model=None, summary="The tools the server offers, with JSON schemas")
async def list_tools(services: ServicesDep, owner: OwnerDep) -> dict[str, JsonValue]:
    """Name, description, JSON-Schema parameters, effect (read or write), domain and pack of each tool."""
    items: list[JsonValue] = []
    for tool in services.tools:
        entry = tool.catalogue_entry()
        entry.update(domain=tool.domain, pack=tool.pack, idempotent=tool.idempotent)
        items.append(entry)
    return {"items": items}


def _formula_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found: dict[str, Path] = {}
    for suffix in SUFFIXES:  # TOML first, as the loader does
        for path in sorted(folder.glob(f"*{suffix}")):
            found.setdefault(_name_of(path), path)
    return sorted(found.values(), key=_name_of)


def _name_of(path: Path) -> str:
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def _describe(name: str, path: Path, services: Services) -> dict[str, JsonValue]:
    try:
        formula: Formula = read_formula_file(path)
    except FormulaError as exc:
        return {"name": name, "error": public_text(f"{exc.path}: {exc.detail}" if exc.path else exc.detail)}
    variables: dict[str, JsonValue] = {
        key: var.model_dump(mode="json", exclude_none=True) for key, var in formula.vars.items()
    }
    return {
        "name": formula.formula,
        "type": formula.type,
        "description": formula.description,
        "version": formula.version,
        "vars": variables,
        "missing_tools": list(_missing_tools(formula, services)),
    }


def _missing_tools(formula: Formula, services: Services) -> list[str]:
    """The tools the formula's steps name (a tool step's, an agent step's) that the server lacks, in the
    order the steps name them. Cooked with its defaults (missing vars get stand-ins, as ``show`` does);
    a formula that cannot be cooked names none here (starting it says why)."""
    if formula.type != "workflow":
        return []  # an expansion or an aspect runs only inside another formula
    plan, _ = check_formula(formula, {}, search_paths=services.search_paths)
    if plan is None:
        return []
    have = set(services.tools.names())
    missing: dict[str, None] = {}
    for step in plan.steps:
        executor = step.executor
        named = [executor.name] if isinstance(executor, ToolExecutor) else []
        if isinstance(executor, AgentExecutor):
            named = list(executor.tools)
        missing.update((tool, None) for tool in named if tool not in have)
    return list(missing)


def _load_issues(exc: FormulaError) -> list[Issue]:
    if isinstance(exc, FormulaSchemaError):
        return [Issue(level="error", code="schema", path=path, message=msg) for path, msg in exc.problems]
    return [Issue(level="error", code="load-error", path=exc.path, message=exc.detail)]


def _checked(name: str | None, issues: list[Issue], steps: int | None) -> dict[str, JsonValue]:
    return {
        "formula": name,
        "ok": not has_errors(issues) and steps is not None,
        "steps": steps,
        "issues": public_issues([issue.model_dump(mode="json") for issue in issues]),
    }


__all__ = ["router"]
