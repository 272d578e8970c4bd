"""``plangate formula check <source>.semantic.toml``: check a semantic layer against its database, the way
a formula is checked (every issue with its path: unknown tables and columns, expressions a metric may not
hold, unknown keys).

For: finding the database (``--data``, else the SQLite file beside the semantic file with its stem:
``shop.semantic.toml`` checks against ``shop.db``), and printing the issues as rich text or JSON, with the
formula check's exit codes (0 fine, 1 error-level issues, 2 the file or the database cannot be read). Not
for: the format itself (``plangate.tools.data.semantic``).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from plangate.cli._console import fail, out, print_json
from plangate.errors import ConfigError
from plangate.tools.data import DataSourceError, DataSources, QueryLimits
from plangate.tools.data.semantic import (
    SUFFIX,
    SemanticError,
    SemanticIssue,
    check_semantic,
    read_semantic_file,
)

_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def is_semantic_file(name: str) -> bool:
    """Whether ``formula check`` was given a semantic file rather than a formula."""
    return name.endswith(SUFFIX)


def _candidates(path: Path) -> list[Path]:
    stem = path.name.removesuffix(SUFFIX)
    return [path.with_name(stem + suffix) for suffix in _DATABASE_SUFFIXES]


def check_semantic_file(name: str, data: str | None, json: bool) -> None:
    """Check the semantic file ``name`` against ``data`` (or the database beside it); exits as ``formula
    check`` does."""
    path = Path(name).expanduser()
    beside = next((candidate for candidate in _candidates(path) if candidate.is_file()), None)
    target = data if data is not None else beside
    try:
        layer_data = read_semantic_file(path)
        if target is None:
            names = ", ".join(candidate.name for candidate in _candidates(path))
            raise ConfigError(f"no database beside it (looked for {names}): give it with --data")
        source = DataSources().register(path.name.removesuffix(SUFFIX), target)
        schema = source.schema(QueryLimits())
    except SemanticError as exc:
        _failed(path, exc.issues, json)
        return
    except (ConfigError, DataSourceError) as exc:
        _failed(path, [SemanticIssue("error", "unreadable", "", str(exc))], json)
        return
    layer, issues = check_semantic(layer_data, schema, str(path))
    failed = any(issue.level == "error" for issue in issues)
    if json:
        print_json(
            {
                "semantic": str(path),
                "ok": not failed,
                "metrics": len(layer.metrics) if layer is not None else None,
                "dimensions": len(layer.dimensions) if layer is not None else None,
                "issues": [_issue(issue) for issue in issues],
            }
        )
    elif layer is not None and not issues:
        counts = f"{_count(len(layer.metrics), 'metric')}, {_count(len(layer.dimensions), 'dimension')}"
        against = escape(source.describe())
        out.print(f"[green]ok[/] {escape(str(path))}: {counts}, no issues (checked against {against})")
    else:
        for issue in issues:
            at = f"{escape(issue.path)}: " if issue.path else ""
            out.print(f"[red]{issue.level}[/] {at}{escape(issue.message)} [dim]({issue.code})[/]")
        out.print(f"{escape(str(path))}: {len(issues)} error{'s' * (len(issues) != 1)}")
    if failed:
        raise typer.Exit(1)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _failed(path: Path, issues: list[SemanticIssue], json: bool) -> None:
    if json:
        print_json(
            {"semantic": str(path), "ok": False, "metrics": None, "issues": [_issue(i) for i in issues]}
        )
        raise typer.Exit(2)
    fail("; ".join(f"{path}: {issue}" for issue in issues))


def _issue(issue: SemanticIssue) -> dict[str, str]:
    return {"level": issue.level, "code": issue.code, "path": issue.path, "message": issue.message}


__all__ = ["check_semantic_file", "is_semantic_file"]
