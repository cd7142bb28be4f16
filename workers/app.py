"""The worker app: the FastStream broker, its documented subscribers and its lifecycle hooks.

The ledger is opened in the app's startup hook (workers.runtime, through the bootstrap),
never at import, so importing this module touches no server. The AsyncAPI document
comes from the declared message families (workers.asyncapi), not from this app.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from faststream import FastStream
from faststream.nats import NatsBroker

from bootstrap.settings import Settings
from contracts.corrections.families import DRYRUN
from contracts.shared.urls import nats_servers
from services.corrections.policy import CrashHook, no_crash
from services.tasks import stop_task
from store.lease_view import LeaseViews
from store.leases import Leases
from workers.approvals import expiry_loop
from workers.connections import NatsLink, nats_options
from workers.deps import Deps
from workers.dry_run import start_dry_run
from workers.handlers import pullers
from workers.judge import judge_loop
from workers.logs import BROKER_LOGGER
from workers.metrics import GAUGES_ROLE
from workers.recovery import Sweeper
from workers.relay import relay_loop
from workers.retention import retention_loop
from workers.runtime import Runtime, close_runtime, open_runtime
from workers.webhooks import WebhookWorker

log = logging.getLogger(__name__)

def build_app(settings: Settings | None = None, crash: CrashHook = no_crash,
              runtime: Runtime | None = None) -> FastStream:
    """The worker app: the broker, the ledger opened at startup, the consumers after.
    `crash`: called at each named step of a correction (a fault-injection seam for
    tests, tests/crashing_workers.py; nothing in production sets it). `runtime`: the
    state the app fills in, given by a caller that runs the app in its own event loop
    and asks whether its consumers still run (tests/in_process_workers.py); its own
    `crash` then applies."""
    settings = settings or Settings.from_env()
    link = NatsLink(settings.nats_url)
    broker = NatsBroker(nats_servers(settings.nats_url), graceful_timeout=settings.graceful_timeout,
                        logger=logging.getLogger(BROKER_LOGGER),
                        **nats_options(settings, link))
    runtime = runtime if runtime is not None else Runtime(crash=crash)

    app = FastStream(broker, logger=logging.getLogger(BROKER_LOGGER))

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


async def start_consumers(runtime: Runtime, settings: Settings, broker: NatsBroker) -> None:
    """The background loops, the dry-run responder, every puller, the metrics sampler."""
    js = broker.connection.jetstream()
    start_background(runtime, settings)
    runtime.dry_run = await start_dry_run(broker.connection, runtime.get_corrections,
                                          settings.max_payload_bytes,
                                          settings.trust_policy().for_family(DRYRUN))
    assert runtime.mongo is not None
    deps = Deps(settings, recorder=runtime.get_recorder, corrections=runtime.get_corrections,
                invariants=runtime.get_invariants, dead_letters=runtime.get_dead_letters,
                upkeep=runtime.get_upkeep, nc=broker.connection,
                templates=runtime.get_templates, approvals=runtime.get_approvals,
                failures=runtime.failures, crash=runtime.crash,
                trust=settings.trust_policy())
    db = runtime.mongo[settings.mongodb_db]
    runtime.pullers = pullers(js, deps, locks=Leases(db, settings.recorder_lease_seconds),
                              views=LeaseViews(db), owner=runtime.worker_id)
    for puller in runtime.pullers:
        puller.metrics = runtime.metrics
        await puller.start()
    runtime.webhooks = WebhookWorker(broker.connection, runtime.get_ledger().webhooks,
                                     settings, runtime.worker_id, runtime.get_ledger().publisher)
    await runtime.webhooks.start()
    runtime.consuming = True
    every = settings.metrics_sample_seconds
    runtime.sampler = asyncio.create_task(runtime.metrics.sample_forever(
        js, db, [c for p in runtime.pullers for c in p.consumers], every,
        leases=Leases(db, 3 * every), owner=runtime.worker_id), name="metrics-sampler")


def start_background(runtime: Runtime, settings: Settings) -> None:
    """The loops beside the consumers: the outbox relay, the recovery sweep, and the
    retention pass when policies are set."""
    runtime.relay = asyncio.create_task(relay_loop(runtime.get_corrections, settings),
                                        name="outbox-relay")
    runtime.sweeper = Sweeper(runtime.get_corrections, settings, runtime.registry)
    runtime.sweep = asyncio.create_task(runtime.sweeper.run(), name="recovery-sweep")
    runtime.expiry = asyncio.create_task(
        expiry_loop(runtime.get_approvals, settings.approval_sweep_seconds),
        name="approval-expiry")
    if settings.retention.policies and runtime.mongo is not None:
        leases = Leases(runtime.mongo[settings.mongodb_db], settings.retention.interval_seconds)
        runtime.retention = asyncio.create_task(retention_loop(
            lambda: runtime.get_ledger().store, leases, runtime.worker_id, settings),
            name="retention")
    judge = runtime.get_ledger().judge
    if judge is not None:
        runtime.judge = asyncio.create_task(judge_loop(lambda: judge, settings.judge),
                                            name="judge")


async def stop_background(runtime: Runtime, settings: Settings) -> None:
    if runtime.webhooks is not None:
        await runtime.webhooks.stop()
    for task in (runtime.relay, runtime.sweep, runtime.sampler, runtime.judge,
                 runtime.expiry, runtime.retention):
        await stop_task(task)
    if runtime.mongo is not None:
        # The sampler releases the gauges' lease as it ends; one that did not end in time
        # (stop_task) must not leave it to expire, so it is released here as well.
        with contextlib.suppress(Exception):
            await Leases(runtime.mongo[settings.mongodb_db], 1.0).release(
                GAUGES_ROLE, runtime.worker_id)
    if runtime.sweeper is not None:
        await runtime.sweeper.stop(settings.graceful_timeout)
    if runtime.registry is not None:
        with contextlib.suppress(Exception):
            await runtime.registry.leave()
