"""The one wiring module: settings -> clients -> repositories -> services -> FastStream app.

Clients are created in the app's startup hook, never at import, so importing this
module (e.g. to generate the AsyncAPI document) touches no server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from nats.aio.subscription import Subscription
from nats.errors import ConnectionReconnectingError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import ServiceUnavailableError
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.subjects import DECISIONS_STREAM, RECORDER_DURABLE
from contracts.shared.ids import new_id
from contracts.shared.timestamps import utc_now
from contracts.shared.urls import nats_servers, redact
from services.archive import Archive
from services.corrections.policy import CorrectionPolicy
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from services.recorder import RecorderService
from services.recorder_policy import RecorderPolicy
from store.correction_store import CorrectionStore
from store.database import Document, connect, ensure_indexes
from store.dead_letters import DeadLetterRepository
from store.deliveries import DeliveryFailures, ParentWaits
from store.invariant_store import InvariantStore
from store.leases import Leases
from store.recorder import RecorderRepository
from store.transactions import on_new_session
from store.workers import WorkerRegistry
from workers.connections import (
    MongoWatch,
    NatsLink,
    StartupFailed,
    connect_nats,
    describe,
    nats_options,
    ping_mongo,
    require_replica_set,
)
from workers.corrections import (
    correction_pullers,
    crash_hook,
    document_corrections,
    relay_loop,
    start_dry_run,
)
from workers.health import HealthServer, Readiness, parse_addr
from workers.invariants import document_invariants, invariant_pullers
from workers.leading import RECORDER_ROLE, LeadingPuller
from workers.logs import BROKER_LOGGER, set_worker_id
from workers.metrics import Metrics
from workers.publisher import JetStreamPublisher
from workers.pull import BatchPuller
from workers.recorder import document_recorder, recorder_puller
from workers.recovery import Sweeper
from workers.settings import Settings
from workers.streams import StreamRefused, ensure_streams

log = logging.getLogger(__name__)

TITLE = "Decision ledger"
VERSION = "0.1.0"


@dataclass
class Runtime:
    """What the handlers use, filled in at startup."""

    mongo: AsyncMongoClient[Document] | None = None
    recorder: RecorderService | None = None
    corrections: CorrectionService | None = None
    invariants: InvariantService | None = None
    dead_letters: DeadLetterRepository | None = None
    failures: DeliveryFailures | None = None
    pullers: list[BatchPuller[Any] | LeadingPuller] = field(default_factory=list)
    worker_id: str = ""
    dry_run: Subscription | None = None
    relay: asyncio.Task[None] | None = None
    mongo_watch: MongoWatch | None = None
    health: HealthServer | None = None
    consuming: bool = False
    """Set once every consumer started, cleared when shutdown begins."""
    sweeper: Sweeper | None = None
    registry: WorkerRegistry | None = None
    sweep: asyncio.Task[None] | None = None
    metrics: Metrics = field(default_factory=Metrics)
    sampler: asyncio.Task[None] | None = None

    def get_recorder(self) -> RecorderService:
        assert self.recorder is not None, "the app has not started"
        return self.recorder

    def get_corrections(self) -> CorrectionService:
        assert self.corrections is not None, "the app has not started"
        return self.corrections

    def get_invariants(self) -> InvariantService:
        assert self.invariants is not None, "the app has not started"
        return self.invariants

    def get_dead_letters(self) -> DeadLetterRepository:
        assert self.dead_letters is not None, "the app has not started"
        return self.dead_letters


def build_app(settings: Settings | None = None, *, for_docs: bool = False) -> FastStream:
    """The worker app; `for_docs` builds it only to generate the AsyncAPI document."""
    settings = settings or Settings.from_env()
    link = NatsLink(settings.nats_url)
    broker = NatsBroker(nats_servers(settings.nats_url), graceful_timeout=settings.graceful_timeout,
                        logger=logging.getLogger(BROKER_LOGGER),
                        **nats_options(settings, link))
    runtime = Runtime()
    document_recorder(broker, for_docs=for_docs)
    document_corrections(broker, for_docs=for_docs)
    document_invariants(broker, for_docs=for_docs)

    app = FastStream(
        broker,
        logger=logging.getLogger(BROKER_LOGGER),
        specification=AsyncAPI(
            title=TITLE, version=VERSION,
            description="Agents record decisions; operators correct them; subscribers react.",
        ),
    )

    @app.on_startup
    async def start() -> None:
        try:
            await open_runtime(runtime, settings, broker, link)
        except BaseException:
            # A start that fails never reaches the shutdown hooks: close what it opened,
            # or the MongoDB client's background tasks hold the process's exit.
            await close_runtime(runtime)
            raise

    @app.after_startup
    async def after_startup() -> None:
        await start_consumers(runtime, settings, broker)

    @app.on_shutdown
    async def stop_consumers() -> None:
        runtime.consuming = False
        link.stopping = True
        if runtime.dry_run is not None:
            with contextlib.suppress(Exception):
                await runtime.dry_run.unsubscribe()
        # Together: each finishes its batch in hand or its idle pull (up to a second), so
        # one after another would add those waits up on every shutdown.
        await asyncio.gather(*(p.stop(settings.graceful_timeout) for p in runtime.pullers))
        await stop_background(runtime, settings)

    @app.after_shutdown
    async def close_clients() -> None:
        await close_runtime(runtime)

    return app


async def open_runtime(runtime: Runtime, settings: Settings, broker: NatsBroker,
                       link: NatsLink) -> None:
    """Health endpoint, MongoDB (durable options, replica set checked, indexes), NATS,
    streams, the services: everything the consumers need, in that order."""
    if settings.health_addr is not None:
        runtime.health = await start_health(settings.health_addr,
                                            readiness(runtime, link), runtime.metrics)
    mongo = connect(settings.mongodb_uri)
    runtime.mongo = mongo
    await ping_mongo(mongo, settings.mongodb_uri, settings.connect_timeout_seconds)
    await require_replica_set(mongo, settings.mongodb_uri,
                              allow_standalone=settings.allow_standalone_mongodb)
    db = mongo[settings.mongodb_db]
    await ensure_indexes(db)
    await connect_nats(broker.connect, link, settings.connect_timeout_seconds)
    await prepare_streams(broker, settings)
    runtime.mongo_watch = MongoWatch(mongo, settings.mongodb_uri,
                                     settings.mongo_ping_interval_seconds,
                                     settings.connect_timeout_seconds)
    runtime.mongo_watch.start()
    open_services(runtime, settings, broker, db)
    assert runtime.registry is not None
    await runtime.registry.heartbeat(utc_now())
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
    if runtime.mongo is not None:
        on_new_session(runtime.mongo, None)
        await runtime.mongo.close()
        runtime.mongo = None



STREAMS_UNAVAILABLE = (ServiceUnavailableError, NoRespondersError, NatsTimeoutError,
                       ConnectionReconnectingError, TimeoutError)
"""What JetStream answers while a cluster elects a stream's leader (a node of it was
killed or restarted): worth asking again, not a reason to stop."""


async def prepare_streams(broker: NatsBroker, settings: Settings) -> None:
    """Create the streams or bring them toward the profile; a refusal ends the start.

    A worker started while the cluster elects a leader (seen in the cluster fault run:
    a node killed while a replica was starting) asks again for up to
    CONNECT_TIMEOUT_SECONDS, then ends its start in one line like any other outage,
    instead of a traceback."""
    deadline = asyncio.get_running_loop().time() + settings.connect_timeout_seconds
    while True:
        try:
            await ensure_streams(broker.connection.jetstream(), settings.stream_limits())
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


async def start_consumers(runtime: Runtime, settings: Settings, broker: NatsBroker) -> None:
    """The background loops, the dry-run responder, every puller, the metrics sampler."""
    js = broker.connection.jetstream()
    start_background(runtime, settings)
    runtime.dry_run = await start_dry_run(broker.connection, runtime.get_corrections,
                                          settings.max_payload_bytes)
    failures = runtime.failures
    assert runtime.mongo is not None
    # The recorder last: tests (and `agents up`) take its waiting pull as "ready".
    runtime.pullers = [
        *correction_pullers(js, settings, runtime.get_corrections,
                            crash_hook(settings.crash_at), failures=failures),
        # Before the recorder, so the reconciler's consumer exists before any root.
        *invariant_pullers(js, settings, runtime.get_invariants,
                           runtime.get_dead_letters, failures=failures),
        LeadingPuller(lambda: recorder_puller(js, settings, runtime.get_recorder,
                                              failures=failures),
                      Leases(runtime.mongo[settings.mongodb_db],
                             settings.recorder_lease_seconds),
                      role=RECORDER_ROLE, owner=runtime.worker_id, stream=DECISIONS_STREAM,
                      durable=RECORDER_DURABLE, graceful_timeout=settings.graceful_timeout),
    ]
    for puller in runtime.pullers:
        puller.metrics = runtime.metrics
        await puller.start()
    runtime.consuming = True
    assert runtime.mongo is not None
    runtime.sampler = asyncio.create_task(runtime.metrics.sample_forever(
        js, runtime.mongo[settings.mongodb_db],
        [(p.stream, p.durable) for p in runtime.pullers],
        settings.metrics_sample_seconds), name="metrics-sampler")


def start_background(runtime: Runtime, settings: Settings) -> None:
    """The loops beside the consumers: the outbox relay and the recovery sweep."""
    runtime.relay = asyncio.create_task(relay_loop(runtime.get_corrections, settings),
                                        name="outbox-relay")
    runtime.sweeper = Sweeper(runtime.get_corrections, settings, runtime.registry)
    runtime.sweep = asyncio.create_task(runtime.sweeper.run(), name="recovery-sweep")


async def stop_background(runtime: Runtime, settings: Settings) -> None:
    for task in (runtime.relay, runtime.sweep, runtime.sampler):
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if runtime.sweeper is not None:
        await runtime.sweeper.stop(settings.graceful_timeout)
    if runtime.registry is not None:
        with contextlib.suppress(Exception):
            await runtime.registry.leave()


def open_services(runtime: Runtime, settings: Settings, broker: NatsBroker,
                  db: AsyncDatabase[Document]) -> None:
    """Repositories and services over the connected clients, into `runtime`."""
    worker_id = runtime.worker_id = new_id()
    set_worker_id(worker_id)
    runtime.registry = WorkerRegistry(db, worker_id, settings.worker_lease_seconds)
    # Every transaction's session is noted first, so if this process dies inside one,
    # another worker can end it at once (store.workers).
    on_new_session(db.client, runtime.registry.register)
    runtime.dead_letters = DeadLetterRepository(db)
    runtime.failures = DeliveryFailures(db)
    runtime.recorder = RecorderService(
        RecorderRepository(db), runtime.dead_letters,
        JetStreamPublisher(broker.connection),
        RecorderPolicy(parent_wait_seconds=settings.recorder_parent_wait_seconds,
                       max_payload_bytes=settings.max_payload_bytes),
        waits=ParentWaits(db),
    )
    runtime.corrections = CorrectionService(
        CorrectionStore.open(db, settings.corrections_lease_seconds),
        JetStreamPublisher(broker.connection),
        Archive(settings.resolved_archive_root(), settings.artifacts_root),
        policy=CorrectionPolicy(max_attempts=settings.corrections_max_attempts,
                                max_decisions=settings.corrections_max_decisions),
        crash=crash_hook(settings.crash_at), worker_id=worker_id,
        observer=runtime.metrics,
    )
    runtime.invariants = InvariantService.from_store(InvariantStore.open(db),
                                                     JetStreamPublisher(broker.connection))


def readiness(runtime: Runtime, link: NatsLink) -> Readiness:
    """Ready: NATS connected, MongoDB answered a ping lately, every consumer pulling."""

    def nats_check() -> str | None:
        return link.problem()

    def mongo_check() -> str | None:
        if runtime.mongo_watch is None:
            return "connecting"
        return runtime.mongo_watch.problem()

    def consumers_check() -> str | None:
        if not runtime.consuming:
            return "not started" if not runtime.pullers else "stopping"
        stopped = sum(not p.running for p in runtime.pullers)
        return f"{stopped} of {len(runtime.pullers)} stopped" if stopped else None

    return Readiness({"nats": nats_check, "mongodb": mongo_check,
                      "consumers": consumers_check})


async def start_health(addr: str, readiness: Readiness, metrics: Metrics) -> HealthServer:
    host, port = parse_addr(addr)
    server = HealthServer(readiness, metrics=metrics.render)
    try:
        bound_host, bound_port = await server.start(host, port)
    except OSError as exc:
        raise StartupFailed(f"cannot listen on {addr} (HEALTH_ADDR): "
                            f"{describe(exc, 0)}") from None
    log.info("health on http://%s:%d/healthz and /readyz, metrics on /metrics",
             bound_host, bound_port)
    return server
