"""The ledger's MongoDB: one client, one database, and every repository built once.

`MongoStore` is what the bootstrap (bootstrap/ledger.py) hands the services and the
front ends: it offers every port of services/ports.py (the correction service's, the
invariant service's, the recorder's decisions) and the read port of
services/read_ports.py, each backed by one repository object, so a process holds one
`DecisionRepository` (and its caches) whoever reads through it. The in-memory store of
the tests (tests/memory_store.py) offers the same ports.

The few things only a worker does (its heartbeat registry, the recorder's role lease,
the startup checks) are asked of it here too, so nothing above `store/` builds a
repository or touches the driver: every coroutine method raises the store's errors
(store/translate.py), never pymongo's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pymongo
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.approvals import DEFAULT_TTL
from contracts.shared.counts import LedgerStatus
from store.approvals import ApprovalRepository
from store.attempts import CorrectionAttemptRepository
from store.audit import AuditReader
from store.bulk import BulkBatchStore
from store.correction_writes import CorrectionWriter
from store.corrections import CorrectionRepository
from store.database import Document, connect, ensure_indexes, replica_set_name
from store.dead_letters import DeadLetterRepository
from store.decisions import DecisionRepository
from store.deliveries import DeliveryFailures, ParentWaits
from store.erasure import ErasureRepository
from store.gate_sink import HoldSink
from store.gate_source import GateSource
from store.holds import HoldRepository
from store.impact import ImpactReader
from store.invariants import InvariantRepository
from store.leases import Leases
from store.outbox import OutboxRepository
from store.plan_uses import PlanUseRepository
from store.plans import PlanRepository
from store.recorder import RecorderRepository
from store.retention import RetentionStore
from store.status import ledger_status
from store.transactions import SessionHook, on_new_session
from store.translate import translate_errors
from store.upkeep import UpkeepRepository
from store.views import TreeViews
from store.violations import ViolationRepository
from store.webhooks import WebhookStore
from store.workers import WorkerRegistry

__all__ = ["MongoStore"]


@translate_errors
class MongoStore:
    """Every repository over one database. `lease_seconds` is how long a plan's
    correction lease outlives its holder's last renewal (CORRECTIONS_LEASE_SECONDS)."""

    def __init__(self, db: AsyncDatabase[Document], *, lease_seconds: float = 10.0,
                 approval_ttl_seconds: float = DEFAULT_TTL.total_seconds()) -> None:
        self._db = db
        ttl = timedelta(seconds=approval_ttl_seconds)
        self.decisions = DecisionRepository(db)
        self.recorder = RecorderRepository(db, HoldSink(db, ttl))
        """The recorder's write path and the only caches: used by the recording worker."""
        self.plans = PlanRepository(db)
        self.corrections = CorrectionRepository(db)
        self.attempts = CorrectionAttemptRepository(db)
        self.outbox = OutboxRepository(db)
        self.dead_letters = DeadLetterRepository(db)
        self.invariants = InvariantRepository(db)
        self.violations = ViolationRepository(db)
        self.impact = ImpactReader(db)
        self.views = TreeViews(db)
        self.leases = Leases(db, lease_seconds)
        self.writer = CorrectionWriter(db, self.leases)
        self.deliveries = DeliveryFailures(db)
        self.parent_waits = ParentWaits(db)
        self.holds = HoldRepository(db, ttl)
        self.approvals = ApprovalRepository(db)
        self.plan_uses = PlanUseRepository(db)
        self.audit = AuditReader(db)
        self.webhooks = WebhookStore(db)
        self.upkeep = UpkeepRepository(db)
        self.erasures = ErasureRepository(db)
        self.retention = RetentionStore(db)
        self.bulk = BulkBatchStore(db)
        """Bulk correction batches (services/bulk.py)."""

    def gate_source(self, *, judge: bool = False) -> GateSource:
        """What the recorder's gate reads per batch (one per recorder: it caches);
        `judge`: word-only invariants are judged (a judge is configured)."""
        return GateSource(self._db, self.recorder.sink, judge=judge)

    @classmethod
    def connect(cls, uri: str, db_name: str, *, lease_seconds: float = 10.0,
                timeout_ms: int | None = None,
                approval_ttl_seconds: float = DEFAULT_TTL.total_seconds()) -> MongoStore:
        """A new client with the durable options (store.database); no I/O yet.
        `timeout_ms` bounds server selection and connecting (a command-line tool wants
        to hear within seconds that the server is not there); None: the driver's."""
        options: dict[str, Any] = {} if timeout_ms is None else {
            "serverSelectionTimeoutMS": timeout_ms, "connectTimeoutMS": timeout_ms}
        return cls(connect(uri, **options)[db_name], lease_seconds=lease_seconds,
                   approval_ttl_seconds=approval_ttl_seconds)

    @property
    def client(self) -> AsyncMongoClient[Document]:
        """The driver's client, for the workers' gauges that still sample MongoDB
        directly (workers.metrics); everything else goes through the repositories."""
        return self._db.client

    # --- the read port's status ----------------------------------------------------

    async def status(self, now: datetime) -> LedgerStatus:
        return await ledger_status(self._db, now)

    # --- a worker's own -------------------------------------------------------------

    def worker_registry(self, worker_id: str, lease_seconds: float) -> WorkerRegistry:
        """This worker's heartbeat; call once per process."""
        return WorkerRegistry(self._db, worker_id, lease_seconds)

    def role_leases(self, lease_seconds: float) -> Leases:
        """Leases held by a role rather than a plan (one recorder at a time,
        workers.leading): the plans' lease collection with their own time to live."""
        return Leases(self._db, lease_seconds)

    def note_sessions(self, hook: SessionHook | None) -> None:
        """Call `hook` with every transaction's session before it starts (None: stop)."""
        on_new_session(self._db.client, hook)

    # --- connecting -----------------------------------------------------------------

    async def ping(self, timeout: float) -> None:
        """One `ping` within `timeout` seconds, server selection included."""
        with pymongo.timeout(timeout):
            await self._db.client.admin.command("ping")

    async def replica_set_name(self) -> str | None:
        """The `setName` the server reports; None for a standalone server."""
        return await replica_set_name(self._db.client)

    async def ensure_indexes(self) -> None:
        await ensure_indexes(self._db)

    async def close(self) -> None:
        self.note_sessions(None)
        await self._db.client.close()
