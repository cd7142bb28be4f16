"""Search (`agents search`, the console's Search page): decisions across plans, newest
first, that a `SearchFilter` and a plan status keep, a page at a time.

The store answers one index lookup per chunk (the filter's lead tokens, newest first:
store/lookups.py); the rest of the filter (its other tokens, the time range, current or
superseded) is checked here on each chunk, and the plan status on the plans' records.
Scanning stops after `scan_max` decisions even if the page is not full: the page then
says where to go on (`next_before`), so a filter that matches nothing in a large ledger
answers in bounded time and says it looked only so far (as the plan list does).
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.decisions.search import Found, SearchFilter
from services.read_model import plan_records
from services.read_ports import LedgerReads

SCAN_MAX = 2000
"""Decisions read at most for one page (Settings.search_scan_max by default)."""
CHUNK = 500
"""Decisions read per query when some of the filter is checked here (the store's largest
page). SecantusDB sorts every match of the lead token for each query, so fewer, larger
chunks cost less: a 2,000-decision scan is four queries."""
PAGE_MAX = 200
"""Most results on one page."""


@dataclass(frozen=True, slots=True)
class Hit:
    found: Found
    plan_status: PlanStatus
    """Its plan's status (a plan without a record is active)."""


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[Hit]
    next_before: str | None
    """The decision ID to pass as `before` for the next page; None when none are left."""
    scanned: int
    """Decisions read for this page (at most `scan_max`)."""


def _status(records: dict[str, PlanRecord], plan_id: str) -> PlanStatus:
    record = records.get(plan_id)
    return record.status if record is not None else PlanStatus.ACTIVE


async def search(reads: LedgerReads, where: SearchFilter, *,
                 status: PlanStatus | None = None, limit: int = 50,
                 before: str | None = None, scan_max: int = SCAN_MAX) -> SearchPage:
    """Decisions newest first (by their ULID) that `where` and `status` keep, each with
    its plan's status."""
    limit = max(1, min(limit, PAGE_MAX))
    if where.hopeless:
        return SearchPage([], None, 0)
    lead = where.lead()
    exact = where.exact and status is None
    kept: list[Found] = []
    records: dict[str, PlanRecord] = {}
    scanned, cursor, exhausted = 0, before, False
    while len(kept) < limit and not exhausted and scanned < scan_max:
        want = min(limit - len(kept) if exact else CHUNK, scan_max - scanned)
        chunk = await reads.views.search(lead, want, cursor)
        scanned += len(chunk)
        if status is not None:
            records |= await plan_records(reads, [f.decision.plan_id for f in chunk
                                                  if f.decision.plan_id not in records])
        used = 0
        for found in chunk:
            used += 1
            cursor = found.decision.decision_id
            if where.keeps(found) and (
                    status is None or _status(records, found.decision.plan_id) is status):
                kept.append(found)
                if len(kept) == limit:
                    break
        exhausted = len(chunk) < want and used == len(chunk)
    if status is None:
        records = await plan_records(reads, [f.decision.plan_id for f in kept])
    return SearchPage([Hit(f, _status(records, f.decision.plan_id)) for f in kept],
                      None if exhausted else cursor, scanned)
