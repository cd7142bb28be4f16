"""`agents correction list | show | attempts | cancel | fail | retry`.

Reads come from MongoDB. A cancel (a fail, a retry) is a JetStream publish of a
CancelRequest (a FailRequest, a RetryRequest): the ledger owns every status change. The
command first refuses, from what MongoDB says, one that cannot succeed, then waits
briefly for the ledger's answer — the `cancelled` (`failed`, `pending`) event or a
`cancel_refused` (`fail_refused`, `retry_refused`) — on subscriptions opened before
publishing. `retry --wait` then follows the new round like `plan correct --wait`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli import history
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, console, dump, emit_json, short, status_text, when
from contracts.corrections.states import CorrectionStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from clients.operator import CorrectionClient
    from contracts.corrections.record import Correction

app = typer.Typer(help="Inspect, cancel, fail and retry corrections.", no_args_is_help=True)




async def _get(ctx: Ctx, correction_id: str) -> Correction:
    from store.corrections import CorrectionRepository  # noqa: PLC0415

    found = await CorrectionRepository(ctx.db).get(correction_id)
    if found is None:
        fail(f"no correction {correction_id} is recorded")
    return found.correction


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
        from store.corrections import CorrectionRepository  # noqa: PLC0415

        found = await CorrectionRepository(ctx.db).find(
            plan_id, status, limit)
        if as_json:
            emit_json([dump(c) for c in found])
            return
        if not found:
            console.print("no corrections")
            return
        from rich.table import Table  # noqa: PLC0415

        table = Table("correction", "plan", "target", "mode", "status", "by", "requested",
                      "guidance")
        for c in found:
            table.add_row(c.correction_id, short(c.plan_id), short(c.decision_id), c.mode.value,
                          status_text(c.status.value), escape(c.requested_by),
                          when(c.requested_at), escape(clip(c.guidance, 40)))
        console.print(table)

    run(body)


@app.command("show")
def show(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """One correction: request, status, result and history."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        c = await _get(ctx, correction_id)
        if as_json:
            emit_json(dump(c))
            return
        console.print(f"[bold]correction {c.correction_id}[/] {status_text(c.status.value)}")
        console.print(f"  {c.mode.value} of {c.decision_id} in plan {c.plan_id}")
        console.print(f"  requested by {escape(c.requested_by)} at {when(c.requested_at)}")
        console.print(f"  guidance: {escape(clip(c.guidance, 200))}")
        if c.chosen_option:
            console.print(f"  chosen option: {escape(c.chosen_option)}")
        if c.new_decision_id:
            console.print(f"  new decision: {c.new_decision_id}")
        if c.superseded_ids:
            console.print(f"  superseded: {len(c.superseded_ids)} decision(s) "
                          "[dim](all of them: --json)[/]")
        for p in c.child_plans_rolled_back:
            console.print(f"  child plan rolled back: {p}")
        for p in c.child_plans_spawned:
            console.print(f"  child plan spawned: {p}")
        if c.archived_artifacts_path:
            console.print(f"  archive: {escape(c.archived_artifacts_path)}")
        if c.error:
            console.print(f"  [red]error: {escape(c.error)}[/]")
        console.print("  history:")
        for t in c.history:
            why = t.error or t.reason
            console.print(f"    {when(t.at)} {t.from_status or '-'} → "
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
        from store.attempts import CorrectionAttemptRepository  # noqa: PLC0415

        await _get(ctx, correction_id)
        found = await CorrectionAttemptRepository(ctx.db).list_by_correction(correction_id)
        if as_json:
            emit_json([dump(a) for a in found])
            return
        if not found:
            console.print(f"no attempts yet for correction {correction_id}")
            return
        from rich.table import Table  # noqa: PLC0415

        table = Table("attempt", "state", "created", "completed", "new decision", "archive")
        for a in found:
            table.add_row(a.id, status_text(a.state.value), when(a.created_at),
                          when(a.completed_at), a.new_decision_id or "-",
                          escape(a.archived_artifacts_path or "-"))
        console.print(table)

    run(body)


@app.command("cancel")
def cancel(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    reason: Annotated[str | None, typer.Option(help="Why; kept in its history.")] = None,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="How long to wait for the ledger's answer.")] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Cancel a pending or analyzing correction; refused once it executes or has ended."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        from contracts.corrections.refusals import CancelRefused  # noqa: PLC0415
        from contracts.corrections.states import CANCELLABLE  # noqa: PLC0415

        _, _, outcome = await _command(
            ctx, correction_id, verb="cancel", allowed=CANCELLABLE,
            refused=CancelRefused.for_status, done=CorrectionStatus.CANCELLED,
            timeout=timeout, as_json=as_json,
            send=lambda ops, c: ops.cancel(c.correction_id, c.plan_id, reason))
        if as_json:
            emit_json(outcome)
        else:
            console.print(f"correction {correction_id} cancelled")

    run(body)


