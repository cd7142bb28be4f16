"""`agents plan correct --dry-run`: asking the workers what a correction would touch,
and printing their report (nothing is written).

The dry run is a core NATS request to `corrections.dryrun.<plan_id>` (clients.operator);
no worker subscribed is said at once, a worker that does not answer after `--timeout`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from cli.child_plan import show_child_plan
from cli.errors import fail
from cli.render import dump, emit_json, out, risk_text, seconds

if TYPE_CHECKING:
    from clients.operator import CorrectionClient
    from contracts.corrections.dry_run import DryRunReport
    from contracts.corrections.states import CorrectionMode


async def dry_run(ops: CorrectionClient, plan_id: str, decision_id: str,
                   mode: CorrectionMode, guidance: str | None, *,
                   chosen_option: str | None, timeout: float) -> DryRunReport:
    import nats.errors

    from clients.correction_errors import DryRunRefused, LedgerUnavailable

    try:
        return await ops.dry_run(plan_id, decision_id, mode, guidance,
                                 chosen_option=chosen_option, timeout=timeout)
    except LedgerUnavailable as exc:
        if isinstance(exc.__cause__, nats.errors.NoRespondersError):
            fail("no worker answers dry runs: are the workers running? (agents up, "
                 "agents workers; agents status shows them)")
        fail(f"no dry-run answer within {timeout:g}s: a worker listens but did not answer "
             "(is MongoDB reachable? agents status); --timeout waits longer")
    except DryRunRefused as exc:
        fail(f"dry run refused ({exc.code}): {exc.error.message}")


def show_report(report: DryRunReport, as_json: bool) -> None:
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
    out.print(f"estimated recompute time: {seconds(report.estimated_recompute_time_seconds)}")
    show_child_plan(report.child_plan)
    for w in report.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
