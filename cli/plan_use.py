"""`agents plan use PLAN TEMPLATE`: apply an action template to a plan.

Sent over NATS like every command that changes a plan (`invariants.templates.<plan_id>`,
signed with NATS_NKEY_SEED when set): the workers check who asks (an operator within
the plan's project, or the plan's owner) and apply it; this command waits for the
outcome the workers keep under the request's ID and prints the invariants promoted.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import RUNTIME_ERROR, USAGE_ERROR, fail
from cli.render import JsonFlag, dump, emit_json, out

POLL_SECONDS = 0.2


def use(
    plan: Annotated[str, typer.Argument(help="The plan (ULID); its root must be recorded.")],
    template: Annotated[str, typer.Argument(help="The action template, e.g. db-migration.")],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the workers' answer.")
                       ] = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """Apply an action template to a plan: its ACTION invariants bind the plan from now
    on (promoted to the plan's scope, an invariant_enforced decision each)."""
    plan_id = parse_id(plan, "plan")
    if not template.strip() or any(ch.isspace() for ch in template):
        fail("the template is a name without spaces, e.g. db-migration", USAGE_ERROR)

    async def body(ctx: Ctx) -> None:
        import asyncio

        from contracts.invariants import subjects
        from contracts.invariants.plan_use import PlanUseRequest, PlanUseStatus
        from contracts.shared.outgoing import OutgoingEvent

        request = PlanUseRequest(plan_id=plan_id, action_template=template.strip())
        await ctx.connected()
        await ctx.ledger.publisher.publish_all([OutgoingEvent(
            subjects.templates(plan_id), request.model_dump_json().encode(),
            request.request_id)])
        templates = ctx.ledger.templates
        assert templates is not None
        deadline = time.monotonic() + timeout
        while (outcome := await templates.outcome(request.request_id)) is None:
            if time.monotonic() > deadline:
                fail(f"request {request.request_id} sent; no answer from the workers within "
                     f"{timeout:g}s (are they running?)")
            await asyncio.sleep(POLL_SECONDS)
        if as_json:
            emit_json(dump(outcome))
        elif outcome.status is PlanUseStatus.REFUSED:
            fail(f"{outcome.rule.value if outcome.rule else 'refused'}: {outcome.reason}",
                 RUNTIME_ERROR)
        else:
            out.print(f"template {escape(outcome.action_template)} applied to plan "
                      f"{outcome.plan_id}: {len(outcome.promoted)} invariant(s) promoted"
                      + (f" ({', '.join(outcome.promoted)})" if outcome.promoted else ""))
        if outcome.status is PlanUseStatus.REFUSED:
            raise typer.Exit(RUNTIME_ERROR)

    run(body)
