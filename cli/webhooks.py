"""`agents webhook add | list | remove | deliveries`: HTTP endpoints subscribed to events.

`add` checks the URL (http or https, no user part) and the event types, makes the
webhook's signing secret and prints it once (or writes it to `--secret-file`, a new
file readable by its owner alone); nothing prints it again. Deliveries are the
workers' (docs/webhooks.md); `deliveries` shows each with its attempts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, emit_json, out, when

if TYPE_CHECKING:
    from contracts.webhooks.model import Delivery, Webhook

app = typer.Typer(help="HTTP endpoints subscribed to the ledger's events (signed per "
                  "Standard Webhooks).", no_args_is_help=True)

EVENTS_HELP = ("An event type to deliver (repeat the option): correction.applied, "
               "correction.*, invariant.violated, decision.persisted, * for all.")


def _user() -> str:
    return os.environ.get("USER") or os.environ.get("USERNAME") or "operator"


def _webhook_json(w: Webhook) -> dict[str, Any]:
    return w.model_dump(mode="json")


def _write_secret(path: Path, secret: str) -> None:
    """A new file, owner-only, holding the secret and a newline."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(f"{path} exists: name a new file for the secret", USAGE_ERROR)
    except OSError as exc:
        fail(f"cannot create {path}: {exc.strerror}", USAGE_ERROR)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")


@app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="The endpoint: an http or https URL.")],
    *,
    events: Annotated[list[str], typer.Option("--events", "-e", help=EVENTS_HELP)],
    description: Annotated[str | None, typer.Option(help="What it is for.")] = None,
    secret_file: Annotated[Path | None, typer.Option(
        help="Write the secret to this new file (mode 600) instead of printing it.")] = None,
    by: Annotated[str | None, typer.Option(help="Who adds it (default: $USER).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Subscribe URL to the event types; prints the signing secret once."""
    from contracts.webhooks.policy import RefusedUrl

    async def body(ctx: Ctx) -> None:
        try:
            w, secret = await ctx.ledger.webhooks.add(url, events, by=by or _user(),
                                                      description=description)
        except (RefusedUrl, ValueError) as exc:
            fail(str(exc), USAGE_ERROR)
        if secret_file is not None:
            _write_secret(secret_file, secret)
        if as_json:
            emit_json(_webhook_json(w) | ({} if secret_file else {"secret": secret}))
            return
        out.print(f"webhook {w.webhook_id} added: {escape(w.url)}")
        out.print(f"  events: {', '.join(w.events)}")
        if secret_file is not None:
            out.print(f"  secret written to {escape(str(secret_file))} (not shown again)")
        else:
            out.print("  secret (shown this once; verify deliveries with it):")
            out.print(f"  {secret}")
        if not ctx.ledger.webhooks.sealer.sealing:
            out.print("  [dim]stored in MongoDB as it is (set WEBHOOK_SECRET_KEY to seal "
                      "secrets at rest)[/]")

    if secret_file is not None and secret_file.exists():
        fail(f"{secret_file} exists: name a new file for the secret", USAGE_ERROR)
    run(body)


@app.command("list")
def list_(
    removed: Annotated[bool, typer.Option(help="Include removed webhooks.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Webhooks, oldest first (never their secrets)."""

    async def body(ctx: Ctx) -> None:
        found = await ctx.ledger.webhooks.listed(removed=removed)
        if as_json:
            emit_json([_webhook_json(w) for w in found])
            return
        if not found:
            out.print("no webhooks (agents webhook add URL --events TYPE)")
            return
        from rich.table import Table

        table = Table("id", "url", "events", "added", "by", "removed")
        for w in found:
            table.add_row(w.webhook_id, escape(clip(w.url, 50)), ", ".join(w.events),
                          when(w.created_at), escape(w.created_by),
                          when(w.removed_at) if w.removed_at else "-")
        out.print(table)

    run(body)


@app.command("remove")
def remove(
    webhook_id: Annotated[str, typer.Argument(help="The webhook's ID.")],
    by: Annotated[str | None, typer.Option(help="Who removes it (default: $USER).")] = None,
) -> None:
    """Stop delivering to a webhook (its secret is deleted; its deliveries stay listed)."""
    from services.webhooks import WebhookNotFound

    wid = parse_id(webhook_id, "webhook ID")

    async def body(ctx: Ctx) -> None:
        try:
            w = await ctx.ledger.webhooks.remove(wid, by=by or _user())
        except WebhookNotFound:
            fail(f"no active webhook {wid} (agents webhook list shows them)")
        out.print(f"webhook {w.webhook_id} removed: {escape(w.url)}")

    run(body)


def _delivery_row(d: Delivery) -> list[str]:
    last = d.attempts[-1] if d.attempts else None
    answer = "-" if last is None else (str(last.status_code) if last.status_code
                                       else clip(last.error or "?", 40))
    return [d.delivery_id.split(":", 1)[1], d.webhook_id, d.event_type.removeprefix(
        "io.decision-ledger."), d.status.value, str(len(d.attempts)), escape(answer),
        when(d.next_at) if d.status.value == "pending" else when(d.ended_at)]


@app.command("deliveries")
def deliveries(
    webhook: Annotated[str | None, typer.Option(help="Only this webhook's.")] = None,
    status: Annotated[str | None, typer.Option(
        help="pending, delivered or dead_lettered.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Deliveries, newest first, with their attempts (dead_lettered: every try failed)."""
    from contracts.webhooks.model import DeliveryStatus

    wid = parse_id(webhook, "webhook ID") if webhook else None
    try:
        wanted = DeliveryStatus(status) if status else None
    except ValueError:
        fail(f"--status {status!r}: one of pending, delivered, dead_lettered", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        found = await ctx.ledger.webhooks.deliveries(wid, wanted, limit)
        if as_json:
            emit_json([d.model_dump(mode="json") for d in found])
            return
        if not found:
            out.print("no deliveries")
            return
        from rich.table import Table

        table = Table("event", "webhook", "type", "status", "tries", "last answer",
                      "next / ended")
        for d in found:
            table.add_row(*_delivery_row(d))
        out.print(table)

    run(body)
