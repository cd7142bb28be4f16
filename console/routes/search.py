"""Search: decisions across plans, filtered as `agents search` filters them."""

from __future__ import annotations

from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from console.deps import deps
from console.routes.plans import TEXT_MAX, time_param
from console.shapes import brief
from console.web import Refused, dump, ok, query_int, query_ulid
from contracts.decisions.currency import Currency
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.search import SearchFilter
from contracts.decisions.types import DecisionType
from services.search import PAGE_MAX, search

E = TypeVar("E", PlanStatus, DecisionType, Currency)


def _enum(request: Request, name: str, kind: type[E]) -> E | None:
    raw = (request.query_params.get(name) or "").strip().lower()
    try:
        return kind(raw) if raw else None
    except ValueError:
        raise Refused(400, f"{name} {raw[:30]!r} is not one of "
                           f"{', '.join(v.value for v in kind)}") from None


def _filter(request: Request) -> SearchFilter:
    q = request.query_params
    text = {k: (q.get(k) or "").strip()[:TEXT_MAX] or None for k in ("text", "agent", "path")}
    return SearchFilter(decision_type=_enum(request, "type", DecisionType),
                        since=time_param(request, "since"),
                        until=time_param(request, "until"),
                        currency=_enum(request, "state", Currency) or Currency.ANY, **text)


async def decisions(request: Request) -> Response:
    """Decisions newest first; each with the principal that signed it as verified
    (`recorded_by`) and the agent it names itself, and its plan's status."""
    d = deps(request)
    where = _filter(request)
    page = await search(d.reads, where, status=_enum(request, "plan_status", PlanStatus),
                        limit=query_int(request, "limit", 50, 1, PAGE_MAX),
                        before=query_ulid(request, "before"), scan_max=d.search_scan_max)
    return ok({"next_before": page.next_before, "scanned": page.scanned, "decisions": [{
        **brief(h.found.decision), "rationale": (h.found.decision.rationale or "")[:300],
        "recorded_by": h.found.recorded_by,
        "agent": dump(h.found.decision.agent) if h.found.decision.agent else None,
        "artifacts": [a.artifact_path for a in h.found.decision.artifacts_produced[:10]],
        "plan_status": h.plan_status.value} for h in page.hits]})
