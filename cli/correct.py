"""`agents plan correct`: dry-run, request, and optionally follow a correction.

Writes go through the operator client (clients/operator.py), so the CLI speaks the
wire contract exactly as any client does: the request is a JetStream publish with
Nats-Msg-Id = correction_id, the dry run a core NATS request, and `--wait` follows
`corrections.events.<plan_id>.*` from the request's own stream position, so no
transition can slip between "published" and "listening".

Exit codes of `--wait`: 0 APPLIED, 3 FAILED, 4 CANCELLED, 1 no outcome in --timeout.
They differ from 1 (error) and 2 (usage) so a script can tell "the ledger refused the
correction" from "the command could not run".
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.child_plan import show_child_plan
from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, dump, emit_json, out, risk_text, short, status_text
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.guidance import GUIDANCE_MAX_CHARS

if TYPE_CHECKING:
    from clients.operator import CorrectionClient
    from contracts.corrections.dry_run import DryRunReport

EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_CODES = {CorrectionStatus.APPLIED: 0, CorrectionStatus.FAILED: EXIT_FAILED,
              CorrectionStatus.CANCELLED: EXIT_CANCELLED}
"""The exit code of `--wait` per terminal status."""
DRY_RUN_GUIDANCE = "(dry run: no guidance given)"
DRY_RUN_TIMEOUT = 30.0


def _guidance(guidance: str | None, mode: CorrectionMode, dry_run: bool) -> str | None:
    """None lets a revert take its default guidance (contracts.corrections.requests.
    default_revert_guidance: it names the target and the operator, and the replacement's
    chosen option becomes `Revert: <original choice>`), as the seeds' `agents plan
    correct --mode=revert ID` expects. An append's guidance is the child plan's prompt,
    which nothing can make up, so it is required. A dry run changes nothing."""
    if guidance is None:
        if mode is CorrectionMode.REVERT:
            return None
        if dry_run:
            return DRY_RUN_GUIDANCE
        fail("--guidance is required for an append: it becomes the child plan's prompt",
             USAGE_ERROR)
    if not guidance.strip():
        fail("--guidance is empty; give 1 to 10,000 characters", USAGE_ERROR)
    if len(guidance) > GUIDANCE_MAX_CHARS:
        fail(f"--guidance is {len(guidance):,} characters; at most {GUIDANCE_MAX_CHARS:,} "
             "allowed", USAGE_ERROR)
    return guidance


def requester() -> str:
    return os.environ.get("USER") or os.environ.get("USERNAME") or "operator"


def correct(
    decision_id: Annotated[str, typer.Argument(help="The decision to correct (ULID).")],
    *,
    mode: Annotated[CorrectionMode, typer.Option(
        "--mode", case_sensitive=False,
        help="revert: supersede its subtree; append: spawn a child plan under it.")],
    guidance: Annotated[str | None, typer.Option(
        help="What to do instead, 1-10,000 characters (required for an append unless "
        "--dry-run; a revert defaults to 'Revert of decision ID requested by USER').")] = None,
    chosen_option: Annotated[str | None, typer.Option(
        help="Revert only: the replacement's chosen option (default: the guidance, or "
        "'Revert: <original choice>' without --guidance).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the impact report; change nothing.")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Follow the correction until APPLIED (exit 0), FAILED (3) or "
        "CANCELLED (4).")] = False,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="With --wait: give up (exit 1) after this many seconds.")] = 300.0,
    as_json: JsonFlag = False,
) -> None:
    """Correct a decision: --dry-run shows the impact; otherwise request it and print its ID."""
    decision_id = parse_id(decision_id, "decision")
    text = _guidance(guidance, mode, dry_run)
    if chosen_option is not None and not chosen_option.strip():
        fail("--chosen-option is empty", USAGE_ERROR)

    async def body(ctx: Ctx) -> int:
        target = await ctx.reads.decisions.get(decision_id)
        if target is None:
            fail(f"no decision {decision_id} is recorded")
        ops = await ctx.operator(requester())
        if dry_run:
            _show_report(await _dry_run(ops, target.plan_id, decision_id, mode, text,
                                        chosen_option=chosen_option), as_json)
            return 0
        if target.superseded_by is not None:
            fail(f"decision {decision_id} is already superseded by {target.superseded_by}; "
                 f"correct the current decision {target.superseded_by} instead")
        cid = await ops.request(target.plan_id, decision_id, mode, text,
                                chosen_option=chosen_option)
        if not wait:
            if as_json:
                emit_json({"correction_id": cid, "plan_id": target.plan_id,
                           "decision_id": decision_id, "mode": mode.value,
                           "status": "requested"})
            else:
                out.print(f"correction {cid} requested ({mode.value} of "
                          f"{short(decision_id)}); follow it with: "
                          f"agents correction show {cid}")
            return 0
        if not as_json:
            out.print(f"correction {cid} requested; waiting…")
        return await follow_outcome(ops, cid, target.plan_id, timeout, as_json)

    code = run(body)
    if code:
        raise typer.Exit(code)


async def _dry_run(ops: CorrectionClient, plan_id: str, decision_id: str,
                   mode: CorrectionMode, guidance: str | None, *,
                   chosen_option: str | None) -> DryRunReport:
    from clients.correction_errors import DryRunRefused, LedgerUnavailable

    try:
        return await ops.dry_run(plan_id, decision_id, mode, guidance,
                                 chosen_option=chosen_option, timeout=DRY_RUN_TIMEOUT)
    except LedgerUnavailable:
        fail(f"no dry-run answer within {DRY_RUN_TIMEOUT:g}s; are the workers running?")
    except DryRunRefused as exc:
        fail(f"dry run refused ({exc.code}): {exc.error.message}")


def _show_report(report: DryRunReport, as_json: bool) -> None:
    if as_json:
        emit_json(dump(report))
        return
    impact = report.impact
    out.print(f"[bold]dry run[/] {report.mode.value} of {impact.target_decision_id} "
              f"[dim](plan {report.plan_id}; nothing was changed)[/]")
    out.print(f"risk: {risk_text(impact.risk_level.value)}")
    more = "+" if impact.exceeds_limit else ""  # the walk stopped at the limit
    out.print(f"affected decisions: {impact.affected_count}{more}")
    for d in impact.affected_decision_ids[:20]:
        out.print(f"  {d}")
    if impact.affected_count > 20:
        # The reply lists at most the first 100 of each kind; the counts are whole.
        out.print(f"  [dim]… and {impact.affected_count - 20} more[/]")
    out.print(f"affected files: {impact.affected_files_count}{more}")
    for f in impact.affected_files[:20]:
        out.print(f"  {escape(f)}")
    if impact.affected_files_count > 20:
        out.print(f"  [dim]… and {impact.affected_files_count - 20} more[/]")
    out.print(f"child plans: {impact.affected_child_plan_count}{more}")
    for p in impact.affected_child_plan_ids[:20]:
        out.print(f"  {p}")
    if impact.affected_child_plan_count > 20:
        out.print(f"  [dim]… and {impact.affected_child_plan_count - 20} more[/]")
    out.print(f"estimated recompute time: {report.estimated_recompute_time_seconds:g}s")
    show_child_plan(report.child_plan)
    for w in report.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")


async def follow_outcome(ops: CorrectionClient, correction_id: str, plan_id: str,
                         timeout: float, as_json: bool) -> int:
    """Print the correction's transitions until it ends (from where this client's request
    or retry entered the stream); the exit code."""
    seen: list[dict[str, Any]] = []
    try:
        async for event in ops.follow(correction_id, plan_id, timeout):
            seen.append(dump(event))
            if not as_json:
                extra = event.error or event.reason or (
                    f"new decision {event.new_decision_id}" if event.new_decision_id else "")
                out.print(f"  {status_text(event.to_status.value)} "
                          f"[dim]{escape(clip(extra, 100))}[/]")
            if event.to_status in EXIT_CODES:
                if as_json:
                    emit_json({"correction_id": correction_id,
                               "status": event.to_status.value, "events": seen})
                return EXIT_CODES[event.to_status]
    except TimeoutError:
        pass
    if as_json:
        emit_json({"correction_id": correction_id, "status": None, "events": seen})
    fail(f"correction {correction_id} did not finish within {timeout:g}s "
         f"(agents correction show {correction_id})")
