"""The plan list (`agents plan list`, the console's Plans page): plans newest first,
filtered by status, project, agent, time and text, a page at a time.

The root decision answers project, agent, time and text in the query
(store/lookups.py); the status is the plan's record (a plan without one is active), so
it is filtered here, over pages of roots. Scanning stops after SCAN_MAX roots even if
the page is not full: the page then says where to go on (`next_before`), so a filter
that matches nothing in a large ledger answers in bounded time and says it looked only
so far.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.shared.counts import PlanCounts
from contracts.shared.views import RootFilter
from services.read_model import plan_records
from services.read_ports import LedgerReads

SCAN_MAX = 2000
"""Roots read at most for one page of a status-filtered list."""
ROOTS_PAGE = 200


@dataclass(frozen=True, slots=True)
class PlanSummary:
    root: Decision
    record: PlanRecord | None
    counts: PlanCounts


@dataclass(frozen=True, slots=True)
class PlanPage:
    plans: list[PlanSummary]
    next_before: str | None
    """The root ID to pass as `before` for the next page; None when the roots ran out."""
    scanned: int
    """Roots read for this page (at most SCAN_MAX when a status was asked for)."""


def status_of(summary: PlanSummary) -> PlanStatus:
    return summary.record.status if summary.record is not None else PlanStatus.ACTIVE


async def find_plans(reads: LedgerReads, where: RootFilter | None = None, *,
                     status: PlanStatus | None = None, limit: int = 50,
                     before: str | None = None) -> PlanPage:
    """Plans newest first (by their root's ULID) that `where` and `status` keep, with
    their counts and records."""
    kept: list[PlanSummary] = []
    scanned = 0
    cursor = before
    exhausted = False
    while len(kept) < limit and not exhausted and scanned < SCAN_MAX:
        want = limit - len(kept) if status is None else ROOTS_PAGE
        roots = await reads.views.recent_roots(want, cursor, where)
        scanned += len(roots)
        records = await plan_records(reads, [r.plan_id for r in roots])
        used = 0
        for root in roots:
            used += 1
            cursor = root.decision_id
            record = records.get(root.plan_id)
            if status is None or (record.status if record else PlanStatus.ACTIVE) is status:
                kept.append(PlanSummary(root, record, PlanCounts()))
                if len(kept) == limit:
                    break
        exhausted = len(roots) < want and used == len(roots)
    return await _counted(reads, kept, None if exhausted else cursor, scanned)


async def _counted(reads: LedgerReads, found: list[PlanSummary], next_before: str | None,
                   scanned: int) -> PlanPage:
    counts = await reads.views.counts([s.root.plan_id for s in found])
    return PlanPage([PlanSummary(s.root, s.record, counts.get(s.root.plan_id, PlanCounts()))
                     for s in found], next_before, scanned)
