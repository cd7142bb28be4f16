"""`agents approval list | show | approve | deny`: the decisions held for a person.

A verdict travels over NATS like every command that changes a plan
(`invariants.verdicts.<plan_id>`, signed with NATS_NKEY_SEED): the workers check who
decides (a verified operator within the plan's project), that the approval is still
open, and that the digest named is the content it binds, and keep the outcome under the
verdict's ID, which these commands wait for. `deny --append` also requests an append
correction carrying the guidance, once the denial is applied (the one correction ID is
on the approval's record).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import RUNTIME_ERROR, USAGE_ERROR, fail
from cli.render import JsonFlag, clip, dump, emit_json, out, table, when

if TYPE_CHECKING:
    from contracts.invariants.approval_wire import Verdict, VerdictOutcome

app = typer.Typer(help="Decisions held for a person's approval: list, show, approve, deny.",
                  no_args_is_help=True)

POLL_SECONDS = 0.2
TimeoutOpt = Annotated[float, typer.Option(help="Seconds to wait for the workers' answer.")]


@app.command("list")
def list_(
    plan: Annotated[str | None, typer.Option(help="Only this plan's (ULID).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Decided and expired ones too.")
                     ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Approvals awaiting a verdict (oldest first); --all for every one."""
    plan_id = parse_id(plan, "plan") if plan else None

    async def body(ctx: Ctx) -> None:
        from contracts.invariants.approvals import ApprovalStatus

        found = await ctx.reads.approvals.find(
            None if every else ApprovalStatus.REQUESTED, plan_id)
        if as_json:
            emit_json([dump(a) for a in found])
            return
        if not found:
            out.print("no approvals" if every else "no decisions await approval")
            return
        table(["decision", "plan", "status", "invariants", "requested", "expires", "by"],
              [[a.decision_id, a.plan_id, a.status.value,
                escape(clip(", ".join(a.invariant_names), 40)), when(a.requested_at),
                when(a.expires_at), escape(a.decided_by or "")] for a in found],
              ids_in={0, 1})

    run(body)


