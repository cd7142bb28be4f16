"""`agents dead-letters list | show | retry`: what the workers refused to process.

`retry` is services/dead_letters.py's (the console's Retry calls the same): the
original message republished as first sent, the dead letter deleted once JetStream
stores it; refused for a letter kept only in part, and while the stream's duplicate
window still remembers its Nats-Msg-Id (then it exits 1 and keeps the letter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, run
from cli.errors import fail
from cli.render import JsonFlag, clip, emit_json, out, when

if TYPE_CHECKING:
    from contracts.shared.dead_letter import DeadLetter

app = typer.Typer(help="Messages the workers rejected, and retrying them.",
                  no_args_is_help=True)


def _as_json(dl: DeadLetter) -> dict[str, Any]:
    out: dict[str, Any] = dl.model_dump(mode="json", exclude={"payload"})
    return out | dl.payload_shown()


async def _get(ctx: Ctx, dead_letter_id: str) -> DeadLetter:
    found = await ctx.reads.dead_letters.get(dead_letter_id)
    if found is None:
        fail(f"no dead letter {dead_letter_id} (agents dead-letters list shows them)")
    return found


@app.command("list")
def list_(
    plan: Annotated[str | None, typer.Option(help="Only this plan's dead letters.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Dead letters, newest first."""
    plan_id = plan.upper() if plan else None

    async def body(ctx: Ctx) -> None:
        found = await ctx.reads.dead_letters.list(plan_id, limit)
        if as_json:
            emit_json([_as_json(d) for d in found])
            return
        if not found:
            out.print("no dead letters")
            return
        from rich.table import Table

        table = Table("id", "subject", "rejected", "first reason")
        for d in found:
            reason = d.errors[0].message if d.errors else "-"
            more = f" [dim](+{len(d.errors) - 1})[/]" if len(d.errors) > 1 else ""
            table.add_row(d.id, escape(d.subject), when(d.rejected_at),
                          escape(clip(reason, 70)) + more)
        out.print(table)

    run(body)


@app.command("show")
def show(
    dead_letter_id: Annotated[str, typer.Argument(help="e.g. DECISIONS:17")],
    as_json: JsonFlag = False,
) -> None:
    """One dead letter: where it came from, every reason, and the payload."""

    async def body(ctx: Ctx) -> None:
        d = await _get(ctx, dead_letter_id)
        if as_json:
            emit_json(_as_json(d))
            return
        out.print(f"[bold]dead letter {escape(d.id)}[/]")
        out.print(f"  subject: {escape(d.subject)}")
        out.print(f"  rejected: {when(d.rejected_at)} (delivered {d.delivered}x)")
        if d.plan_id:
            out.print(f"  plan: {d.plan_id}")
        if d.decision_id:
            out.print(f"  decision: {d.decision_id}")
        for k, v in d.headers.items():
            out.print(f"  header {escape(k)}: {escape(v)}")
        if d.truncated:
            out.print(f"  [yellow]{escape(d.kept_in_part())}[/]; it cannot be retried")
        out.print(f"  payload size: {d.payload_size} bytes, sha256 {d.payload_sha256}")
        out.print("  reasons:")
        for e in d.errors:
            field = f" ({e.field})" if e.field else ""
            out.print(f"    [red]{e.rule.value}[/]{escape(field)}: {escape(e.message)}")
        shown = d.payload_shown()
        if shown["payload_encoding"] == "utf-8":
            out.print(f"  payload (first {len(d.payload)} bytes):" if d.payload_truncated
                      else "  payload:")
            out.print(escape(shown["payload"]), markup=True, soft_wrap=True)
        else:
            out.print(f"  payload ({len(d.payload)} bytes kept, not UTF-8), hex:")
            out.print(d.payload.hex(" ", 2), soft_wrap=True)

    run(body)


@app.command("retry")
def retry(
    dead_letter_id: Annotated[str, typer.Argument(help="e.g. DECISIONS:17")],
    as_json: JsonFlag = False,
) -> None:
    """Republish it as it was first sent; delete the dead letter once JetStream stores it."""

    async def body(ctx: Ctx) -> None:
        from services.dead_letters import RetryRefusal, RetryRefused

        await ctx.connected()  # NATS down is said before anything is read
        try:
            done = await ctx.ledger.dead_letters.retry(dead_letter_id)
        except RetryRefused as exc:
            hint = " (agents dead-letters list shows them)" \
                if exc.refusal is RetryRefusal.UNKNOWN else ""
            fail(f"{exc}{hint}")
        if as_json:
            emit_json({"dead_letter_id": done.dead_letter_id, "subject": done.subject,
                       "stream": done.stream, "stream_sequence": done.stream_sequence,
                       "deleted": True})
        else:
            out.print(f"republished {escape(done.dead_letter_id)} to "
                      f"{escape(done.subject)} as {done.stream}:{done.stream_sequence}; "
                      "dead letter deleted")

    run(body)
