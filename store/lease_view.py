"""Who holds which of a set of leases, and which workers are alive: what the replicas
spreading the recorder's partitions between them each read (workers.leading).

Two small reads: the leases by `_id`, and the live workers by their heartbeat's expiry
(a collection of one document per worker process). The lease documents are the
ones store.leases writes; the worker documents store.workers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pymongo.asynchronous.database import AsyncDatabase

from store.database import PLAN_LOCKS, WORKERS, Document
from store.translate import translate_errors


@dataclass(frozen=True, slots=True)
class LeaseView:
    holders: dict[str, str]
    """Lease `_id` -> its owner, for the leases that have not expired."""
    live: tuple[str, ...]
    """The IDs of the workers whose heartbeat has not expired."""


@translate_errors
class LeaseViews:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._leases = db[PLAN_LOCKS]
        self._workers = db[WORKERS]

    async def read(self, leases: Sequence[str], now: datetime) -> LeaseView:
        held = {str(d["_id"]): str(d["owner"]) async for d in self._leases.find(
            {"_id": {"$in": list(leases)}, "expires_at": {"$gte": now}},
            {"owner": 1})}
        live = tuple(sorted([str(d["_id"]) async for d in self._workers.find(
            {"expires_at": {"$gte": now}}, {"_id": 1})]))
        return LeaseView(held, live)
