"""`agents plan correct`: dry-run, request, and optionally follow a correction.

Writes travel as the wire contract says (docs/corrections.md): the request is a
JetStream publish with Nats-Msg-Id = correction_id, the dry run a core NATS request,
and `--wait` follows `corrections.events.<plan_id>.*` from a JetStream ordered consumer
created *before* the request is published, delivering only new messages, so no
transition can slip between "published" and "listening".

Exit codes of `--wait`: 0 APPLIED, 3 FAILED, 4 CANCELLED, 1 no outcome in --timeout.
They differ from 1 (error) and 2 (usage) so a script can tell "the ledger refused the
correction" from "the command could not run".
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import (
    JsonFlag,
    clip,
    console,
    dump,
    emit_json,
    risk_text,
    short,
    status_text,
)
from contracts.ids import MSG_ID_HEADER

if TYPE_CHECKING:
    from contracts.corrections import CorrectionRequest
    from contracts.impact import DryRunReport

EXIT_FAILED = 3
EXIT_CANCELLED = 4
DRY_RUN_GUIDANCE = "(dry run: no guidance given)"
GUIDANCE_MAX = 10_000  # contracts.corrections.GUIDANCE_MAX_CHARS, without importing pydantic
DRY_RUN_TIMEOUT = 30.0


class Mode(StrEnum):
    """Mirrors contracts.corrections.CorrectionMode; a local copy keeps --help fast."""

    revert = "revert"
    append = "append"


def _guidance(guidance: str | None, mode: Mode, dry_run: bool) -> str | None:
    """None lets a revert take its default guidance (contracts.corrections.
    default_revert_guidance: it names the target and the operator, and the replacement's
    chosen option becomes `Revert: <original choice>`), as the seeds' `agents plan
    correct --mode=revert ID` expects. An append's guidance is the child plan's prompt,
    which nothing can make up, so it is required. A dry run changes nothing."""
    if guidance is None:
        if mode is Mode.revert:
            return None
        if dry_run:
            return DRY_RUN_GUIDANCE
        fail("--guidance is required for an append: it becomes the child plan's prompt",
             USAGE_ERROR)
    if not guidance.strip():
        fail("--guidance is empty; give 1 to 10,000 characters", USAGE_ERROR)
    if len(guidance) > GUIDANCE_MAX:
        fail(f"--guidance is {len(guidance):,} characters; at most {GUIDANCE_MAX:,} allowed",
             USAGE_ERROR)
    return guidance


def requester() -> str:
    return os.environ.get("USER") or os.environ.get("USERNAME") or "operator"


def correct(
    decision_id: Annotated[str, typer.Argument(help="The decision to correct (ULID).")],
    *,
    mode: Annotated[Mode, typer.Option(
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
        from contracts.corrections import CorrectionMode, CorrectionRequest  # noqa: PLC0415
        from store.decisions import DecisionRepository  # noqa: PLC0415

        target = await DecisionRepository(ctx.db).get(decision_id)
        if target is None:
            fail(f"no decision {decision_id} is recorded")
        request = CorrectionRequest(
            plan_id=target.plan_id, decision_id=decision_id, mode=CorrectionMode(mode.value),
            guidance=text, requested_by=requester(), chosen_option=chosen_option)
        if dry_run:
            _show_report(await _dry_run(ctx, request), as_json)
            return 0
        if target.superseded_by is not None:
            fail(f"decision {decision_id} is already superseded by {target.superseded_by}; "
                 f"correct the current decision {target.superseded_by} instead")
        return await _request(ctx, request, wait, timeout, as_json)

    code = run(body)
    if code:
        raise typer.Exit(code)


async def _dry_run(ctx: Ctx, request: CorrectionRequest) -> DryRunReport:
    import nats.errors  # noqa: PLC0415

    from contracts import correction_subjects as subjects  # noqa: PLC0415
    from contracts.impact import DryRunReport  # noqa: PLC0415

    nc = await ctx.nats()
    try:
        reply = await nc.request(subjects.dryrun(request.plan_id),
                                 request.model_dump_json().encode(), timeout=DRY_RUN_TIMEOUT)
    except nats.errors.TimeoutError:
        fail(f"no dry-run answer within {DRY_RUN_TIMEOUT:g}s; are the workers running?")
    import json  # noqa: PLC0415

    data: dict[str, Any] = json.loads(reply.data)
    if "error" in data:
        fail(f"dry run refused ({data['error']}): {data.get('message', '')}")
    return DryRunReport.model_validate(data)


def _show_report(report: DryRunReport, as_json: bool) -> None:
    if as_json:
        emit_json(dump(report))
        return
    impact = report.impact
    console.print(f"[bold]dry run[/] {report.mode.value} of {impact.target_decision_id} "
                  f"[dim](plan {report.plan_id}; nothing was changed)[/]")
    console.print(f"risk: {risk_text(impact.risk_level.value)}")
    more = "+" if impact.exceeds_limit else ""  # the walk stopped at the limit
    console.print(f"affected decisions: {impact.affected_count}{more}")
    for d in impact.affected_decision_ids[:20]:
        console.print(f"  {d}")
    if impact.affected_count > 20:
        # The reply lists at most the first 100 of each kind; the counts are whole.
        console.print(f"  [dim]… and {impact.affected_count - 20} more[/]")
    console.print(f"affected files: {impact.affected_files_count}{more}")
    for f in impact.affected_files[:20]:
        console.print(f"  {escape(f)}")
    if impact.affected_files_count > 20:
        console.print(f"  [dim]… and {impact.affected_files_count - 20} more[/]")
    console.print(f"child plans: {impact.affected_child_plan_count}{more}")
    for p in impact.affected_child_plan_ids[:20]:
        console.print(f"  {p}")
    if impact.affected_child_plan_count > 20:
        console.print(f"  [dim]… and {impact.affected_child_plan_count - 20} more[/]")
    console.print(f"estimated recompute time: {report.estimated_recompute_time_seconds:g}s")
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")


async def _request(ctx: Ctx, request: CorrectionRequest, wait: bool, timeout: float,
                   as_json: bool) -> int:
    from nats.js.api import DeliverPolicy  # noqa: PLC0415

    from contracts import correction_subjects as subjects  # noqa: PLC0415

    nc = await ctx.nats()
    js = nc.jetstream()
    sub = None
    if wait:
        sub = await js.subscribe(f"{subjects.EVENTS_PREFIX}.{request.plan_id}.*",
                                 ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
    try:
        await js.publish(subjects.requested(request.plan_id), request.model_dump_json().encode(),
                         headers={MSG_ID_HEADER: subjects.request_msg_id(request.correction_id)},
                         timeout=5.0)
        if sub is None:
            if as_json:
                emit_json({"correction_id": request.correction_id, "plan_id": request.plan_id,
                           "decision_id": request.decision_id, "mode": request.mode.value,
                           "status": "requested"})
            else:
                console.print(f"correction {request.correction_id} requested "
                              f"({request.mode.value} of {short(request.decision_id)}); "
                              f"follow it with: agents correction show {request.correction_id}")
            return 0
        if not as_json:
            console.print(f"correction {request.correction_id} requested; waiting…")
        return await follow_outcome(sub, request.correction_id, timeout, as_json)
    finally:
        if sub is not None:
            await sub.unsubscribe()


async def follow_outcome(sub: Any, correction_id: str, timeout: float,
                         as_json: bool) -> int:
    """Print the correction's transitions from `sub` until it ends; the exit code."""
    import asyncio  # noqa: PLC0415

    import nats.errors  # noqa: PLC0415

    from contracts.correction_events import CorrectionTransitioned  # noqa: PLC0415

    seen: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        try:
            msg = await sub.next_msg(timeout=min(left, 1.0))
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        event = CorrectionTransitioned.model_validate_json(msg.data)
        if event.correction_id != correction_id:
            continue
        seen.append(dump(event))
        status = event.to_status.value
        if not as_json:
            extra = event.error or event.reason or (
                f"new decision {event.new_decision_id}" if event.new_decision_id else "")
            console.print(f"  {status_text(status)} [dim]{escape(clip(extra, 100))}[/]")
        if status in ("applied", "failed", "cancelled"):
            if as_json:
                emit_json({"correction_id": correction_id, "status": status, "events": seen})
            return {"applied": 0, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}[status]
    if as_json:
        emit_json({"correction_id": correction_id, "status": None, "events": seen})
    fail(f"correction {correction_id} did not finish within {timeout:g}s "
         f"(agents correction show {correction_id})")
