"""The corrections collection: one document per Correction aggregate, history included.

Beside the aggregate's fields a document carries `version` (bumped by every write,
which is conditional on the version read, so a racing replica or a cancel loses
cleanly), `arrival` (the stream sequence of the request, the per-plan order) and
`chain`: the links of its request, retries and end in its plan's record chain, each
`{event_id, seq, prev, digest}` (contracts.trust.chain).
Writes happen only through `store.correction_writes`, in the transaction that also
writes the events they announce.
"""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.changes import Versioned
from contracts.corrections.record import Correction
from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus
from store.database import CORRECTIONS, Document
from store.translate import translate_errors

__all__ = ["CorrectionRepository", "from_document", "to_fields"]

INTERNAL_FIELDS = ("_id", "version", "arrival", "chain", "erased")
UNFINISHED = [s.value for s in CorrectionStatus if not CORRECTION_LIFECYCLE.is_terminal(s)]


def to_fields(correction: Correction) -> Document:
    doc: Document = correction.model_dump(mode="python", exclude={"correction_id"})
    return doc


def from_document(doc: Document) -> Versioned:
    fields = {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}
    fields["correction_id"] = doc["_id"]
    return Versioned(Correction.model_validate(fields), int(doc["version"]),
                     int(doc.get("arrival", 0)))


@translate_errors
class CorrectionRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[CORRECTIONS]

    async def get(self, correction_id: str) -> Versioned | None:
        doc = await self._coll.find_one({"_id": correction_id})
        return from_document(doc) if doc else None

    async def find(self, plan_id: str | None = None, status: CorrectionStatus | None = None,
                   limit: int = 100) -> list[Correction]:
        query: dict[str, Any] = {}
        if plan_id is not None:
            query["plan_id"] = plan_id
        if status is not None:
            query["status"] = status.value
        cursor = self._coll.find(query).sort([("arrival", 1), ("_id", 1)]).limit(limit)
        return [from_document(d).correction async for d in cursor]

    async def touching(self, decision_id: str, limit: int = 100) -> list[Correction]:
        """Corrections that targeted the decision or wrote it, in arrival order: two
        reads by the by_target and by_new_decision indexes, whatever the plan holds."""
        found: dict[str, Versioned] = {}
        for field in ("decision_id", "new_decision_id"):
            async for d in self._coll.find({field: decision_id}).limit(limit):
                v = from_document(d)
                found[v.correction.correction_id] = v
        ordered = sorted(found.values(), key=lambda v: (v.arrival, v.correction.correction_id))
        return [v.correction for v in ordered[:limit]]

    async def plans_with_unfinished(self, after: str | None = None, limit: int = 1000
                                    ) -> tuple[list[str], str | None]:
        """A page of the plans that have a correction not yet APPLIED, FAILED or
        CANCELLED, in plan ID order after `after`, and where the next page starts (None:
        this was the last). What the recovery sweep pages through, one page per tick;
        each status's plans are read by the `unfinished` index (status, plan_id), at most
        `limit` documents each."""
        cut: str | None = None
        found: set[str] = set()
        for status in UNFINISHED:
            query: dict[str, Any] = {"status": status}
            if after is not None:
                query["plan_id"] = {"$gt": after}
            ids = [d["plan_id"] async for d in self._coll.find(query, {"plan_id": 1})
                   .sort("plan_id", 1).limit(limit)]
            found.update(ids)
            if len(ids) == limit:  # more of this status may follow: complete up to here
                cut = ids[-1] if cut is None else min(cut, ids[-1])
        plans = sorted(p for p in found if cut is None or p <= cut)
        return plans, cut

    async def unfinished(self, plan_id: str) -> list[Versioned]:
        """The plan's corrections not yet APPLIED, FAILED or CANCELLED, oldest arrival first."""
        cursor = self._coll.find({"plan_id": plan_id, "status": {"$in": UNFINISHED}}).sort(
            [("arrival", 1), ("_id", 1)])
        return [from_document(d) async for d in cursor]

    async def heads(self, plan_id: str) -> list[Versioned]:
        """The oldest arrival of each unfinished status of the plan, oldest first: all
        `contracts.corrections.running.next_to_run` needs to pick the next one, read
        by the `by_plan_status` index (one document per status), so a runner working
        through a long queue reads the same few documents per correction."""
        heads = []
        for status in UNFINISHED:
            doc = await self._coll.find_one({"plan_id": plan_id, "status": status},
                                            sort=[("arrival", 1), ("_id", 1)])
            if doc is not None:
                heads.append(from_document(doc))
        return sorted(heads, key=lambda v: (v.arrival, v.correction.correction_id))
