"""`agents search`: decisions across plans by their words, type, agent, artifact path,
time, plan status and currency, newest first, a page at a time (services/search.py).

Words are matched whole and case-insensitively, all of them, in the question, the
chosen option and the rationale (docs/search.md). Decisions recorded before search
existed carry no tokens, so only a search without words, type, agent or path finds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.plan_list import TIME_HELP, parse_time
from cli.render import JsonFlag, clip, dump, emit_json, out, status_text, table, when
from contracts.decisions.currency import Currency
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.types import DecisionType

if TYPE_CHECKING:
    from services.search import Hit, SearchPage


def _row(h: Hit) -> dict[str, Any]:
    d = h.found.decision
    return {"decision_id": d.decision_id, "plan_id": d.plan_id,
            "decision_type": d.decision_type.value, "question": d.question,
            "chosen_option": d.chosen_option, "rationale": d.rationale,
            "created_at": d.created_at.isoformat(), "current": d.superseded_by is None,
            "superseded_by": d.superseded_by, "recorded_by": h.found.recorded_by,
            "agent": dump(d.agent) if d.agent else None,
            "artifacts": [a.artifact_path for a in d.artifacts_produced],
            "plan_status": h.plan_status.value}


def _agent(h: Hit) -> str:
    """Who answers for it, as verified; the name it gives itself beside, when it differs."""
    named = h.found.decision.agent.name if h.found.decision.agent else None
    by = h.found.recorded_by
    if by is None:
        return f"{named} (unsigned)" if named else "-"
    return by if named in (None, by) else f"{by} (says {named})"


def _show(page: SearchPage) -> None:
    if not page.hits:
        out.print("no decisions" + (f" (looked at {page.scanned}; older: --before "
                                    f"{page.next_before})" if page.next_before else ""))
        return
    table(["decision", "plan", "type", "agent", "when", "question", "chosen"],
          [[h.found.decision.decision_id
            + ("" if h.found.decision.superseded_by is None else " (superseded)"),
            f"{h.found.decision.plan_id} {status_text(h.plan_status.value)}",
            h.found.decision.decision_type.value, escape(_agent(h)),
            when(h.found.decision.created_at),
            escape(clip(h.found.decision.question, 40)),
            escape(clip(h.found.decision.chosen_option, 40))]
           for h in page.hits], ids_in={0, 1})
    if page.next_before:
        out.print(f"[dim]older decisions: --before {page.next_before}[/]")


def search(
    text: Annotated[str | None, typer.Argument(
        help="Words that must all appear (whole words, any case) in the question, the "
        "chosen option or the rationale.")] = None,
    *,
    decision_type: Annotated[DecisionType | None, typer.Option(
        "--type", case_sensitive=False, help="Only decisions of this type.")] = None,
    agent: Annotated[str | None, typer.Option(
        help="Only decisions this principal signed (as verified; one recorded unsigned "
        "counts under the agent name it gives itself).")] = None,
    path: Annotated[str | None, typer.Option(
        help="Only decisions that produced this artifact, or one under this folder "
        "(src/billing/).")] = None,
    since: Annotated[str | None, typer.Option(help="Created at or after. " + TIME_HELP)
                     ] = None,
    until: Annotated[str | None, typer.Option(help="Created before. " + TIME_HELP)] = None,
    plan_status: Annotated[PlanStatus | None, typer.Option(
        case_sensitive=False, help="Only decisions of plans in this status.")] = None,
    currency: Annotated[Currency, typer.Option(
        "--state", case_sensitive=False,
        help="current: still in their plan's tree; superseded: reverted.")] = Currency.ANY,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 50,
    before: Annotated[str | None, typer.Option(
        metavar="DECISION_ID", help="The next page: decisions older than this one "
        "(printed below a page).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Decisions across plans, newest first: ID, plan and its status, type, agent,
    time, question, chosen option."""
    from contracts.decisions.search import SearchFilter

    where = SearchFilter(text=text, decision_type=decision_type, agent=agent, path=path,
                         since=parse_time(since, "--since"),
                         until=parse_time(until, "--until"), currency=currency)
    cursor = parse_id(before, "--before") if before else None

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind
        from services.search import search as find

        after = await ctx.resolve(cursor, IdKind.DECISION) if cursor else None
        page = await find(ctx.reads, where, status=plan_status, limit=limit, before=after,
                          scan_max=ctx.settings.search_scan_max)
        if as_json:
            emit_json({"decisions": [_row(h) for h in page.hits],
                       "next_before": page.next_before, "scanned": page.scanned})
        else:
            _show(page)

    run(body)
