"""What a running worker holds, and its start and stop: the ledger (opened once by the
bootstrap), its connections' watchers, the health endpoint, the consumers and loops.

`open_runtime` does, in order: the health endpoint, MongoDB (a ping within the deadline,
a replica set, the indexes), NATS, the streams, and the worker's own registration. A
failure at any step is one line naming the variable to fix (`StartupFailed`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.subscription import Subscription
from nats.errors import ConnectionReconnectingError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import ServiceUnavailableError
from pymongo import AsyncMongoClient

from bootstrap.ledger import Ledger, Role, open_ledger
from bootstrap.nats_source import ConnectedNats
from bootstrap.reachability import (
    StartupFailed,
    ping_mongo,
    require_replica_set,
)
from bootstrap.settings import Settings
from contracts.shared.ids import new_id
from contracts.shared.urls import redact
from services.approvals import ApprovalService
from services.corrections.policy import CrashHook, no_crash
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from services.plan_templates import PlanTemplateService
from services.recorder import RecorderService
from services.upkeep import UpkeepService
from store.database import Document
from store.dead_letters import DeadLetterRepository
from store.deliveries import DeliveryFailures
from store.workers import WorkerRegistry
from workers.connections import MongoWatch, NatsLink, connect_nats
from workers.durables import partition_count, retire_durables
from workers.health import HealthServer
from workers.leading import LeadingPullers
from workers.logs import set_worker_id
from workers.metrics import Metrics
from workers.pull import BatchPuller
from workers.readiness import readiness, start_health
from workers.recovery import Sweeper
from workers.stream_config import limits_for
from workers.streams import StreamRefused, ensure_streams
from workers.webhooks import WebhookWorker

log = logging.getLogger(__name__)

PUBLISH_ACK_TIMEOUT = 10.0


@dataclass
class Runtime:
    """What the handlers use, filled in at startup."""

    ledger: Ledger | None = None
    crash: CrashHook = no_crash
    """Called at each named step of a correction (workers.app.build_app)."""
    pullers: list[BatchPuller[Any] | LeadingPullers] = field(default_factory=list)
    worker_id: str = ""
    dry_run: Subscription | None = None
    relay: asyncio.Task[None] | None = None
    judge: asyncio.Task[None] | None = None
    expiry: asyncio.Task[None] | None = None
    """The approvals' expiry sweep (workers.approvals)."""
    retention: asyncio.Task[None] | None = None
    mongo_watch: MongoWatch | None = None
    health: HealthServer | None = None
    consuming: bool = False
    """Set once every consumer started, cleared when shutdown begins."""
    sweeper: Sweeper | None = None
    registry: WorkerRegistry | None = None
    sweep: asyncio.Task[None] | None = None
    metrics: Metrics = field(default_factory=Metrics)
    sampler: asyncio.Task[None] | None = None
    webhooks: WebhookWorker | None = None

    def get_ledger(self) -> Ledger:
        assert self.ledger is not None, "the app has not started"
        return self.ledger

    def get_recorder(self) -> RecorderService:
        return self.get_ledger().recorder

    def get_corrections(self) -> CorrectionService:
        return self.get_ledger().corrections

    def get_invariants(self) -> InvariantService:
        return self.get_ledger().invariants

    def get_upkeep(self) -> UpkeepService:
        return self.get_ledger().upkeep

    def get_approvals(self) -> ApprovalService:
        approvals = self.get_ledger().approvals
        assert approvals is not None
        return approvals

    def get_templates(self) -> PlanTemplateService:
        templates = self.get_ledger().templates
        assert templates is not None
        return templates

    def get_dead_letters(self) -> DeadLetterRepository:
        return self.get_ledger().store.dead_letters

    @property
    def failures(self) -> DeliveryFailures | None:
        return self.ledger.store.deliveries if self.ledger is not None else None

    @property
    def mongo(self) -> AsyncMongoClient[Document] | None:
        """The ledger's MongoDB client, for the role lease and the gauges' sampling."""
        return self.ledger.store.client if self.ledger is not None else None


