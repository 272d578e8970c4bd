"""``plangate owner set | reset | show``: an owner's own limits, kept in the store, and where it stands.

For: setting an owner's limits (runs at once, requests per minute, daily tokens or cost, double texting),
which every server and worker on the store applies within seconds and which win over plangate.toml's
``[limits]``; forgetting them; and showing an owner's limits with where each comes from, what its runs
spent today and its runs going and waiting. Not for: holding owners to them (``plangate.runs.quotas``).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from pydantic import JsonValue
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import fail, out, print_json
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt
from plangate.cli._session import session
from plangate.config import LimitsConfig
from plangate.errors import UserError
from plangate.runs.quotas import KEYS, Admissions, DailyUsage, LimitSettings, OwnerLimits
from plangate.store import Store

NameArg = Annotated[str, typer.Argument(help="The owner (as its tokens name it).")]


def register(app: typer.Typer) -> None:
    """Add the ``owner`` group to ``app``."""
    group = typer.Typer(name="owner", help="An owner's own limits (in the store) and where it stands.")
    group.command("set")(owner_set)
    group.command("reset")(owner_reset)
    group.command("show")(owner_show)
    app.add_typer(group, name="owner", no_args_is_help=True)


def owner_set(
    ctx: typer.Context,
    name: NameArg,
    runs_at_once: Annotated[int | None, typer.Option(min=1, help="Runs going at once; more wait.")] = None,
    requests_per_minute: Annotated[
        int | None, typer.Option(min=1, help="Run starts, questions and answers a minute.")
    ] = None,
    daily_tokens: Annotated[
        int | None, typer.Option(min=1, help="Tokens its runs may use a UTC day.")
    ] = None,
    daily_cost: Annotated[
        float | None, typer.Option(min=0.000001, help="Cost its runs may have a day.")
    ] = None,
    double_texting: Annotated[
        str | None, typer.Option(help="A message while a turn runs: reject, queue or cancel.")
    ] = None,
    no_limit: Annotated[
        list[str] | None,
        typer.Option("--no-limit", metavar="KEY", help="No limit for this owner on KEY; repeatable."),
    ] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Set NAME's own limits (they win over plangate.toml's); the others stay as they are."""
    changes: dict[str, JsonValue] = {
        key: value
        for key, value in (
            ("runs_at_once", runs_at_once),
            ("requests_per_minute", requests_per_minute),
            ("daily_tokens", daily_tokens),
            ("daily_cost", daily_cost),
            ("double_texting", double_texting),
        )
        if value is not None
    }
    numeric = [key for key in KEYS if key != "double_texting"]
    for key in no_limit or ():
        if key not in numeric:
            fail(f"--no-limit: expected one of {', '.join(numeric)}; found {key!r}")
        changes[key] = None
    if not changes:
        fail("owner set: give a limit to set (--runs-at-once, --requests-per-minute, …) or --no-limit KEY")
    s = session(ctx, config=config, store=store)
    try:
        OwnerLimits(s.store).set(name, changes)
    except UserError as exc:
        fail(str(exc))
        return
    _show(s.store, s.config.limits, name, json)


def owner_reset(
    ctx: typer.Context,
    name: NameArg,
    key: Annotated[
        list[str] | None, typer.Argument(help=f"The limits to forget (default: all): {', '.join(KEYS)}.")
    ] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Forget NAME's own limits (or those named): plangate.toml's apply again."""
    unknown = [item for item in key or () if item not in KEYS]
    if unknown:
        fail(f"owner reset: unknown limit {unknown[0]!r}; expected one of {', '.join(KEYS)}")
    s = session(ctx, config=config, store=store)
    try:
        OwnerLimits(s.store).reset(name, tuple(key or ()))
    except UserError as exc:
        fail(str(exc))
        return
    _show(s.store, s.config.limits, name, json)


def owner_show(
    ctx: typer.Context,
    name: NameArg,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """NAME's limits and where each comes from, what its runs spent today, its runs going and waiting."""
    s = session(ctx, config=config, store=store)
    try:
        _show(s.store, s.config.limits, name, json)
    except UserError as exc:
        fail(str(exc))


def _show(store: Store, file_limits: LimitsConfig, name: str, json: bool) -> None:
    settings = LimitSettings.of_config(file_limits)
    overrides = OwnerLimits(store).get(name)
    limits = settings.of(name).over(overrides)
    spent = DailyUsage(store).today(name)
    standing = Admissions(store).standing(name)
    origins = {
        key: "owner" if key in overrides else "file" if key in settings.owners.get(name, {}) else "default"
        for key in KEYS
    }
    if json:
        print_json(
            {
                "owner": name,
                "limits": limits.view(),
                "from": dict(origins),
                "today": dataclasses.asdict(spent),
                "runs": {"going": standing.going, "waiting": list(standing.waiting)},
            }
        )
        return
    table = Table("limit", "value", "from")
    for key, value in limits.view().items():
        table.add_row(key, "no limit" if value is None else str(value), origins[key])
    out.print(f"owner [bold]{escape(name)}[/]")
    out.print(table)
    out.print(
        f"today ({spent.day} UTC): {spent.runs} run(s) spent {spent.tokens} tokens, cost {spent.cost:g}; "
        f"{standing.going} run(s) going, {len(standing.waiting)} waiting for a slot"
    )


__all__ = ["register"]
