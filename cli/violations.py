"""`agents invariant violations | resolve | reconcile`: reported violations, resolving
one, and back-filling the invariant_enforced decisions a plan lacks.

A resolve and a back-fill publish (the resolution's event, the decisions), so they
connect to NATS before they act; the listing only reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.invariant_calls import PlanOpt, call
from cli.render import JsonFlag, clip, dump, emit_json, out, table, when

if TYPE_CHECKING:
    from contracts.invariants.violations import InvariantViolation
    from contracts.trust.policy import Identity
    from services.invariant_reconciliation import Backfilled
    from services.invariants import InvariantService


def _violation_row(v: InvariantViolation, names: dict[str, str]) -> list[str]:
    state = (f"resolved by {escape(v.resolved_by or 'unverified')}" if v.is_resolved
             else "[red]blocking[/]" if v.blocks else "open")
    broke = escape(names.get(v.invariant_id, "(removed)")) + f" {v.invariant_id}"
    return [v.violation_id, broke, v.plan_id, v.severity.value, state,
            when(v.reported_at), escape(clip(v.details, 50))]


def violations(
    plan: PlanOpt = None,
    unresolved: Annotated[bool, typer.Option(
        "--unresolved", help="Only violations not resolved yet.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Reported violations, oldest first, each with the invariant it broke."""
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(plan_id, IdKind.PLAN) if plan_id else None
        found = await ctx.reads.violations.find(wanted, unresolved_only=unresolved)
        names = {i.id: i.name for i in await ctx.reads.invariants.find()}
        if as_json:
            emit_json([{**dump(v), "invariant_name": names.get(v.invariant_id)}
                       for v in found])
            return
        if not found:
            out.print("no violations")
            return
        table(["violation", "invariant", "plan", "severity", "state", "reported", "details"],
              [_violation_row(v, names) for v in found], ids_in={0, 2})

    run(body)


def resolve(
    violation_id: Annotated[str, typer.Argument(help="The violation (ULID).")],
    by: Annotated[str | None, typer.Option(
        hidden=True, help="Ignored: who resolved it is the operator whose NATS_NKEY_SEED "
        "signs the resolution, as verified against LEDGER_PRINCIPALS.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Resolve a violation; its plan is unblocked once no unresolved error remains.

    Signed with NATS_NKEY_SEED and verified against LEDGER_PRINCIPALS: the resolution
    names that operator (within its projects), or no one when unsigned (development)."""
    violation_id = parse_id(violation_id, "violation")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(violation_id, IdKind.VIOLATION)
        await ctx.connected()  # a resolve publishes: NATS first, as every such command
        who = await signed_resolution(ctx, wanted)
        done = await call(ctx, lambda s: s.resolve_violation(wanted, who),
                          publishes=True)
        if as_json:
            emit_json(dump(done))
        else:
            out.print(f"violation {done.violation_id} resolved by "
                      f"{escape(done.resolved_by or 'an unverified operator')}")

    run(body)


async def signed_resolution(ctx: Ctx, violation_id: str) -> Identity:
    """The operator resolving, as verified (bootstrap.identity); a refusal is one line."""
    from bootstrap.identity import own_identity
    from contracts.invariants import subjects
    from contracts.invariants.families import EVENTS
    from contracts.shared.roles import Role
    from contracts.shared.rules import RuleViolation

    held = await call(ctx, lambda s: s.get_violation(violation_id))
    body = json.dumps({"violation_id": held.violation_id, "resolved": True}).encode()
    try:
        who = own_identity(ctx.settings, kind=EVENTS.name,
                           subject=subjects.event(held.plan_id, subjects.RESOLVED),
                           msg_id=subjects.event_msg_id(held.violation_id, subjects.RESOLVED),
                           body=body, roles={Role.OPERATOR})
    except ValueError as exc:
        fail(str(exc))
    if isinstance(who, RuleViolation):
        fail(f"the resolution is refused: {who}")
    return who


def _backfilled_json(done: Backfilled) -> dict[str, Any]:
    return {"plan_id": done.plan_id, "skipped": done.skipped,
            "published": [d.decision_id for d in done.published],
            "invariants": [(d.context_snapshot.hot_context_ref or "").removeprefix("invariant:")
                           for d in done.published]}


def _print_backfilled(done: Backfilled) -> None:
    if done.skipped:
        out.print(f"plan {done.plan_id}: skipped, {escape(done.skipped)}")
    elif not done.published:
        out.print(f"plan {done.plan_id}: nothing to publish")
    else:
        out.print(f"plan {done.plan_id}: published {len(done.published)} "
                  "invariant_enforced decision(s)")
        for d in done.published:
            out.print(f"  {d.decision_id}  {escape(d.question)}")


def reconcile(
    plan: PlanOpt = None,
    all_plans: Annotated[bool, typer.Option(
        "--all", help="Every plan with a root, a page at a time.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Back-fill: publish the invariant_enforced decisions a plan lacks (the invariants
    in force now), through the recorder like the reconciler's. Running it again
    publishes nothing new."""
    if (plan is None) == (not all_plans):
        fail("give --plan ID or --all", USAGE_ERROR)
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        wanted = await ctx.resolve(plan_id, IdKind.PLAN) if plan_id else None

        async def go(s: InvariantService) -> list[Backfilled]:
            if wanted is not None:
                found = await s.backfill([wanted])
                if not as_json:
                    for done in found:
                        _print_backfilled(done)
                return found
            every: list[Backfilled] = []
            async for page in s.backfill_all():
                for done in page:
                    if not as_json and (done.published or done.skipped):
                        _print_backfilled(done)
                every += page
            return every

        found = await call(ctx, go, publishes=True)
        total = sum(len(d.published) for d in found)
        if as_json:
            # --all lists only the plans it did something for (or skipped).
            shown = [d for d in found if plan_id or d.published or d.skipped]
            emit_json({"plans": [_backfilled_json(d) for d in shown],
                       "checked": len(found), "published": total})
        elif plan_id is None:
            out.print(f"{len(found)} plan(s) checked, {total} decision(s) published")

    run(body)