async def open_runtime(runtime: Runtime, settings: Settings, broker: NatsBroker,
                       link: NatsLink) -> None:
    """Health endpoint, MongoDB (durable options, replica set checked, indexes), NATS,
    streams, the worker's registration: everything the consumers need, in that order."""
    if settings.health_addr is not None:
        runtime.health = await start_health(settings.health_addr,
                                            readiness(runtime, link), runtime.metrics)
    worker_id = runtime.worker_id = new_id()
    set_worker_id(worker_id)
    ledger = runtime.ledger = open_ledger(
        settings, ConnectedNats(lambda: broker.connection),
        Role(mongo_timeout_ms=None, publish_ack_timeout=PUBLISH_ACK_TIMEOUT,
             worker_id=worker_id, observer=runtime.metrics, crash=runtime.crash))
    store = ledger.store
    await ping_mongo(store, settings.mongodb_uri, settings.connect_timeout_seconds)
    await require_replica_set(store, settings.mongodb_uri,
                              allow_standalone=settings.allow_standalone_mongodb)
    await store.ensure_indexes()
    await store.webhooks.ensure_indexes()
    await connect_nats(broker.connect, link, settings.connect_timeout_seconds)
    await prepare_streams(broker, settings)
    runtime.mongo_watch = MongoWatch(store, settings.mongodb_uri,
                                     settings.mongo_ping_interval_seconds,
                                     settings.connect_timeout_seconds)
    runtime.mongo_watch.start()
    runtime.registry = store.worker_registry(worker_id, settings.worker_lease_seconds)
    # Every transaction's session is noted first, so if this process dies inside one,
    # another worker can end it at once (store.workers).
    store.note_sessions(runtime.registry.register)
    await runtime.registry.heartbeat()
    if settings.artifacts_root is None:
        log.warning("archiving is off: ARTIFACTS_ROOT is unset, so a revert's archive lists "
                    "the artifacts in its manifest and copies none")
    log.info("workers connected to %s and %s/%s", redact(settings.nats_url),
             redact(settings.mongodb_uri), settings.mongodb_db)


async def close_runtime(runtime: Runtime) -> None:
    """Close what `open_runtime` opened (whatever part of it did open), once."""
    if runtime.mongo_watch is not None:
        await runtime.mongo_watch.stop()
        runtime.mongo_watch = None
    if runtime.health is not None:
        await runtime.health.stop()
        runtime.health = None
    if runtime.ledger is not None:
        # The broker closes its own NATS connection; the ledger closes MongoDB.
        await runtime.ledger.close()
        runtime.ledger = None


STREAMS_UNAVAILABLE = (ServiceUnavailableError, NoRespondersError, NatsTimeoutError,
                       ConnectionReconnectingError, TimeoutError)
"""What JetStream answers while a cluster elects a stream's leader (a node of it was
killed or restarted): worth asking again, not a reason to stop."""


async def prepare_streams(broker: NatsBroker, settings: Settings) -> None:
    """Create the streams or bring them toward the profile; a refusal ends the start.

    A worker started while the cluster elects a leader (a node killed while a replica
    was starting) asks again for up to CONNECT_TIMEOUT_SECONDS, then ends its start in
    one line like any other outage, instead of a traceback."""
    deadline = asyncio.get_running_loop().time() + settings.connect_timeout_seconds
    while True:
        try:
            js = broker.connection.jetstream()
            await ensure_streams(js, limits_for(settings),
                                 partial(partition_count, settings=settings))
            await retire_durables(js)
            return
        except StreamRefused as exc:
            raise StartupFailed(str(exc)) from None
        except STREAMS_UNAVAILABLE as exc:
            if asyncio.get_running_loop().time() > deadline:
                raise StartupFailed(
                    f"JetStream at {redact(settings.nats_url)} (NATS_URL) did not answer "
                    f"for the streams within {settings.connect_timeout_seconds:g} s: "
                    f"{type(exc).__name__}") from None
            await asyncio.sleep(0.5)