@app.command()
def show(
    decision: Annotated[str, typer.Argument(help="The held decision (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """An approval with the decision it binds: what the agent wants to do, and whether
    the decision as stored is still the content the approval binds."""
    decision_id = parse_id(decision, "decision")

    async def body(ctx: Ctx) -> None:
        from contracts.invariants.approvals import decision_digest

        a = await ctx.reads.approvals.get(decision_id)
        if a is None:
            fail(f"no approval was requested for decision {decision_id}")
        d = await ctx.reads.decisions.get(decision_id)
        current = decision_digest(d) if d else None
        if as_json:
            emit_json({**dump(a), "current_digest": current,
                       "decision": dump(d) if d else None})
            return
        out.print(f"approval of decision {a.decision_id} (plan {a.plan_id}): "
                  f"[bold]{a.status.value}[/]")
        if d is not None:
            out.print(f"  {d.decision_type.value}: {escape(d.question)} -> "
                      f"{escape(d.chosen_option)}", soft_wrap=True)
            if d.tool is not None:
                out.print(f"  tool {escape(d.tool.name)} {escape(str(d.tool.arguments))}",
                          soft_wrap=True)
        out.print(f"  held by: {escape(', '.join(a.invariant_names) or '-')}")
        out.print(f"  requested {when(a.requested_at)}, expires {when(a.expires_at)}")
        out.print(f"  digest {a.digest}"
                  + ("" if current == a.digest else " [red](the decision changed since)[/]"))
        if a.decided_at is not None:
            out.print(f"  {a.status.value} {when(a.decided_at)} by "
                      f"{escape(a.decided_by or 'nobody (expired)')}"
                      + (f": {escape(a.reason)}" if a.reason else ""), soft_wrap=True)
        if a.guidance:
            out.print(f"  guidance: {escape(a.guidance)}", soft_wrap=True)

    run(body)


@app.command()
def approve(
    decision: Annotated[str, typer.Argument(help="The held decision (ULID).")],
    reason: Annotated[str | None, typer.Option(help="Why (kept on the record).")] = None,
    timeout: TimeoutOpt = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """Grant the approval: the agent may act on the decision as it is now."""
    from contracts.invariants.approval_wire import Verdict

    _decide(parse_id(decision, "decision"), Verdict.GRANT, reason=reason, guidance=None,
            append=False, timeout=timeout, as_json=as_json)


@app.command()
def deny(
    decision: Annotated[str, typer.Argument(help="The held decision (ULID).")],
    *,
    reason: Annotated[str, typer.Option(help="Why (kept on the record, told the agent).")],
    guidance: Annotated[str | None, typer.Option(
        help="What the agent should do instead (told the agent).")] = None,
    append: Annotated[bool, typer.Option(
        "--append", help="Also request an append correction with the guidance: a child "
        "plan under the decision carrying it.")] = False,
    timeout: TimeoutOpt = 30.0,
    as_json: JsonFlag = False,
) -> None:
    """Deny the approval: the agent does not act, and hears the reason and guidance."""
    from contracts.invariants.approval_wire import Verdict

    if append and not (guidance and guidance.strip()):
        fail("--append needs --guidance: it becomes the child plan's prompt", USAGE_ERROR)
    _decide(parse_id(decision, "decision"), Verdict.DENY, reason=reason, guidance=guidance,
            append=append, timeout=timeout, as_json=as_json)


def _decide(decision_id: str, verdict: Verdict, *, reason: str | None,
            guidance: str | None, append: bool, timeout: float, as_json: bool) -> None:
    async def body(ctx: Ctx) -> int:
        outcome = await send_verdict(ctx, decision_id, verdict, reason=reason,
                                     guidance=guidance, append=append, timeout=timeout)
        return await _report(ctx, outcome, guidance if append else None, as_json)

    code = run(body)
    if code:
        raise typer.Exit(code)


async def send_verdict(ctx: Ctx, decision_id: str, verdict: Verdict, *,
                       reason: str | None, guidance: str | None, append: bool,
                       timeout: float) -> VerdictOutcome:
    """Publish the verdict on the decision as stored now and wait for its outcome."""
    import asyncio

    from contracts.invariants import subjects
    from contracts.invariants.approval_wire import ApprovalVerdict
    from contracts.shared.ids import new_id
    from contracts.shared.outgoing import OutgoingEvent
    from services.approvals import current_digest

    a = await ctx.reads.approvals.get(decision_id)
    if a is None:
        fail(f"no approval was requested for decision {decision_id} (agents approval list)")
    digest = await current_digest(ctx.reads.decisions, decision_id) or "missing"
    v = ApprovalVerdict(plan_id=a.plan_id, decision_id=decision_id, verdict=verdict,
                        digest=digest, reason=reason, guidance=guidance,
                        append_correction_id=new_id() if append else None)
    await ctx.connected()
    await ctx.ledger.publisher.publish_all([OutgoingEvent(
        subjects.verdicts(a.plan_id), v.model_dump_json().encode(), v.request_id)])
    deadline = time.monotonic() + timeout
    while (outcome := await ctx.reads.approvals.outcome(v.request_id)) is None:
        if time.monotonic() > deadline:
            fail(f"verdict {v.request_id} sent; no answer from the workers within "
                 f"{timeout:g}s (are they running?)")
        await asyncio.sleep(POLL_SECONDS)
    return outcome


async def _report(ctx: Ctx, outcome: VerdictOutcome, append_guidance: str | None,
                  as_json: bool) -> int:
    from contracts.corrections.states import CorrectionMode
    from contracts.invariants.approval_wire import VerdictStatus

    refused = outcome.status is VerdictStatus.REFUSED
    correction = None
    if not refused and append_guidance:
        a = await ctx.reads.approvals.get(outcome.decision_id)
        ops = await ctx.operator(outcome.decided_by or "operator")
        correction = await ops.request(outcome.plan_id, outcome.decision_id,
                                       CorrectionMode.APPEND, append_guidance,
                                       correction_id=a.append_correction_id if a else None)
    if as_json:
        emit_json({**dump(outcome), "correction_id": correction})
    elif refused:
        out.print(f"[red]refused[/] {outcome.rule.value if outcome.rule else ''}: "
                  f"{escape(outcome.reason or '')}", soft_wrap=True)
    else:
        out.print(f"decision {outcome.decision_id}: {outcome.verdict.value} applied"
                  + (f"; append correction {correction} requested" if correction else ""))
    return RUNTIME_ERROR if refused else 0
