"""`agents dead-letters list | show | retry`: what the workers refused to process.

Retry republishes the original payload, with its original headers, to its original
subject through JetStream, and deletes the dead letter once JetStream has stored it.
If the worker refuses it again, that is a new stream message and so a new dead letter
(`<stream>:<new sequence>`), with the reasons as they stand now; the old one is gone.

The message keeps its Nats-Msg-Id, on purpose: it is the same decision or request, and
the ledger's idempotency rests on that ID. So a retry within the stream's duplicate
window (DECISIONS: 2 minutes, CORRECTIONS and INVARIANTS: 10 minutes) of the original
publish is dropped by JetStream as a duplicate; the command then says so, keeps the
dead letter and exits 1 — run it again once the window has passed.

A dead letter of a hostile message may hold it only in part (a payload over 64 KiB
keeps its first 64 KiB, its size and SHA-256; over-long headers or subject are cut):
`show` says so, and `retry` refuses it, since republishing a part would be a lie.
"""

from __future__ import annotations

import base64
import codecs
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, run
from cli.errors import fail
from cli.render import JsonFlag, clip, console, emit_json, when
from contracts.ids import MSG_ID_HEADER

if TYPE_CHECKING:
    from contracts.dead_letter import DeadLetter

app = typer.Typer(help="Messages the workers rejected, and retrying them.",
                  no_args_is_help=True)


def _payload(data: bytes, truncated: bool = False) -> dict[str, str]:
    """Text when it is UTF-8 (almost always JSON), else base64, so nothing is lost.

    A payload kept in part may end in the middle of a character: that tail is dropped."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError:
        return {"payload_encoding": "base64", "payload": base64.b64encode(data).decode()}
    return {"payload_encoding": "utf-8", "payload": text}


def _kept_in_part(d: DeadLetter) -> str:
    """One line saying what of the message this dead letter does not hold."""
    parts = ", ".join(t.value for t in d.truncated)
    size = (f"; payload: first {len(d.payload)} of {d.payload_size} bytes, "
            f"sha256 {d.payload_sha256}") if d.payload_truncated else ""
    return f"kept in part ({parts}){size}"


def _as_json(dl: DeadLetter) -> dict[str, Any]:
    out: dict[str, Any] = dl.model_dump(mode="json", exclude={"payload"})
    return out | _payload(dl.payload, dl.payload_truncated)


async def _get(ctx: Ctx, dead_letter_id: str) -> DeadLetter:
    from store.dead_letters import DeadLetterRepository  # noqa: PLC0415

    found = await DeadLetterRepository(ctx.db).get(dead_letter_id)
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
        from store.dead_letters import DeadLetterRepository  # noqa: PLC0415

        found = await DeadLetterRepository(ctx.db).list(plan_id, limit)
        if as_json:
            emit_json([_as_json(d) for d in found])
            return
        if not found:
            console.print("no dead letters")
            return
        from rich.table import Table  # noqa: PLC0415

        table = Table("id", "subject", "rejected", "first reason")
        for d in found:
            reason = d.errors[0].message if d.errors else "-"
            more = f" [dim](+{len(d.errors) - 1})[/]" if len(d.errors) > 1 else ""
            table.add_row(d.id, escape(d.subject), when(d.rejected_at),
                          escape(clip(reason, 70)) + more)
        console.print(table)

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
        console.print(f"[bold]dead letter {escape(d.id)}[/]")
        console.print(f"  subject: {escape(d.subject)}")
        console.print(f"  rejected: {when(d.rejected_at)} (delivered {d.delivered}x)")
        if d.plan_id:
            console.print(f"  plan: {d.plan_id}")
        if d.decision_id:
            console.print(f"  decision: {d.decision_id}")
        for k, v in d.headers.items():
            console.print(f"  header {escape(k)}: {escape(v)}")
        if d.truncated:
            console.print(f"  [yellow]{escape(_kept_in_part(d))}[/]; it cannot be retried")
        console.print(f"  payload size: {d.payload_size} bytes, sha256 {d.payload_sha256}")
        console.print("  reasons:")
        for e in d.errors:
            field = f" ({e.field})" if e.field else ""
            console.print(f"    [red]{e.rule.value}[/]{escape(field)}: {escape(e.message)}")
        shown = _payload(d.payload, d.payload_truncated)
        if shown["payload_encoding"] == "utf-8":
            console.print(f"  payload (first {len(d.payload)} bytes):" if d.payload_truncated
                          else "  payload:")
            console.print(escape(shown["payload"]), markup=True, soft_wrap=True)
        else:
            console.print(f"  payload ({len(d.payload)} bytes kept, not UTF-8), hex:")
            console.print(d.payload.hex(" ", 2), soft_wrap=True)

    run(body)


@app.command("retry")
def retry(
    dead_letter_id: Annotated[str, typer.Argument(help="e.g. DECISIONS:17")],
    as_json: JsonFlag = False,
) -> None:
    """Republish it as it was first sent; delete the dead letter once JetStream stores it."""

    async def body(ctx: Ctx) -> None:
        from store.dead_letters import DeadLetterRepository  # noqa: PLC0415

        d = await _get(ctx, dead_letter_id)
        if d.truncated:
            fail(f"dead letter {d.id} cannot be retried: it was {_kept_in_part(d)}; "
                 "republish the original message yourself")
        js = (await ctx.nats()).jetstream()
        ack = await js.publish(d.subject, d.payload, headers=d.headers or None, timeout=5.0)
        msg_id = d.headers.get(MSG_ID_HEADER)
        if ack.duplicate:
            fail(f"JetStream dropped the retry as a duplicate of Nats-Msg-Id {msg_id} "
                 f"(stream {ack.stream} still remembers it); dead letter {d.id} is kept — "
                 "retry after the stream's duplicate window")
        await DeadLetterRepository(ctx.db).delete(d.id)
        if as_json:
            emit_json({"dead_letter_id": d.id, "subject": d.subject, "stream": ack.stream,
                       "stream_sequence": ack.seq, "deleted": True})
        else:
            console.print(f"republished {escape(d.id)} to {escape(d.subject)} as "
                          f"{ack.stream}:{ack.seq}; dead letter deleted")

    run(body)
