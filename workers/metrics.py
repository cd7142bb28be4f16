"""Prometheus metrics of one worker process, served at `/metrics` beside `/healthz`.

Counted where they happen, in the workers' layer (the services report through the
`CorrectionObserver` port): messages by consumer and outcome, batch sizes, how long a
batch takes from pull to settled (for the recorder, the persist latency), corrections
ended by mode and outcome with their duration from request to end. Sampled every
`METRICS_SAMPLE_SECONDS` from the servers, so a scrape never waits on them: each
consumer's pending, ack-pending and redelivered counts, and the ledger's dead letters
by rule, corrections in flight by status and open violations by severity (indexed
counts: store.status). Only one replica samples those (the holder of the `role:gauges`
lease); the others show none, so summing over replicas counts everything once and the
cost of sampling does not grow with the replicas.

Every process has its own registry (tests start several in one interpreter, and a
process-wide default registry would mix them up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from store.leases import Leases
from store.status import ledger_status

log = logging.getLogger(__name__)

GAUGES_ROLE = "role:gauges"
"""The lease (`plan_locks` `_id`) of the replica that samples the shared gauges."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    """The process's metrics; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages = Counter(
            "ledger_messages", "Messages settled, by consumer and outcome (ack: done; "
            "term: dead-lettered; nak: waiting; fail: failed, redelivered after backoff; "
            "woken: a waiting one nak'ed again at once, its parent stored).",
            ["stream", "consumer", "outcome"], registry=r)
        self.batch_size = Histogram(
            "ledger_batch_size", "Messages per pulled batch.", ["consumer"],
            buckets=BATCH_BUCKETS, registry=r)
        self.batch_seconds = Histogram(
            "ledger_batch_seconds", "From a batch pulled to every message settled (the "
            "recorder's persist latency).", ["consumer"], buckets=SECONDS_BUCKETS, registry=r)
        self.corrections = Counter(
            "ledger_corrections_ended", "Corrections ended, by mode and outcome.",
            ["mode", "outcome"], registry=r)
        self.correction_seconds = Histogram(
            "ledger_correction_seconds", "From request to end, by mode and outcome.",
            ["mode", "outcome"], buckets=SECONDS_BUCKETS, registry=r)
        self.consumer_pending = Gauge(
            "ledger_consumer_pending", "Messages the consumer has not been delivered yet.",
            ["stream", "consumer"], registry=r)
        self.consumer_ack_pending = Gauge(
            "ledger_consumer_ack_pending", "Messages delivered and not yet acknowledged.",
            ["stream", "consumer"], registry=r)
        self.consumer_redelivered = Gauge(
            "ledger_consumer_redelivered", "Messages delivered more than once, pending.",
            ["stream", "consumer"], registry=r)
        self.dead_letters = Gauge(
            "ledger_dead_letters", "Dead letters kept, by the first rule that ended them.",
            ["rule"], registry=r)
        self.in_flight = Gauge(
            "ledger_corrections_in_flight", "Corrections not yet ended, by status.",
            ["status"], registry=r)
        self.violations_open = Gauge(
            "ledger_violations_open", "Unresolved invariant violations, by severity.",
            ["severity"], registry=r)
        self.sampled_at = Gauge(
            "ledger_sampled_timestamp_seconds", "When the gauges above were last sampled "
            "(0: another replica samples them).", registry=r)
        self.sampler = Gauge(
            "ledger_gauges_sampler", "1 on the one replica that samples the consumer and "
            "ledger gauges (the holder of the role:gauges lease), 0 on the others.",
            registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # --- what the services report (services.ports.publishing.CorrectionObserver) --------------

    def correction_ended(self, mode: str, outcome: str, seconds: float) -> None:
        self.corrections.labels(mode, outcome).inc()
        self.correction_seconds.labels(mode, outcome).observe(max(seconds, 0.0))

    # --- sampling -----------------------------------------------------------------

    async def sample(self, js: JetStreamContext, db: AsyncDatabase[Document],
                     consumers: Sequence[tuple[str, str]]) -> None:
        for stream, durable in consumers:
            with contextlib.suppress(Exception):  # gone or unreachable: keep the last value
                info = await js.consumer_info(stream, durable)
                self.consumer_pending.labels(stream, durable).set(info.num_pending or 0)
                self.consumer_ack_pending.labels(stream, durable).set(info.num_ack_pending or 0)
                self.consumer_redelivered.labels(stream, durable).set(
                    info.num_redelivered or 0)
        status = await ledger_status(db, datetime.now(UTC))
        _replace(self.dead_letters, status.dead_letters_by_rule)
        _replace(self.in_flight, status.corrections_in_flight)
        _replace(self.violations_open, status.violations_open)
        self.sampled_at.set_to_current_time()

    def clear(self) -> None:
        """This replica does not sample: it shows none of the ledger's gauges (another
        replica does), so a sum over the replicas counts each dead letter once."""
        for gauge in (self.consumer_pending, self.consumer_ack_pending,
                      self.consumer_redelivered, self.dead_letters, self.in_flight,
                      self.violations_open):
            gauge.clear()
        self.sampled_at.set(0)
        self.sampler.set(0)

    async def sample_forever(self, js: JetStreamContext, db: AsyncDatabase[Document],
                             consumers: Sequence[tuple[str, str]], every: float, *,
                             leases: Leases | None = None, owner: str = "") -> None:
        """Sample every `every` seconds while this replica holds the gauges' lease
        (`role:gauges`, renewed each round: one replica samples, and another takes over
        within the lease once it stops); without `leases`, always."""
        try:
            while True:
                try:
                    await self.sample_if_leading(js, db, consumers, leases=leases,
                                                 owner=owner)
                except Exception as exc:  # an outage: the next round tries again
                    log.debug("metrics sample failed: %s", exc)
                await asyncio.sleep(every)
        finally:  # stopping: another replica takes the gauges at its next round
            if leases is not None:
                with contextlib.suppress(Exception):
                    await leases.release(GAUGES_ROLE, owner)

    async def sample_if_leading(self, js: JetStreamContext, db: AsyncDatabase[Document],
                                consumers: Sequence[tuple[str, str]], *,
                                leases: Leases | None, owner: str) -> bool:
        """One round: sample if this replica holds (or takes) the gauges' lease, else
        show none; whether it sampled."""
        if leases is None or await leases.acquire(GAUGES_ROLE, owner):
            await self.sample(js, db, consumers)
            self.sampler.set(1)
            return True
        self.clear()
        return False


def _replace(gauge: Gauge, values: dict[str, int]) -> None:
    """Set a labelled gauge to exactly these values (a label gone since reads 0)."""
    for labels in list(gauge._metrics):
        gauge.labels(*labels).set(0)
    for label, value in values.items():
        gauge.labels(label).set(value)
