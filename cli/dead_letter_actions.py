"""`agents dead-letters retry | discard`: what an operator does with a dead letter, one
by its ID or every one a filter (`--rule`, `--plan`) matches.

`retry` is services/dead_letters.py's (the console's Retry calls the same): only what a
retry can fix is republished; `discard` is published over NATS and recorded by the
workers (who, when, why). cli.dead_letters attaches both and holds the reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, emit_json, out
from contracts.shared.dead_letter_care import REASON_MAX_CHARS

if TYPE_CHECKING:
    from contracts.shared.dead_letter import DeadLetter
    from services.dead_letters import Retried, RetryRefused

RuleOpt = Annotated[str | None, typer.Option(
    help="Every kept letter whose first reason is this rule (e.g. max_deliveries).")]
PlanOpt = Annotated[str | None, typer.Option(help="Only this plan's dead letters.")]
LimitOpt = Annotated[int, typer.Option(min=1, max=500, help="At most this many, newest "
                                                            "first.")]


async def letter_plan(ctx: Ctx, plan: str | None) -> str | None:
    """The plan a `--plan` names (its ID or last characters)."""
    from contracts.shared.views import IdKind

    return await ctx.resolve(plan, IdKind.PLAN) if plan else None


async def _get(ctx: Ctx, dead_letter_id: str) -> DeadLetter:
    found = await ctx.reads.dead_letters.get(dead_letter_id)
    if found is None:
        fail(f"no dead letter {dead_letter_id} (agents dead-letters list shows them)")
    return found


def _one_or_filter(dead_letter_id: str | None, rule: str | None, plan: str | None) -> None:
    if dead_letter_id is not None and (rule or plan):
        fail("give a dead letter ID, or --rule / --plan, not both", USAGE_ERROR)
    if dead_letter_id is None and not (rule or plan):
        fail("give a dead letter ID, or --rule / --plan for every letter they match",
             USAGE_ERROR)


def _retried_json(r: Retried | RetryRefused) -> dict[str, Any]:
    from services.dead_letters import Retried

    if isinstance(r, Retried):
        return {"dead_letter_id": r.dead_letter_id, "subject": r.subject, "stream": r.stream,
                "stream_sequence": r.stream_sequence, "deleted": True}
    return {"dead_letter_id": r.dead_letter_id, "refused": r.refusal.value,
            "message": str(r)}


def retry(
    dead_letter_id: Annotated[str | None, typer.Argument(help="e.g. DECISIONS:17")] = None,
    rule: RuleOpt = None,
    plan: PlanOpt = None,
    limit: LimitOpt = 100,
    as_json: JsonFlag = False,
) -> None:
    """Republish it as it was first sent, if a retry can succeed; delete the dead letter
    once JetStream stores it. With --rule / --plan: every letter they match."""
    _one_or_filter(dead_letter_id, rule, plan)
    plan = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> int:
        from services.dead_letters import RetryRefusal, RetryRefused

        await ctx.connected()  # NATS down is said before anything is read
        service = ctx.ledger.dead_letters
        if dead_letter_id is None:
            return _bulk_retried(await service.retry_matching(
                plan_id=await letter_plan(ctx, plan), rule=rule, limit=limit), as_json)
        try:
            done = await service.retry(dead_letter_id)
        except RetryRefused as exc:
            if as_json:
                emit_json(_retried_json(exc))
            hint = " (agents dead-letters list shows them)" \
                if exc.refusal is RetryRefusal.UNKNOWN else ""
            fail(f"{exc}{hint}")
        if as_json:
            emit_json(_retried_json(done))
        else:
            out.print(f"republished {escape(done.dead_letter_id)} to "
                      f"{escape(done.subject)} as {done.stream}:{done.stream_sequence}; "
                      "dead letter deleted")
        return 0

    code = run(body)
    if code:
        raise typer.Exit(code)


def _bulk_retried(outcomes: list[Retried | RetryRefused], as_json: bool) -> int:
    """Each letter's outcome; exit 1 when any was refused."""
    from services.dead_letters import Retried

    refused = [r for r in outcomes if not isinstance(r, Retried)]
    if as_json:
        emit_json({"retried": len(outcomes) - len(refused), "refused": len(refused),
                   "outcomes": [_retried_json(r) for r in outcomes]})
        return 1 if refused else 0
    for r in outcomes:
        if isinstance(r, Retried):
            out.print(f"republished {escape(r.dead_letter_id)} as "
                      f"{r.stream}:{r.stream_sequence}")
        else:
            out.print(f"[yellow]kept[/] {escape(r.dead_letter_id)}: {escape(str(r))}")
    out.print(f"{len(outcomes) - len(refused)} retried, {len(refused)} kept"
              if outcomes else "no dead letters match")
    return 1 if refused else 0


def discard(
    dead_letter_id: Annotated[str | None, typer.Argument(help="e.g. DECISIONS:17")] = None,
    *,
    reason: Annotated[str, typer.Option(
        help=f"Why (1-{REASON_MAX_CHARS:,} characters); kept with the letter.")],
    rule: RuleOpt = None,
    plan: PlanOpt = None,
    limit: LimitOpt = 100,
    timeout: Annotated[float, typer.Option(
        min=0.0, help="How long to wait for the workers to record it.")] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Discard a dead letter no retry can fix (recorded: who, when, why; it stays
    readable with `list --discarded`). With --rule / --plan: every letter they match."""
    _one_or_filter(dead_letter_id, rule, plan)
    if not reason.strip() or len(reason) > REASON_MAX_CHARS:
        fail(f"--reason must hold 1 to {REASON_MAX_CHARS:,} characters, not all blank",
             USAGE_ERROR)
    plan = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        from cli.upkeep import recorded

        if dead_letter_id is not None:
            letters = [await _get(ctx, dead_letter_id)]
        else:
            letters = await ctx.reads.dead_letters.list(await letter_plan(ctx, plan), limit,
                                                        rule=rule)
        notes = await ctx.upkeep()
        for letter in letters:
            await notes.discard(letter.id, reason)
        wanted = {d.id for d in letters}
        left = set(wanted)

        async def gone() -> bool:
            for i in list(left):
                now = await ctx.reads.dead_letters.get(i)
                if now is None or now.discarded_at is not None:
                    left.discard(i)
            return not left

        done = await recorded(gone, timeout) if letters else True
        if as_json:
            emit_json({"discarded": sorted(wanted), "status": "recorded" if done
                       else "queued", "reason": reason})
        elif not letters:
            out.print("no dead letters match")
        elif done:
            out.print(f"discarded {len(letters)} dead letter(s): "
                      + ", ".join(escape(i) for i in sorted(wanted)))
        else:
            out.print(f"{len(letters)} discard(s) stored in the stream; the workers record "
                      f"them when they run (none did within {timeout:g}s: agents status)")

    run(body)
