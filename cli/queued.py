"""Corrections still queued in the CORRECTIONS stream (no worker has recorded them):
finding one by its ID or last characters, and cancelling it before it runs.

The stream is read by clients/queued.py (past the request consumer's ack floor); the
cancel is the ordinary CancelRequest, which the worker that records the request applies
before running its plan (workers/corrections.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from cli.context import Ctx
from cli.errors import fail
from cli.render import clip, dump, emit_json, out, status_text, when
from contracts.corrections.states import CorrectionStatus
from contracts.shared.views import IdKind

if TYPE_CHECKING:
    from clients.queued import Queued


async def queued_of(ctx: Ctx, correction_id: str) -> Queued | None:
    """The request still in the stream under that ID, not yet recorded by a worker."""
    from clients.queued import queued_requests

    found = await queued_requests(await ctx.nats())
    return next((q for q in found if q.request.correction_id == correction_id), None)


async def resolved_correction(ctx: Ctx, raw: str) -> str:
    """A correction's whole ID from what was typed; a queued one (in the stream only) is
    found by its whole ID or its last characters too."""
    from contracts.shared.views import suffix_of
    from services.id_lookup import IdNotUsable

    try:
        return await ctx.resolve(raw, IdKind.CORRECTION)
    except IdNotUsable:
        suffix = suffix_of(raw)
        if suffix is None:
            raise
        from clients.queued import queued_requests

        queued = [q.request.correction_id for q in await queued_requests(await ctx.nats())
                  if q.request.correction_id.endswith(suffix)]
        if len(queued) == 1:
            return queued[0]
        raise


async def cancel_queued(ctx: Ctx, correction_id: str, reason: str | None, timeout: float,
                         as_json: bool) -> None:
    """Cancel a request no worker has taken up: the cancel goes into the stream after it,
    and the worker that records the request applies the cancel before running it."""
    from cli.correct import requester
    from clients.command_answer import command_answer

    queued = await queued_of(ctx, correction_id)
    if queued is None:
        fail(f"no correction {correction_id} is recorded or queued")
    ops = await ctx.operator(requester())
    c = queued.request
    outcome = await command_answer(
        ops, correction_id, c.plan_id, verb="cancel", done=CorrectionStatus.CANCELLED,
        send=lambda: ops.cancel(correction_id, c.plan_id, reason), timeout=timeout)
    if outcome["status"] == "refused":
        if as_json:
            emit_json(outcome)
        fail(str(outcome["message"]))
    if outcome["status"] is None:
        outcome = {"correction_id": correction_id, "status": "cancel_queued",
                   "message": "the request and its cancel wait in the stream; the worker "
                              "that takes the request up cancels it before it runs"}
    if as_json:
        emit_json(outcome)
    elif outcome["status"] == "cancel_queued":
        out.print(f"correction {correction_id} is queued: cancel queued after it; it will "
                  "be cancelled before it runs (no worker answered within "
                  f"{timeout:g}s: agents status)")
    else:
        out.print(f"correction {correction_id} cancelled")


def queued_json(q: Queued) -> dict[str, Any]:
    return {**dump(q.request), "status": "queued", "stream_sequence": q.stream_sequence,
            "requested_at": q.stored_at.isoformat() if q.stored_at else None}


async def queued_in_stream(ctx: Ctx, plan_id: str | None) -> list[Queued]:
    """Requests in the stream that no worker has recorded yet (newest first); none when
    NATS cannot be reached (the list still shows what MongoDB holds)."""
    import nats.errors

    from bootstrap.nats_source import NatsUnavailable
    from clients.queued import queued_requests

    try:
        found = await queued_requests(await ctx.nats(), plan_id=plan_id)
    except (NatsUnavailable, nats.errors.Error, OSError, TimeoutError):
        return []
    from services.read_model import PLAN_CORRECTIONS_MAX

    recorded = {c.correction_id for c in await ctx.reads.corrections.find(
        plan_id, None, PLAN_CORRECTIONS_MAX)} if found else set()
    left = [q for q in found if q.request.correction_id not in recorded]
    return left[::-1]


async def show_queued(ctx: Ctx, correction_id: str, as_json: bool) -> None:
    from clients.queued import queued_cancel

    q = await queued_of(ctx, correction_id)
    if q is None:
        fail(f"no correction {correction_id} is recorded or queued")
    cancel = await queued_cancel(await ctx.nats(), correction_id, q.request.plan_id,
                                 q.stream_sequence)
    if as_json:
        emit_json({**queued_json(q), "cancel_queued": cancel is not None})
        return
    r = q.request
    out.print(f"[bold]correction {r.correction_id}[/] {status_text('queued')}")
    out.print("  in the stream; no worker has taken it up yet (agents status shows the "
              "workers)")
    out.print(f"  {r.mode.value} of {r.decision_id} in plan {r.plan_id}")
    out.print(f"  requested by {escape(r.requested_by or '?')} (unverified: no worker has "
              f"taken it yet) at {when(q.stored_at)}")
    out.print(f"  guidance: {escape(clip(r.guidance, 200))}")
    if cancel is not None:
        out.print("  [yellow]cancel queued after it[/]: it will be cancelled before it runs")
    else:
        out.print(f"  cancel it before it runs: agents correction cancel {r.correction_id}")
