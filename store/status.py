"""What the ledger holds that needs someone's attention, counted: `agents status` reads it.

Counts only, each one query the indexes answer (or a small collection), so asking for
the status of a large ledger stays cheap: dead letters (by the rule that ended them),
corrections not yet ended (by status, with the oldest), open violations (by severity),
and the workers whose heartbeat is current.
"""

from __future__ import annotations

from datetime import datetime

from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus
from contracts.shared.counts import FAILED_RECENTLY, LedgerStatus, WorkerSeen
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


async def ledger_status(db: AsyncDatabase[Document], now: datetime) -> LedgerStatus:
    """Counts as of `now` (a worker is alive while its heartbeat lease has not expired)."""
    by_rule = {str(d["_id"] or "unknown"): int(d["n"]) async for d in
               await db[DEAD_LETTERS].aggregate([
                   {"$match": {"discarded_at": None}},
                   {"$project": {"first": {"$arrayElemAt": ["$errors", 0]}}},
                   {"$group": {"_id": "$first.rule", "n": {"$sum": 1}}}])}
    groups = [d async for d in await db[CORRECTIONS].aggregate([
        {"$match": {"status": {"$in": IN_FLIGHT}}},
        {"$group": {"_id": "$status", "n": {"$sum": 1},
                    "oldest": {"$min": "$requested_at"}}}])]
    in_flight = {str(d["_id"]): int(d["n"]) for d in groups}
    oldest = min((d["oldest"] for d in groups if d.get("oldest")), default=None)
    violations = {str(d["_id"]): int(d["n"]) async for d in
                  await db[INVARIANT_VIOLATIONS].aggregate([
                      {"$match": {"resolved_at": None}},
                      {"$group": {"_id": "$severity", "n": {"$sum": 1}}}])}
    failed_at = [d["history"][-1].get("at") async for d in db[CORRECTIONS].find(
        {"status": CorrectionStatus.FAILED.value}, {"history": {"$slice": -1}}
    ).limit(FAILED_READ_MAX) if d.get("history")]
    failed = await db[CORRECTIONS].count_documents({"status": CorrectionStatus.FAILED.value})
    workers = [
        WorkerSeen(worker_id=str(d["_id"]), host=d.get("host"), pid=d.get("pid"),
                   started_at=d.get("started_at"), seen_at=d.get("seen_at"),
                   alive=bool(d.get("expires_at") and d["expires_at"] > now))
        async for d in db[WORKERS].find({}, {"lsids": 0}).sort("started_at", 1)]
    return LedgerStatus(
        dead_letters=sum(by_rule.values()), dead_letters_by_rule=by_rule,
        corrections_in_flight=in_flight,
        oldest_in_flight_at=oldest,
        violations_open=violations, workers=workers, corrections_failed=failed,
        failed_recently=sum(1 for t in failed_at if t and t >= now - FAILED_RECENTLY),
        last_failed_at=max((t for t in failed_at if t), default=None))
