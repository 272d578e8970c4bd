"""``plangate webhook add | list | deliveries | delete``: owners' webhook endpoints, from the operator's side.

For: registering an endpoint for an owner (its signing secret printed once, alone on stdout), listing
them, an endpoint's latest deliveries and deleting one, on the store (``runs/webhooks``). Every server and
worker on the store delivers them. Not for: sending (``runs/webhooks/deliver.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from plangate.cli._console import err, fail, out, print_json
from plangate.cli._options import ConfigOpt, JsonOpt, StoreOpt
from plangate.cli._session import session
from plangate.errors import UserError
from plangate.runs.webhooks import EVENTS, Webhooks

OwnerOpt = Annotated[str, typer.Option(help="The owner whose runs the endpoint hears of.")]
IdArg = Annotated[str, typer.Argument(help="The endpoint's id (whk_…), as `plangate webhook list` shows it.")]


def register(app: typer.Typer) -> None:
    """Add the ``webhook`` group to ``app``."""
    group = typer.Typer(name="webhook", help="Signed webhooks: owners' endpoints hear of their runs.")
    group.command("add")(webhook_add)
    group.command("list")(webhook_list)
    group.command("deliveries")(webhook_deliveries)
    group.command("delete")(webhook_delete)
    app.add_typer(group, name="webhook", no_args_is_help=True)


def webhook_add(
    ctx: typer.Context,
    url: Annotated[str, typer.Argument(help="Where to post: an http(s) URL on a public address.")],
    event: Annotated[
        list[str] | None,
        typer.Option(
            "--event", "-e", help=f"An event to send: {', '.join(EVENTS)}; repeatable (default: all)."
        ),
    ] = None,
    description: Annotated[str, typer.Option(help="A label for the endpoint.")] = "",
    owner: OwnerOpt = "local",
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Register URL for OWNER's events and print its signing secret (once: keep it)."""
    s = session(ctx, config=config, store=store)
    try:
        endpoint, secret = Webhooks(s.store).add(
            owner,
            url,
            event or list(EVENTS),
            description=description,
            allow_private=s.config.webhooks.allow_private,
        )
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json({"webhook": endpoint.model_dump(mode="json"), "secret": secret})
        return
    print(secret)  # alone on stdout, easy to capture; the rest on stderr
    err.print(
        f"webhook [bold]{endpoint.id}[/] for owner [bold]{escape(endpoint.owner)}[/]: "
        f"{escape(endpoint.url)} ({', '.join(endpoint.events)}); keep the secret now, it is not shown again"
    )


def webhook_list(
    ctx: typer.Context,
    owner: Annotated[str | None, typer.Option(help="Only this owner's endpoints.")] = None,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List endpoints: ids, owners, URLs, events (never their secrets)."""
    s = session(ctx, config=config, store=store)
    try:
        found = Webhooks(s.store).listed(owner=owner)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json({"items": [endpoint.model_dump(mode="json") for endpoint in found]})
        return
    table = Table("id", "owner", "url", "events", "description")
    for endpoint in found:
        table.add_row(
            endpoint.id,
            escape(endpoint.owner),
            escape(endpoint.url),
            ", ".join(endpoint.events),
            escape(endpoint.description),
        )
    out.print(table)


def webhook_deliveries(
    ctx: typer.Context,
    webhook_id: IdArg,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first.")] = 20,
    store: StoreOpt = None,
    json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """An endpoint's latest deliveries: state, attempts, last status, next try."""
    s = session(ctx, config=config, store=store)
    try:
        found = Webhooks(s.store).deliveries(webhook_id, limit=limit)
    except UserError as exc:
        fail(str(exc))
        return
    if json:
        print_json({"items": [delivery.model_dump(mode="json", exclude={"payload"}) for delivery in found]})
        return
    table = Table("id", "event", "state", "attempts", "last status", "next try", "last error")
    for delivery in found:
        table.add_row(
            delivery.id,
            delivery.event,
            delivery.state,
            str(delivery.attempts),
            "" if delivery.last_status is None else str(delivery.last_status),
            _when(delivery.next_at) if delivery.state == "pending" else "",
            escape(delivery.last_error),
        )
    out.print(table)


def webhook_delete(
    ctx: typer.Context,
    webhook_id: IdArg,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Delete an endpoint (its deliveries not made yet are never made)."""
    s = session(ctx, config=config, store=store)
    try:
        gone = Webhooks(s.store).delete(webhook_id)
    except UserError as exc:
        fail(str(exc))
        return
    out.print(f"deleted webhook {gone.id} ({escape(gone.url)})")


def _when(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


__all__ = ["register"]
