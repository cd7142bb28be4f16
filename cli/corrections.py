"""`agents correction list | show | attempts | diff | cancel | fail | retry`.

Reads go through the read port (services/read_ports.py); the commands that change a
correction (cancel, fail, retry) are cli.correction_commands', and `diff` is
cli.history's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli import correction_commands, history
from cli.context import Ctx, parse_id, run
from cli.correction_commands import correction_of
from cli.queued import queued_in_stream, queued_json, resolved_correction, show_queued
from cli.render import JsonFlag, clip, dump, emit_json, out, status_text, table, when
from contracts.corrections.states import CorrectionStatus

if TYPE_CHECKING:
    from contracts.corrections.record import Correction

app = typer.Typer(help="Inspect, cancel, fail and retry corrections.", no_args_is_help=True)


@app.command("list")
def list_(
    plan: Annotated[str | None, typer.Option(help="Only this plan's corrections.")] = None,
    status: Annotated[CorrectionStatus | None, typer.Option(
        case_sensitive=False, help="Only corrections in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many, newest "
                                                            "first.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Corrections, newest first; those still queued in the stream (no worker has taken
    them up) first of all."""
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(plan_id, IdKind.PLAN) if plan_id else None
        queued = await queued_in_stream(ctx, wanted) if status is None else []
        found = await ctx.reads.views.recent_corrections(wanted, status, limit)
        queued = queued[:limit]
        found = found[:max(0, limit - len(queued))]
        if as_json:
            emit_json([queued_json(q) for q in queued] + [dump(c) for c in found])
            return
        if not (found or queued):
            out.print("no corrections")
            return
        rows = [[q.request.correction_id, q.request.plan_id, q.request.decision_id,
                 q.request.mode.value, status_text("queued"),
                 escape(claimed(q.request.requested_by)),
                 when(q.stored_at), escape(clip(q.request.guidance, 40))] for q in queued]
        rows += [[c.correction_id, c.plan_id, c.decision_id, c.mode.value,
                  status_text(c.status.value), escape(c.requester), when(c.requested_at),
                  escape(clip(c.guidance, 40))] for c in found]
        table(["correction", "plan", "target", "mode", "status", "by", "requested",
               "guidance"], rows, ids_in={0, 1, 2})

    run(body)


@app.command("show")
def show(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """One correction: request, status, result and history (or, queued in the stream and
    not yet taken up by a worker, the request)."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        wanted = await resolved_correction(ctx, correction_id)
        if await ctx.reads.corrections.get(wanted) is None:
            await show_queued(ctx, wanted, as_json)
            return
        c = await correction_of(ctx, wanted)
        if as_json:
            emit_json(dump(c))
            return
        _print_correction(c)

    run(body)


def _print_correction(c: Correction) -> None:
    out.print(f"[bold]correction {c.correction_id}[/] {status_text(c.status.value)}")
    out.print(f"  {c.mode.value} of {c.decision_id} in plan {c.plan_id}")
    out.print(f"  requested by {escape(c.requester)} at {when(c.requested_at)}")
    out.print(f"  guidance: {escape(clip(c.guidance, 200))}")
    if c.chosen_option:
        out.print(f"  chosen option: {escape(c.chosen_option)}")
    if c.new_decision_id:
        out.print(f"  new decision: {c.new_decision_id}")
    if c.superseded_ids:
        out.print(f"  superseded: {len(c.superseded_ids)} decision(s) "
                  "[dim](all of them: --json)[/]")
    for p in c.child_plans_rolled_back:
        out.print(f"  child plan rolled back: {p}")
    for p in c.child_plans_spawned:
        out.print(f"  child plan spawned: {p}")
    if c.archived_artifacts_path:
        out.print(f"  archive: {escape(c.archived_artifacts_path)}")
    if c.archive_not_copied_count:
        out.print(f"  not copied: {c.archive_not_copied_count} artifact(s) "
                  "[dim](why: agents correction diff)[/]")
    if c.error:
        out.print(f"  [red]error: {escape(c.error)}[/]")
    out.print("  history:")
    for t in c.history:
        why = t.error or t.reason
        out.print(f"    {when(t.at)} {t.from_status or '-'} → "
                  f"{status_text(t.to_status.value)}"
                  + (f" [dim]{escape(clip(why, 80))}[/]" if why else ""))


@app.command("attempts")
def attempts(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """The correction's execution attempts, oldest first, each with its error."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(correction_id, IdKind.CORRECTION)
        await correction_of(ctx, wanted)
        found = await ctx.reads.attempts.list_by_correction(wanted)
        if as_json:
            emit_json([dump(a) for a in found])
            return
        if not found:
            out.print(f"no attempts yet for correction {wanted}")
            return
        table(["attempt", "state", "created", "completed", "new decision", "archive",
               "error"],
              [[a.id, status_text(a.state.value), when(a.created_at), when(a.completed_at),
                a.new_decision_id or "-", escape(a.archived_artifacts_path or "-"),
                f"[red]{escape(a.error)}[/]" if a.error else "-"] for a in found],
              ids_in={0, 4})

    run(body)


app.command("cancel")(correction_commands.cancel)
app.command("fail")(correction_commands.fail_)
app.command("retry")(correction_commands.retry)
app.command("diff")(history.diff)


def claimed(name: str | None) -> str:
    """A queued request's sender as its body names it: no worker has verified it yet."""
    return f"{name} (unverified)" if name else "unverified"
