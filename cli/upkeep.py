"""`agents plan comment | complete | abandon`: what an operator records beside a plan's
tree without changing it.

Each is published over NATS (clients.upkeep) and recorded by the workers with who sent
it as they verified it; the command first refuses, from what the ledger holds, what the
workers would refuse (an unknown decision, a plan that is not active or has a
correction in flight), then waits briefly until the record shows it. With the workers
stopped, the command is stored in the stream and applied when they start: it says so
and exits 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, dump, emit_json, out
from contracts.decisions.comments import COMMENT_MAX_CHARS
from contracts.decisions.plan_ending import REASON_MAX_CHARS

TimeoutOpt = Annotated[float, typer.Option(
    min=0.0, help="How long to wait for the workers to record it.")]
ReasonOpt = Annotated[str | None, typer.Option(
    help=f"Why (at most {REASON_MAX_CHARS:,} characters); kept with the plan.")]
POLL = 0.2


async def recorded(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Whether `check` holds within `timeout` seconds (asked every POLL seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await check():
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL)


QUEUED = ("stored in the stream; the workers record it when they run (none did within "
          "{timeout:g}s: are they running? agents status)")


def comment(
    decision_id: Annotated[str, typer.Argument(help="The decision (its ID or last "
                                                    "characters).")],
    text: Annotated[str, typer.Argument(help=f"The comment (1-{COMMENT_MAX_CHARS:,} "
                                             "characters).")],
    timeout: TimeoutOpt = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Comment on a decision without correcting it (who and when are recorded; plan
    explain and the console show it)."""
    decision_id = parse_id(decision_id, "decision")
    if not text.strip() or len(text) > COMMENT_MAX_CHARS:
        fail(f"the comment must hold 1 to {COMMENT_MAX_CHARS:,} characters, not all blank",
             USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(decision_id, IdKind.DECISION)
        target = await ctx.reads.decisions.get(wanted)
        if target is None:
            fail(f"no decision {wanted} is recorded")
        notes = await ctx.upkeep()
        cid = await notes.comment(target.plan_id, wanted, text)

        async def stored() -> bool:
            return any(c.comment_id == cid for c in await ctx.reads.views.comments(wanted))

        done = await recorded(stored, timeout)
        if as_json:
            emit_json({"comment_id": cid, "decision_id": wanted, "plan_id": target.plan_id,
                       "status": "recorded" if done else "queued"})
        elif done:
            out.print(f"comment {cid} recorded on decision {wanted}")
        else:
            out.print(f"comment {cid} on decision {wanted} " + QUEUED.format(timeout=timeout))

    run(body)


def _end(plan_id: str, status: str, reason: str | None, timeout: float,
         as_json: bool) -> None:
    plan_id = parse_id(plan_id, "plan")
    if reason is not None and (not reason.strip() or len(reason) > REASON_MAX_CHARS):
        fail(f"--reason must hold 1 to {REASON_MAX_CHARS:,} characters, not all blank",
             USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        from contracts.decisions.plan_ending import PlanEndRefused, end_plan
        from contracts.decisions.plan_states import PlanStatus
        from contracts.shared.actor import UNVERIFIED
        from contracts.shared.timestamps import utc_now
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(plan_id, IdKind.PLAN)
        record = await ctx.reads.plans.get(wanted)
        counts = (await ctx.reads.views.counts([wanted]))[wanted]
        try:  # the rules the workers apply, judged now on what the ledger holds
            end_plan(wanted, record, recorded=counts.decisions > 0, to=PlanStatus(status),
                     actor=UNVERIFIED, owner=None, open_corrections=counts.open_corrections,
                     at=utc_now(), reason=reason)
        except PlanEndRefused as exc:
            fail(f"{status} refused: {exc}")
        await (await ctx.upkeep()).end_plan(wanted, status, reason)

        async def ended() -> bool:
            now = await ctx.reads.plans.get(wanted)
            return now is not None and now.status.value == status

        done = await recorded(ended, timeout)
        after = await ctx.reads.plans.get(wanted)
        if as_json:
            emit_json({"plan_id": wanted, "status": status if done else "queued",
                       "record": dump(after) if after else None})
        elif done and after is not None:
            out.print(f"plan {wanted} {status} (by {escape(after.ended_by or '?')})")
        else:
            out.print(f"plan {wanted} {status}: " + QUEUED.format(timeout=timeout))

    run(body)


def complete(
    plan_id: Annotated[str, typer.Argument(help="The plan (its ID or last characters).")],
    reason: ReasonOpt = None,
    timeout: TimeoutOpt = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Mark an active plan completed (by its owner or an operator; not while one of its
    corrections is unfinished)."""
    _end(plan_id, "completed", reason, timeout, as_json)


def abandon(
    plan_id: Annotated[str, typer.Argument(help="The plan (its ID or last characters).")],
    reason: ReasonOpt = None,
    timeout: TimeoutOpt = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Mark an active plan abandoned (by its owner or an operator; not while one of its
    corrections is unfinished)."""
    _end(plan_id, "abandoned", reason, timeout, as_json)
