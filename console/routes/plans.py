"""Plans: the recent ones, one plan's counts, its tree a level at a time, the tree as it
was at a correction or a moment, and what an ID names."""

from __future__ import annotations

from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response

from console.deps import deps
from console.shapes import brief, correction_brief
from console.web import Refused, dump, ok, query_int, query_ulid, ulid_param
from contracts.corrections.as_of import SequenceCut
from services import read_model, tree_model

PAGE_DEFAULT = 100
PAGE_MAX = 500
AS_OF_MAX = 5000
"""Decisions sent at most for a tree as it was (the whole tree, read-only): beyond that
the page says how many were left out."""


async def plans(request: Request) -> Response:
    d = deps(request)
    limit = query_int(request, "limit", 50, 1, 200)
    found = await tree_model.recent_plans(d.reads, limit, query_ulid(request, "before"))
    return ok({"plans": [{
        "plan_id": s.root.plan_id, "root": brief(s.root),
        "status": s.record.status.value if s.record else "active",
        "parent_plan_id": s.record.parent_plan_id if s.record else s.root.parent_plan_id,
        "project": s.root.project, "decisions": s.counts.decisions,
        "current": s.counts.current, "open_corrections": s.counts.open_corrections,
        "open_violations": s.counts.open_violations} for s in found]})


async def find(request: Request) -> Response:
    value = request.query_params.get("id", "").strip()
    found = await read_model.find(deps(request).reads, value)
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
