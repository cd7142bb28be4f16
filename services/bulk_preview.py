"""The dry run of a whole filter (`agents bulk preview`, the console's Bulk page): the
decisions the search keeps, each walked as a single dry run walks it
(contracts.impact), checked against the operator's project scope, and summed up
(contracts.bulk.preview). Reads only.

The matches are read page after page through the search (services/search.py), so the
filter means here exactly what it means in `agents search`, and a typed value reaches
the database only as a token compared for equality. Reading stops past BULK_MAX_MATCHES
matches (the batch is refused whole: TooManyMatches) or past SCAN_TOTAL_MAX decisions
read (FilterTooWide), so a preview of a huge ledger answers in bounded time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.bulk.model import BulkFilter
from contracts.bulk.preview import BulkPreview, MatchImpact, aggregate
from contracts.bulk.states import BulkError, NothingMatches, TooManyMatches
from contracts.corrections.states import CorrectionMode
from contracts.impact.summary import summarize
from contracts.trust.ownership import out_of_scope
from contracts.trust.policy import Identity
from services.read_model import plan_records
from services.read_ports import LedgerReads
from services.search import PAGE_MAX, Hit, search

__all__ = ["SCAN_TOTAL_MAX", "FilterTooWide", "Matched", "find_matches", "preview"]

SCAN_TOTAL_MAX = 200_000
"""Decisions one preview reads through the search at most, across its pages."""
WALKS_AT_ONCE = 8
"""Impact walks in flight at once: enough to hide round trips, few enough to leave the
database to the workers."""


class FilterTooWide(BulkError):
    def __init__(self, scanned: int) -> None:
        super().__init__(f"the search read {scanned:,} decisions without reaching the end "
                         f"of the filter's matches; narrow it (--since, --path, words)")


@dataclass(frozen=True, slots=True)
class Matched:
    preview: BulkPreview
    hits: list[Hit]


async def find_matches(reads: LedgerReads, where: BulkFilter, bound: int,
                       scan_max: int) -> list[Hit]:
    """Every decision the filter keeps, newest first; TooManyMatches past `bound`."""
    hits: list[Hit] = []
    before: str | None = None
    scanned = 0
    while True:
        page = await search(reads, where.search(), status=where.plan_status,
                            limit=PAGE_MAX, before=before, scan_max=scan_max)
        hits.extend(page.hits)
        scanned += page.scanned
        if len(hits) > bound:
            raise TooManyMatches(bound)
        if page.next_before is None:
            return hits
        if scanned >= SCAN_TOTAL_MAX:
            raise FilterTooWide(scanned)
        before = page.next_before


async def _impacts(reads: LedgerReads, hits: Sequence[Hit], max_decisions: int
                   ) -> list[MatchImpact]:
    gate = asyncio.Semaphore(WALKS_AT_ONCE)

    async def one(hit: Hit) -> MatchImpact:
        d = hit.found.decision
        async with gate:
            walk = await reads.impact.walk(d.decision_id, max_decisions)
        return MatchImpact.of(d.plan_id, d.superseded_by is not None, summarize(walk))

    return list(await asyncio.gather(*(one(h) for h in hits)))


async def scope_refusals(reads: LedgerReads, identity: Identity, hits: Sequence[Hit]
                         ) -> dict[str, str]:
    """decision_id -> why the operator may not correct it (its plan's project is out of
    the operator's scope), as the workers would refuse its request."""
    if identity is None:
        return {}
    records = await plan_records(reads, [h.found.decision.plan_id for h in hits])
    refused = {}
    for h in hits:
        plan_id = h.found.decision.plan_id
        record = records.get(plan_id)
        why = out_of_scope(identity, plan_id, record.project if record else None)
        if why is not None:
            refused[h.found.decision.decision_id] = f"{why.rule.value}: {why.message}"
    return refused


async def preview(reads: LedgerReads, where: BulkFilter, mode: CorrectionMode, *,
                  batch_id: str, identity: Identity, bound: int, scan_max: int,
                  max_decisions: int) -> Matched:
    """What a batch of `mode` over the filter's matches would do; NothingMatches when
    there is none."""
    hits = await find_matches(reads, where, bound, scan_max)
    if not hits:
        raise NothingMatches()
    impacts = await _impacts(reads, hits, max_decisions)
    refused = await scope_refusals(reads, identity, hits)
    return Matched(aggregate(batch_id, mode, impacts, refused), hits)
