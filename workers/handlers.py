"""The pullers the workers run, built from the declared message families.

Each durable the workers read (a `Reader` with a consumer spec in contracts.families)
gets a `BatchPuller` with the handler registered for its family, configured from the
declaration and the settings it names. Nothing is listed by hand: a family declared
with a worker durable and a handler registered in its capability's module is pulled.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from nats.js import JetStreamContext

from contracts.families import worker_consumers
from contracts.shared.families import MessageFamily
from contracts.shared.roles import Reader
from store.leases import Leases
from workers import corrections, invariants, recorder
from workers.deps import Deps, HandlerClass
from workers.durables import batch_size, consumer_config, setting, spec_of
from workers.leading import LeadingPuller
from workers.pull import BatchPuller

HANDLERS: dict[str, HandlerClass[Any]] = {**recorder.HANDLERS, **corrections.HANDLERS,
                                          **invariants.HANDLERS}
"""Family name -> the handler class of the workers' durable on it."""

Puller = BatchPuller[Any] | LeadingPuller


def puller(js: JetStreamContext, family: MessageFamily, reader: Reader,
           deps: Deps) -> BatchPuller[Any]:
    """The pull loop of one declared durable, with a handler of its own."""
    spec, settings = spec_of(reader), deps.settings
    if family.stream is None:
        raise ValueError(f"{family.name} is captured by no stream: nothing to pull")
    handler = HANDLERS[family.name](deps)
    return BatchPuller(
        js, stream=family.stream.name, subject=family.wildcard,
        config=consumer_config(family, reader, settings),
        batch_size=batch_size(reader, settings), max_wait=setting(settings, spec.max_wait),
        consumer=handler, retry=settings.retry(handler.extra_deliveries()),
        failures=deps.failures, backoff_after_ack_wait=spec.backoff_after_ack_wait)


def pullers(js: JetStreamContext, deps: Deps, *, locks: Leases,
            owner: str) -> list[Puller]:
    """Every declared durable's puller, in declaration order, and those pulled by one
    replica at a time (the recorder) last, under their lease: tests and `agents up`
    take the recorder's waiting pull as "ready", and the reconciler's durable must exist
    before any root is persisted."""
    shared: list[Puller] = []
    leading: list[Puller] = []
    for family, reader in worker_consumers():
        if not spec_of(reader).one_replica:
            shared.append(puller(js, family, reader, deps))
            continue
        assert family.stream is not None and reader.durable is not None
        leading.append(LeadingPuller(
            partial(puller, js, family, reader, deps), locks,
            role=f"role:{reader.durable}", owner=owner, stream=family.stream.name,
            durable=reader.durable, graceful_timeout=deps.settings.graceful_timeout))
    return [*shared, *leading]
