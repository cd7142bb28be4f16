"""The pullers the workers run, built from the declared message families.

Each durable the workers read (a `Reader` with a consumer spec in contracts.families)
gets a `BatchPuller` with the handler registered for its family, configured from the
declaration and the settings it names. A durable pulled by one replica at a time
(`one_replica`) is pulled under a lease, in as many partitions as its `partitions`
setting says, spread over the live replicas (workers.leading). Nothing is listed by
hand: a family declared with a worker durable and a handler registered in its
capability's module is pulled.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from contracts.families import worker_consumers
from contracts.shared.families import MessageFamily
from contracts.shared.partitions import Partition, every_partition, partitions
from contracts.shared.roles import Reader
from store.lease_view import LeaseViews
from store.leases import Leases
from workers import corrections, invariants, recorder
from workers.deps import Deps, HandlerClass
from workers.durables import batch_size, consumer_config, partition_count, setting, spec_of
from workers.lane import Lane
from workers.leading import LeadingPullers
from workers.pull import BatchPuller

HANDLERS: dict[str, HandlerClass[Any]] = {**recorder.HANDLERS, **corrections.HANDLERS,
                                          **invariants.HANDLERS}
"""Family name -> the handler class of the workers' durable on it."""

Puller = BatchPuller[Any] | LeadingPullers


def puller(js: JetStreamContext, family: MessageFamily, reader: Reader,
           deps: Deps, partition: Partition | None = None, *,
           lane: Lane | None = None) -> BatchPuller[Any]:
    """The pull loop of one declared durable (or one partition of it), with a handler of
    its own; the partitions of one durable share a `lane` (workers.lane)."""
    spec, settings = spec_of(reader), deps.settings
    if family.stream is None:
        raise ValueError(f"{family.name} is captured by no stream: nothing to pull")
    handler = HANDLERS[family.name](deps)
    config = consumer_config(family, reader, settings, partition)
    return BatchPuller(
        js, stream=family.stream.name, subject=config.filter_subject or family.wildcard,
        config=config, batch_size=batch_size(reader, settings),
        max_wait=setting(settings, spec.max_wait),
        consumer=handler, retry=settings.retry(handler.extra_deliveries()),
        failures=deps.failures, backoff_after_ack_wait=spec.backoff_after_ack_wait,
        lane=lane)


def reader_partitions(family: MessageFamily, reader: Reader, deps: Deps
                      ) -> tuple[Partition, ...]:
    assert reader.durable is not None
    return partitions(family.name, reader.durable,
                      partition_count(family, deps.settings))


def left_to_drain(js: JetStreamContext, family: MessageFamily, reader: Reader,
                  current: tuple[Partition, ...]) -> Any:
    """The durables of this reader's partitions not in use now that still hold
    messages: what an earlier partition count stored (contracts.shared.partitions)."""
    assert family.stream is not None and reader.durable is not None
    stream, durable, names = family.stream.name, reader.durable, {p.durable for p in current}

    async def probe() -> list[Partition]:
        found = []
        for p in every_partition(family.name, durable):
            if p.durable in names:
                continue
            try:
                info = await js.consumer_info(stream, p.durable)
            except NotFoundError:
                continue
            if info.num_pending or info.num_ack_pending:
                found.append(p)
        return found

    return probe


def pullers(js: JetStreamContext, deps: Deps, *, locks: Leases, views: LeaseViews,
            owner: str) -> list[Puller]:
    """Every declared durable's puller, in declaration order, and those pulled by one
    replica at a time (the recorder's partitions) last, under their leases: tests and
    `agents up` take the recorder's waiting pull as "ready", and the reconciler's
    durable must exist before any root is persisted."""
    shared: list[Puller] = []
    leading: list[Puller] = []
    for family, reader in worker_consumers():
        if not spec_of(reader).one_replica:
            shared.append(puller(js, family, reader, deps))
            continue
        assert family.stream is not None
        current = reader_partitions(family, reader, deps)
        leading.append(LeadingPullers(
            partial(puller, js, family, reader, deps, lane=Lane()), current, locks,
            views.read,
            owner=owner, stream=family.stream.name,
            graceful_timeout=deps.settings.graceful_timeout,
            probe=left_to_drain(js, family, reader, current)))
    return [*shared, *leading]
