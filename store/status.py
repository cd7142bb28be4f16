"""What the ledger holds that needs someone's attention, counted: `agents status` reads it.

Counts only, each one count an index answers (one per rule, status or severity: no
scan of a collection), so asking for the status of a large ledger stays cheap: dead
letters kept (by the rule that ended them: index kept_by_first_rule), corrections not yet ended
(by status, with the oldest: by_status_age), open violations (by severity:
open_by_severity), and the workers whose heartbeat is current (a small collection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus
from contracts.invariants.severity import Severity
from contracts.shared.counts import FAILED_RECENTLY, LedgerStatus, WorkerSeen
from contracts.shared.rules import Rule
from store.database import (
    CORRECTIONS,
    DEAD_LETTERS,
    INVARIANT_VIOLATIONS,
    WORKERS,
    Document,
)

__all__ = ["LedgerStatus", "WorkerSeen", "ledger_status"]

FAILED_READ_MAX = 1000
"""FAILED corrections whose time is read (the count is whole)."""
IN_FLIGHT = [s.value for s in CorrectionStatus if not CORRECTION_LIFECYCLE.is_terminal(s)]
WORKERS_SHOWN = 1000
"""Most worker documents read (one per process; far more would be a leak to look at)."""


COUNTS_AT_ONCE = 4
"""Counts of one `_counts` in flight together. One per value at once (a rule has about
fifty) opened as many connections every sampling round, and the embedded test server
left a few of such a burst's counts unanswered for good, which held the sampler, and a
worker's shutdown behind it, forever."""


async def _counts(coll: AsyncCollection[Document], field: str, values: Iterable[str],
                  query: Document | None = None) -> dict[str, int]:
    """How many documents have each value of `field` (those with none left out), one
    count per value, each answered by an index whose prefix is `query`'s fields then
    `field`; COUNTS_AT_ONCE at a time. One indexed look first: when no document has any
    of the values (a quiet ledger: no dead letter, no open violation, no correction in
    flight), that look is the whole cost, not a count per value (fifty-odd rules)."""
    wanted = list(values)
    if await coll.find_one({**(query or {}), field: {"$in": wanted}}, {"_id": 1}) is None:
        return {}
    gate = asyncio.Semaphore(COUNTS_AT_ONCE)

    async def count(v: str) -> int:
        async with gate:
            return await coll.count_documents({**(query or {}), field: v})

    counts = await asyncio.gather(*(count(v) for v in wanted))
    return {v: n for v, n in zip(wanted, counts, strict=True) if n}


async def ledger_status(db: AsyncDatabase[Document], now: datetime) -> LedgerStatus:
    """Counts as of `now` (a worker is alive while its heartbeat lease has not expired)."""
    by_rule = await _counts(db[DEAD_LETTERS], "errors.0.rule", [r.value for r in Rule],
                            {"discarded_at": None})
    in_flight = await _counts(db[CORRECTIONS], "status", IN_FLIGHT)
    oldest_docs = await asyncio.gather(*(
        db[CORRECTIONS].find_one({"status": s}, {"requested_at": 1},
                                 sort=[("requested_at", 1)]) for s in in_flight))
    oldest = min((d["requested_at"] for d in oldest_docs
                  if d and d.get("requested_at")), default=None)
    violations = await _counts(db[INVARIANT_VIOLATIONS], "severity",
                               [s.value for s in Severity], {"resolved_at": None})
    failed_at = [d["history"][-1].get("at") async for d in db[CORRECTIONS].find(
        {"status": CorrectionStatus.FAILED.value}, {"history": {"$slice": -1}}
    ).limit(FAILED_READ_MAX) if d.get("history")]
    failed = await db[CORRECTIONS].count_documents({"status": CorrectionStatus.FAILED.value})
    workers = [
        WorkerSeen(worker_id=str(d["_id"]), host=d.get("host"), pid=d.get("pid"),
                   started_at=d.get("started_at"), seen_at=d.get("seen_at"),
                   alive=bool(d.get("expires_at") and d["expires_at"] > now))
        async for d in db[WORKERS].find({}, {"lsids": 0}).sort("started_at", 1)
        .limit(WORKERS_SHOWN)]
    return LedgerStatus(
        dead_letters=sum(by_rule.values()), dead_letters_by_rule=by_rule,
        corrections_in_flight=in_flight,
        oldest_in_flight_at=oldest,
        violations_open=violations, workers=workers, corrections_failed=failed,
        failed_recently=sum(1 for t in failed_at if t and t >= now - FAILED_RECENTLY),
        last_failed_at=max((t for t in failed_at if t), default=None))
