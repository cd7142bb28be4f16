"""Plans: the recent ones, one plan's counts, its tree a level at a time, the tree as it
was at a correction or a moment, and what an ID names."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from console.deps import deps
from console.shapes import brief, correction_brief
from console.web import Refused, dump, ok, query_int, query_ulid, ulid_param
from contracts.corrections.as_of import SequenceCut
from contracts.decisions.plan_states import PlanStatus
from contracts.shared.views import RootFilter
from services import read_model, tree_model
from services.id_lookup import IdNotUsable
from services.plan_list import find_plans, status_of

PAGE_DEFAULT = 100
PAGE_MAX = 500
TEXT_MAX = 200
AS_OF_MAX = 5000
"""Decisions sent at most for a tree as it was (the whole tree, read-only): beyond that
the page says how many were left out."""


def time_param(request: Request, name: str) -> datetime | None:
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise Refused(400, f"{name} {raw[:40]!r} is not an ISO time (e.g. "
                           "2026-11-30T12:00:00Z)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _filter(request: Request) -> tuple[RootFilter, PlanStatus | None]:
    q = request.query_params
    raw = (q.get("status") or "").lower()
    try:
        status = PlanStatus(raw) if raw else None
    except ValueError:
        raise Refused(400, f"status {raw[:20]!r} is not a plan status") from None
    text = {k: (q.get(k) or "").strip()[:TEXT_MAX] or None for k in ("project", "agent", "text")}
    return RootFilter(since=time_param(request, "since"), until=time_param(request, "until"),
                      **text), status


async def plans(request: Request) -> Response:
    """Plans newest first, filtered as `agents plan list` filters them."""
    d = deps(request)
    where, status = _filter(request)
    page = await find_plans(d.reads, where, status=status,
                            limit=query_int(request, "limit", 50, 1, 200),
                            before=query_ulid(request, "before"))
    return ok({"next_before": page.next_before, "scanned": page.scanned, "plans": [{
        "plan_id": s.root.plan_id, "root": brief(s.root), "status": status_of(s).value,
        "parent_plan_id": s.record.parent_plan_id if s.record else s.root.parent_plan_id,
        "project": s.root.project, "decisions": s.counts.decisions,
        "current": s.counts.current, "open_corrections": s.counts.open_corrections,
        "open_violations": s.counts.open_violations} for s in page.plans]})


async def find(request: Request) -> Response:
    """What an ID or its last characters name (the Find box), as the CLI resolves it."""
    value = request.query_params.get("id", "").strip()
    try:
        found = await read_model.find(deps(request).reads, value)
    except IdNotUsable as exc:
        raise Refused(404 if not exc.candidates else 409, str(exc)) from None
    if found.kind == "none":
        raise Refused(404, f"nothing is recorded with ID {value[:40]!r}")
    return ok({"kind": found.kind, "plan_id": found.plan_id, "decision_id": found.decision_id,
               "correction_id": found.correction_id})


async def plan(request: Request) -> Response:
    reads = deps(request).reads
    plan_id = ulid_param(request, "plan_id")
    record = await reads.plans.get(plan_id)
    counts = (await reads.views.counts([plan_id]))[plan_id]
    if record is None and counts.decisions == 0:
        raise Refused(404, f"no plan {plan_id} is recorded")
    return ok({"plan_id": plan_id, "record": dump(record) if record else None,
               "decisions": counts.decisions, "current": counts.current,
               "open_corrections": counts.open_corrections,
               "open_violations": counts.open_violations})


async def tree(request: Request) -> Response:
    plan_id = ulid_param(request, "plan_id")
    parent = query_ulid(request, "parent")
    after_raw = request.query_params.get("after")
    after = query_int(request, "after", 0, -1, 2**62) if after_raw else None
    level = await tree_model.tree_level(
        deps(request).reads, plan_id, parent, after=after,
        limit=query_int(request, "limit", PAGE_DEFAULT, 1, PAGE_MAX),
        superseded=request.query_params.get("superseded") in ("1", "true"))
    return ok({"plan_id": plan_id, "parent": parent, "next_after": level.next_after,
               "nodes": [{**brief(n.decision), "child_count": n.child_count,
                          "child_plans": [{"plan_id": p, "status": r.status.value}
                                          for p, r in n.child_plans.items()]
                          + [{"plan_id": p, "status": None}
                             for p in n.decision.downstream_plan_ids
                             if p not in n.child_plans],
                          "corrections": [correction_brief(c) for c in n.corrections]}
                         for n in level.nodes]})


def _moment(raw: str) -> str | datetime:
    try:
        return tree_model.moment_of(raw)
    except ValueError:
        raise Refused(400, f"at {raw[:40]!r} is neither a correction ID nor an ISO time "
                           "(e.g. 2026-11-30T12:00:00Z)") from None


async def as_of(request: Request) -> Response:
    """The plan's tree as of `at` (a correction of this plan, or an ISO time; `before=1`
    with a correction: the tree it was applied to), as `agents plan tree --as-of`."""
    plan_id = ulid_param(request, "plan_id")
    at = _moment(request.query_params.get("at", "").strip())
    try:
        then = await tree_model.tree_then(deps(request).reads, plan_id, at,
                                          before=request.query_params.get("before") == "1")
    except ValueError as exc:
        raise Refused(404, str(exc)) from None
    cut = then.cut
    return ok({"plan_id": plan_id,
               "cut": {"sequence_number": cut.sequence} if isinstance(cut, SequenceCut)
               else {"time": cut.at.isoformat()},
               "count": len(then.decisions),
               "decisions": [brief(x) for x in then.decisions[:AS_OF_MAX]],
               "corrections": [correction_brief(c) for c in then.corrections]})
