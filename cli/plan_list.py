"""`agents plan list` and `agents plan export`: finding a plan, and taking one away whole.

`list` pages through plans newest first (services/plan_list.py), filtered by status,
project, agent, time and text; `export` prints one plan as a JSON document
(services/plan_export.py), to stdout or to a file.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, dump, emit_json, out, status_text, table, when
from contracts.decisions.plan_states import PlanStatus

if TYPE_CHECKING:
    from services.plan_list import PlanPage, PlanSummary

_AGO = re.compile(r"^(\d+)\s*([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
TIME_HELP = "An ISO time (UTC if no offset), or an age: 30m, 12h, 7d."


def parse_time(value: str | None, flag: str) -> datetime | None:
    """An ISO time in UTC, or `<n>m|h|d` ago; a usage error otherwise."""
    if value is None:
        return None
    ago = _AGO.match(value.strip().lower())
    if ago:
        return datetime.now(UTC) - timedelta(**{_UNITS[ago[2]]: int(ago[1])})
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        fail(f"{flag} {value!r} is neither an ISO time (2026-11-30T12:00:00Z) nor an age "
             "(30m, 12h, 7d)", USAGE_ERROR)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _row(s: PlanSummary) -> dict[str, Any]:
    from services.plan_list import status_of

    return {"plan_id": s.root.plan_id, "status": status_of(s).value,
            "project": s.root.project, "prompt": s.root.chosen_option,
            "created_at": s.root.created_at.isoformat(), "root_decision_id": s.root.decision_id,
            "parent_plan_id": s.record.parent_plan_id if s.record else s.root.parent_plan_id,
            "decisions": s.counts.decisions, "current": s.counts.current,
            "open_corrections": s.counts.open_corrections,
            "open_violations": s.counts.open_violations,
            "record": dump(s.record) if s.record else None}


def _show(page: PlanPage) -> None:
    from services.plan_list import status_of

    if not page.plans:
        out.print("no plans" + (" (looked at the newest "
                                f"{page.scanned}; older: --before {page.next_before})"
                                if page.next_before else ""))
        return
    table(["plan", "status", "project", "decisions", "corrections", "started", "prompt"],
          [[s.root.plan_id, status_text(status_of(s).value), escape(s.root.project or "-"),
            f"{s.counts.current}/{s.counts.decisions}", str(s.counts.open_corrections),
            when(s.root.created_at), escape(clip(s.root.chosen_option, 60))]
           for s in page.plans], ids_in={0})
    if page.next_before:
        out.print(f"[dim]older plans: --before {page.next_before}[/]")


def list_(
    *,
    status: Annotated[PlanStatus | None, typer.Option(
        case_sensitive=False, help="Only plans in this status.")] = None,
    project: Annotated[str | None, typer.Option(help="Only this project's plans.")] = None,
    agent: Annotated[str | None, typer.Option(
        help="Only plans whose root this principal signed (as verified; a root recorded "
        "unsigned counts under the agent name it gives itself).")] = None,
    since: Annotated[str | None, typer.Option(help="Started at or after. " + TIME_HELP)
                     ] = None,
    until: Annotated[str | None, typer.Option(help="Started before. " + TIME_HELP)] = None,
    text: Annotated[str | None, typer.Option(
        help="Words in the plan's prompt (case-insensitive).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 50,
    before: Annotated[str | None, typer.Option(
        metavar="ROOT_ID", help="The next page: plans older than this root decision "
        "(printed below a full page).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Plans, newest first: ID, status, project, current/all decisions, corrections in
    flight, start time, prompt."""
    from contracts.shared.views import RootFilter

    where = RootFilter(project=project, agent=agent, since=parse_time(since, "--since"),
                       until=parse_time(until, "--until"), text=text)
    cursor = parse_id(before, "--before") if before else None

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind
        from services.plan_list import find_plans

        after = await ctx.resolve(cursor, IdKind.DECISION) if cursor else None
        page = await find_plans(ctx.reads, where, status=status, limit=limit, before=after)
        if as_json:
            emit_json({"plans": [_row(s) for s in page.plans],
                       "next_before": page.next_before, "scanned": page.scanned})
        else:
            _show(page)

    run(body)


def export(
    plan_id: Annotated[str, typer.Argument(help="The plan (its ID or last characters).")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """The plan as one JSON document: record, every decision (superseded too), the
    corrections and attempts, comments, child plans, violations (to stdout, or --output
    FILE; with --json the latter prints what it wrote as JSON)."""
    plan_id = parse_id(plan_id, "plan")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind
        from services.plan_export import export_plan

        wanted = await ctx.resolve(plan_id, IdKind.PLAN)
        found = await export_plan(ctx.reads, wanted)
        if found is None:
            fail(f"no plan {wanted} is recorded")
        doc = found.as_json()
        if output is None:
            emit_json(doc)
            return
        try:
            output.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror or exc}")
        if as_json:  # the document went to the file; say what was written
            emit_json({"plan_id": wanted, "output": str(output),
                       "decisions": len(found.decisions),
                       "corrections": len(found.corrections)})
            return
        out.print(f"plan {wanted}: {len(found.decisions)} decision(s), "
                  f"{len(found.corrections)} correction(s) written to {escape(str(output))}")

    run(body)
