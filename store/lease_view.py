"""Who holds which of a set of leases, and which workers are alive: what the replicas
spreading the recorder's partitions between them each read (workers.leading).

Two small reads: the leases by `_id`, and the live workers by their heartbeat's expiry
(a collection of one document per worker process), both judged by the database
server's clock. The lease documents are the ones store.leases writes; the worker
documents store.workers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from store.database import PLAN_LOCKS, WORKERS, Document
from store.server_clock import unexpired
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

    async def read(self, leases: Sequence[str]) -> LeaseView:
        """Judged by the database server's clock, as the leases and heartbeats are
        stamped (store.server_clock)."""
        current = {"expires_at": {"$type": "date"}, "$expr": unexpired("expires_at")}
        held = {str(d["_id"]): str(d["owner"]) async for d in self._leases.find(
            {"_id": {"$in": list(leases)}, **current}, {"owner": 1})}
        live = tuple(sorted([str(d["_id"]) async for d in self._workers.find(
            current, {"_id": 1})]))
        return LeaseView(held, live)
