"""`agents correction cancel | fail | retry`: the operator's commands on a correction.

A cancel (a fail, a retry) is a JetStream publish of a CancelRequest (a FailRequest, a
RetryRequest) by the operator client: the ledger owns every status change. The command
first refuses, from what the ledger holds, one that cannot succeed, then waits briefly
for the ledger's answer — the `cancelled` (`failed`, `pending`) event or a
`cancel_refused` (`fail_refused`, `retry_refused`) — on subscriptions opened before
publishing. `retry --wait` then follows the new round like `plan correct --wait`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, emit_json, out
from contracts.corrections.states import CorrectionStatus
from contracts.shared.views import IdKind

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from clients.operator import CorrectionClient
    from contracts.corrections.record import Correction


async def correction_of(ctx: Ctx, correction_id: str) -> Correction:
    """The correction, or one line saying none has that ID (exit 1)."""
    found = await ctx.reads.corrections.get(correction_id)
    if found is None:
        fail(f"no correction {correction_id} is recorded")
    return found.correction


def cancel(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    reason: Annotated[str | None, typer.Option(help="Why; kept in its history.")] = None,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="How long to wait for the ledger's answer.")] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Cancel a queued, pending or analyzing correction; refused once it executes or has
    ended. A queued one (in the stream, no worker has taken it up) is cancelled before
    it runs."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        from cli.queued import cancel_queued, resolved_correction
        from contracts.corrections.refusals import CancelRefused
        from contracts.corrections.states import CANCELLABLE

        wanted = await resolved_correction(ctx, correction_id)
        if await ctx.reads.corrections.get(wanted) is None:
            await cancel_queued(ctx, wanted, reason, timeout, as_json)
            return
        _, _, outcome = await _command(
            ctx, wanted, verb="cancel", allowed=CANCELLABLE,
            refused=CancelRefused.for_status, done=CorrectionStatus.CANCELLED,
            timeout=timeout, as_json=as_json,
            send=lambda ops, c: ops.cancel(c.correction_id, c.plan_id, reason))
        if as_json:
            emit_json(outcome)
        else:
            out.print(f"correction {wanted} cancelled")

    run(body)


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
        from contracts.corrections.refusals import FailRefused
        from contracts.corrections.states import OPERATOR_FAILABLE

        wanted = await ctx.resolve(correction_id, IdKind.CORRECTION)
        _, _, outcome = await _command(
            ctx, wanted, verb="fail", allowed=OPERATOR_FAILABLE,
            refused=FailRefused.for_status, done=CorrectionStatus.FAILED,
            timeout=timeout, as_json=as_json,
            send=lambda ops, c: ops.fail(c.correction_id, c.plan_id, reason))
        if as_json:
            emit_json(outcome)
        else:
            out.print(f"correction {wanted} failed: {escape(reason)}")

    run(body)


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
        from cli.correct import follow_outcome
        from contracts.corrections.refusals import RetryRefused

        wanted = await ctx.resolve(correction_id, IdKind.CORRECTION)
        ops, c, outcome = await _command(
            ctx, wanted, verb="retry", allowed={CorrectionStatus.FAILED},
            refused=RetryRefused.for_status, done=CorrectionStatus.PENDING,
            timeout=min(timeout, 10.0), as_json=as_json,
            send=lambda ops, c: ops.retry(c.correction_id, c.plan_id, reason))
        if not wait:
            if as_json:
                emit_json(outcome)
            else:
                out.print(f"correction {wanted} retried: pending again; "
                          f"follow it with: agents correction attempts {wanted}")
            return 0
        if not as_json:
            out.print(f"correction {wanted} retried; waiting…")
        # The client follows from its retry's own place in the stream: nothing is missed.
        return await follow_outcome(ops, wanted, c.plan_id, timeout, as_json,
                                    reads=ctx.reads)

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
    from cli.correct import requester

    c = await correction_of(ctx, correction_id)
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
    from clients.command_answer import command_answer

    return await command_answer(ops, c.correction_id, c.plan_id, verb=verb, done=done,
                                send=send, timeout=timeout)
