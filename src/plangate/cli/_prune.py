"""``plangate prune``: remove ended runs past a horizon, with everything that hangs on them.

For: the operator's prune (``--older-than 30d``, else plangate.toml's ``[retention] older_than``), one
owner's or everyone's, a dry run that says what would go, and the compaction after it (SQLite's file
shrinks). Not for: what a prune removes and keeps (``store/retention.py``) or the server's own passes
(``server/_retention.py``).
"""

from __future__ import annotations

from typing import Annotated

import typer

import plangate.copilot._conversations  # registers the turns' part of a prune
import plangate.runs.webhooks  # noqa: F401  (registers the deliveries' part of a prune)
from plangate.cli._console import fail, out, print_json
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt
from plangate.cli._session import session
from plangate.errors import ConfigError, UserError
from plangate.store import retention


def register(app: typer.Typer) -> None:
    """Add ``prune`` to ``app``."""
    app.command("prune")(prune_command)


def prune_command(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Remove ended runs nothing touched for this long (30d, 12h, 1d12h, 90s); default "
            "plangate.toml's [retention] older_than.",
        ),
    ] = None,
    owner: Annotated[str | None, typer.Option(help="Only this owner's runs (default: everyone's).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    no_compact: Annotated[
        bool,
        typer.Option(
            "--no-compact",
            help="Leave the freed space to later runs (default: SQLite's file is rewritten, VACUUM; "
            "PostgreSQL's tables vacuumed).",
        ),
    ] = False,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Remove ended runs (completed, failed, cancelled, …) older than the horizon with their sub-runs,
    events, snapshots, interactions, receipts and copilot turns, one run at a time; a run waiting on a
    person, queued or running is never removed."""
    s = session(ctx, config=config, store=store)
    try:
        age = older_than if older_than is not None else s.config.retention.older_than
        if age is None:
            raise ConfigError(
                "prune: say how old a run must be: --older-than 30d, or [retention] older_than in "
                "plangate.toml"
            )
        report = retention.prune(
            s.store, retention.parse_age(age, "--older-than"), owner=owner, dry_run=dry_run
        )
        if not dry_run and not no_compact and report.trees:
            retention.compact(s.store)
            report.compacted = True
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json(
            {
                "dry_run": report.dry_run,
                "trees": report.trees,
                "runs": report.runs,
                "rows": dict(report.rows),
                "kept": report.kept,
                "compacted": report.compacted,
            }
        )
        return
    verb = "would remove" if dry_run else "removed"
    rows = ", ".join(f"{count} {table}" for table, count in sorted(report.rows.items()) if count)
    out.print(f"{verb} {report.runs} run(s) in {report.trees} tree(s){f' ({rows})' if rows else ''}")
    if report.kept:
        out.print(
            f"kept {report.kept} run tree(s) past the horizon: a run in each still waits, runs or is leased"
        )
