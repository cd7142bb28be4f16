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

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, dump, emit_json, out, status_text
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.guidance import GUIDANCE_MAX_CHARS

if TYPE_CHECKING:
    from clients.operator import CorrectionClient
    from services.read_ports import LedgerReads

EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_CODES = {CorrectionStatus.APPLIED: 0, CorrectionStatus.FAILED: EXIT_FAILED,
              CorrectionStatus.CANCELLED: EXIT_CANCELLED}
"""The exit code of `--wait` per terminal status."""
DRY_RUN_GUIDANCE = "(dry run: no guidance given)"
DRY_RUN_TIMEOUT = 30.0
WAIT_TIMEOUT = 300.0


def _guidance(guidance: str | None, mode: CorrectionMode, dry_run: bool) -> str | None:
    """None lets a revert take its default guidance (contracts.corrections.requests.
    default_revert_guidance: it names the target and the operator, and the replacement's
    chosen option reads `(reverted; no replacement chosen) was: <original choice>`), as
    the specification's `agents plan correct --mode=revert ID` expects. An append's guidance is
    the child plan's prompt, which nothing can make up, so it is required.
    A dry run changes nothing."""
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
        "'(reverted; no replacement chosen) was: <original>' without --guidance).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the impact report; change nothing.")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Follow the correction until APPLIED (exit 0), FAILED (3) or "
        "CANCELLED (4).")] = False,
    timeout: Annotated[float | None, typer.Option(
        min=0.1, help=f"Seconds to wait: for the dry-run report (default "
        f"{DRY_RUN_TIMEOUT:g}), or with --wait for the outcome (default "
        f"{WAIT_TIMEOUT:g}); then exit 1.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Correct a decision: --dry-run shows the impact; otherwise request it and print its ID."""
    decision_id = parse_id(decision_id, "decision")
    text = _guidance(guidance, mode, dry_run)
    if chosen_option is not None and not chosen_option.strip():
        fail("--chosen-option is empty", USAGE_ERROR)

    async def body(ctx: Ctx) -> int:
        from contracts.shared.views import IdKind
        from services.read_model import superseded_reason

        wanted = await ctx.resolve(decision_id, IdKind.DECISION)
        target = await ctx.reads.decisions.get(wanted)
        if target is None:
            fail(f"no decision {wanted} is recorded")
        ops = await ctx.operator(requester())
        if dry_run:
            from cli.dry_run import dry_run as ask
            from cli.dry_run import show_report

            show_report(await ask(ops, target.plan_id, wanted, mode, text,
                                  chosen_option=chosen_option,
                                  timeout=timeout or DRY_RUN_TIMEOUT), as_json)
            return 0
        if target.superseded_by is not None:
            fail(await superseded_reason(ctx.reads, target))
        cid = await ops.request(target.plan_id, wanted, mode, text,
                                chosen_option=chosen_option)
        if not wait:
            if as_json:
                emit_json({"correction_id": cid, "plan_id": target.plan_id,
                           "decision_id": wanted, "mode": mode.value,
                           "status": "requested"})
            else:
                out.print(f"correction {cid} requested ({mode.value} of {wanted}); "
                          f"follow it with: agents correction show {cid}")
            return 0
        if not as_json:
            out.print(f"correction {cid} requested; waiting…")
        return await follow_outcome(ops, cid, target.plan_id, timeout or WAIT_TIMEOUT,
                                    as_json, reads=ctx.reads)

    code = run(body)
    if code:
        raise typer.Exit(code)


async def follow_outcome(ops: CorrectionClient, correction_id: str, plan_id: str,
                         timeout: float, as_json: bool, *, reads: LedgerReads) -> int:
    """Print the correction's transitions until it ends (from where this client's request
    or retry entered the stream); the exit code. Errors are printed whole: their end
    is often the path or the reason that matters."""
    seen: list[dict[str, Any]] = []
    try:
        async for event in ops.follow(correction_id, plan_id, timeout):
            seen.append(dump(event))
            if not as_json:
                extra = event.error or event.reason or (
                    f"new decision {event.new_decision_id}" if event.new_decision_id else "")
                out.print(f"  {status_text(event.to_status.value)}"
                          + (f" [dim]{escape(extra)}[/]" if extra else ""), soft_wrap=True)
            if event.to_status in EXIT_CODES:
                if as_json:
                    emit_json({"correction_id": correction_id,
                               "status": event.to_status.value, "events": seen})
                return EXIT_CODES[event.to_status]
    except TimeoutError:
        pass
    recorded = await reads.corrections.get(correction_id)
    if as_json:
        emit_json({"correction_id": correction_id,
                   "status": None if recorded else "queued", "events": seen})
    if recorded is None:
        fail(f"correction {correction_id} is still queued: no worker took it up within "
             f"{timeout:g}s (are the workers running? agents status). It runs when they "
             f"do; do not request it again: agents correction show {correction_id}, or "
             f"agents correction cancel {correction_id}")
    fail(f"correction {correction_id} did not finish within {timeout:g}s; it is "
         f"{recorded.correction.status.value} (agents correction show {correction_id})")