@app.command("fail")
def fail_(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    reason: Annotated[str, typer.Option(
        help="Why (1-1,000 characters); becomes its error and is kept in its history.")],
    timeout: Annotated[float, typer.Option(
        min=0.1, help="How long to wait for the ledger's answer.")] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """End a correction stuck in analyzing or executing as FAILED (the tree is untouched)."""
    correction_id = parse_id(correction_id, "correction")
    if not reason.strip() or len(reason) > 1000:
        fail("--reason must hold 1 to 1,000 characters, not all blank", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        from contracts.corrections.refusals import FailRefused  # noqa: PLC0415
        from contracts.corrections.states import OPERATOR_FAILABLE  # noqa: PLC0415

        _, _, outcome = await _command(
            ctx, correction_id, verb="fail", allowed=OPERATOR_FAILABLE,
            refused=FailRefused.for_status, done=CorrectionStatus.FAILED,
            timeout=timeout, as_json=as_json,
            send=lambda ops, c: ops.fail(c.correction_id, c.plan_id, reason))
        if as_json:
            emit_json(outcome)
        else:
            console.print(f"correction {correction_id} failed: {escape(reason)}")

    run(body)


@app.command("retry")
def retry(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    reason: Annotated[str | None, typer.Option(
        help="Why (at most 1,000 characters); kept in its history.")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Follow the new round until APPLIED (exit 0), FAILED (3) or "
        "CANCELLED (4).")] = False,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="How long to wait for the ledger's answer (with --wait: for the "
        "outcome).")] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Start a new attempt of a FAILED correction (failed → pending; earlier attempts stay)."""
    correction_id = parse_id(correction_id, "correction")
    if reason is not None and len(reason) > 1000:
        fail("--reason must hold at most 1,000 characters", USAGE_ERROR)

    async def body(ctx: Ctx) -> int:
        from cli.correct import follow_outcome  # noqa: PLC0415
        from contracts.corrections.refusals import RetryRefused  # noqa: PLC0415

        ops, c, outcome = await _command(
            ctx, correction_id, verb="retry", allowed={CorrectionStatus.FAILED},
            refused=RetryRefused.for_status, done=CorrectionStatus.PENDING,
            timeout=min(timeout, 10.0), as_json=as_json,
            send=lambda ops, c: ops.retry(c.correction_id, c.plan_id, reason))
        if not wait:
            if as_json:
                emit_json(outcome)
            else:
                console.print(f"correction {correction_id} retried: pending again; "
                              f"follow it with: agents correction attempts {correction_id}")
            return 0
        if not as_json:
            console.print(f"correction {correction_id} retried; waiting…")
        # The client follows from its retry's own place in the stream: nothing is missed.
        return await follow_outcome(ops, correction_id, c.plan_id, timeout, as_json)

    code = run(body)
    if code:
        raise typer.Exit(code)


async def _command(ctx: Ctx, correction_id: str, *, verb: str,
                   allowed: Collection[CorrectionStatus],
                   refused: Callable[[str, str, CorrectionStatus], Any],
                   done: CorrectionStatus, timeout: float, as_json: bool,
                   send: Callable[[CorrectionClient, Correction], Awaitable[object]],
                   ) -> tuple[CorrectionClient, Correction, dict[str, object]]:
    """What cancel, fail and retry share: refuse at once, from what MongoDB says, a
    command the ledger would refuse (`refused(...).reason` says why); send it through
    the operator client; wait for `done` or the ledger's refusal. Returns only when the
    command was done; otherwise prints why (and the outcome, with --json) and exits 1."""
    from cli.correct import requester  # noqa: PLC0415

    c = await _get(ctx, correction_id)
    if c.status not in allowed:  # the ledger would refuse it: say so at once
        fail(f"{verb} refused: " + refused(correction_id, c.plan_id, c.status).reason)
    ops = await ctx.operator(requester())
    outcome = await _send_and_wait(ops, c, timeout, done=done, verb=verb,
                                   send=lambda: send(ops, c))
    if outcome["status"] != done:
        if as_json:
            emit_json(outcome)
        fail(str(outcome["message"]))
    return ops, c, outcome


async def _send_and_wait(ops: CorrectionClient, c: Correction, timeout: float, *,
                         send: Callable[[], Awaitable[object]], done: CorrectionStatus,
                         verb: str) -> dict[str, object]:
    from clients.command_answer import command_answer  # noqa: PLC0415

    return await command_answer(ops, c.correction_id, c.plan_id, verb=verb, done=done,
                                send=send, timeout=timeout)


app.command("diff")(history.diff)
