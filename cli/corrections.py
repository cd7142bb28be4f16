"""`agents correction list | show | attempts | diff | cancel | fail | retry`.

Reads go through the read port (services/read_ports.py); the commands that change a
correction (cancel, fail, retry) are cli.correction_commands', and `diff` is
cli.history's.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cli import correction_commands, history
from cli.context import Ctx, parse_id, run
from cli.correction_commands import correction_of
from cli.render import JsonFlag, clip, dump, emit_json, out, short, status_text, when
from contracts.corrections.states import CorrectionStatus

app = typer.Typer(help="Inspect, cancel, fail and retry corrections.", no_args_is_help=True)


@app.command("list")
def list_(
    plan: Annotated[str | None, typer.Option(help="Only this plan's corrections.")] = None,
    status: Annotated[CorrectionStatus | None, typer.Option(
        case_sensitive=False, help="Only corrections in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, oldest first.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Corrections in arrival order."""
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        found = await ctx.reads.corrections.find(plan_id, status, limit)
        if as_json:
            emit_json([dump(c) for c in found])
            return
        if not found:
            out.print("no corrections")
            return
        from rich.table import Table

        table = Table("correction", "plan", "target", "mode", "status", "by", "requested",
                      "guidance")
        for c in found:
            table.add_row(c.correction_id, short(c.plan_id), short(c.decision_id), c.mode.value,
                          status_text(c.status.value), escape(c.requester),
                          when(c.requested_at), escape(clip(c.guidance, 40)))
        out.print(table)

    run(body)


@app.command("show")
def show(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """One correction: request, status, result and history."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        c = await correction_of(ctx, correction_id)
        if as_json:
            emit_json(dump(c))
            return
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

    run(body)


@app.command("attempts")
def attempts(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """The correction's execution attempts, oldest first."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        await correction_of(ctx, correction_id)
        found = await ctx.reads.attempts.list_by_correction(correction_id)
        if as_json:
            emit_json([dump(a) for a in found])
            return
        if not found:
            out.print(f"no attempts yet for correction {correction_id}")
            return
        from rich.table import Table

        table = Table("attempt", "state", "created", "completed", "new decision", "archive")
        for a in found:
            table.add_row(a.id, status_text(a.state.value), when(a.created_at),
                          when(a.completed_at), a.new_decision_id or "-",
                          escape(a.archived_artifacts_path or "-"))
        out.print(table)

    run(body)


app.command("cancel")(correction_commands.cancel)
app.command("fail")(correction_commands.fail_)
app.command("retry")(correction_commands.retry)
app.command("diff")(history.diff)
