"""The workers' durable consumers: their configuration, from the declaration of the
family each one reads (contracts.families), and bringing an existing durable to it.

nats-py never updates an existing durable, so on start the durable is created, or
updated to the configuration in code; fields the server cannot change are named in a
warning and left as they are (recreating the durable would lose its position). A
durable the workers re-created from where it stopped (workers.consumer_watch) starts by
sequence: that is its declared start policy carried on, not a difference.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from bootstrap.settings import Settings
from contracts.families import RETIRED
from contracts.shared.families import MessageFamily, Stream
from contracts.shared.partitions import Partition
from contracts.shared.roles import ConsumerSpec, Deliver, Reader, Setting

log = logging.getLogger(__name__)

MUTABLE = ("description", "ack_wait", "max_deliver", "backoff", "max_ack_pending",
           "filter_subject", "filter_subjects", "max_waiting", "headers_only",
           "inactive_threshold", "num_replicas", "sample_freq", "metadata")
"""Consumer fields an update may change (nats-server 2.10+); the others are immutable."""
COMPARED = (*MUTABLE, "deliver_policy", "ack_policy", "replay_policy")
WATCHED = tuple(f for f in COMPARED if f != "deliver_policy")
"""What the running workers keep as declared (workers.consumer_watch): where a durable
starts matters once, when it is created."""
DELIVER = {Deliver.ALL: DeliverPolicy.ALL, Deliver.NEW: DeliverPolicy.NEW}


def setting(settings: Settings, value: Setting) -> float:
    """A declared consumer value: the named setting's, or the number itself."""
    return float(getattr(settings, value)) if isinstance(value, str) else float(value)


def spec_of(reader: Reader) -> ConsumerSpec:
    if reader.consumer is None or reader.durable is None:
        raise ValueError(f"{reader.used_by} is not one of the workers' durables")
    return reader.consumer


def batch_size(reader: Reader, settings: Settings) -> int:
    return int(setting(settings, spec_of(reader).batch_size))


def partition_count(family: MessageFamily, settings: Settings) -> int:
    """How many partitions the family is read in (1 unless it is partitioned)."""
    return int(setting(settings, family.partitioned)) if family.partitioned else 1


def consumer_config(family: MessageFamily, reader: Reader, settings: Settings,
                    partition: Partition | None = None) -> ConsumerConfig:
    """The shape every worker durable shares: explicit acks, the family's subjects (or
    one partition's durable and subjects).

    MaxDeliver and BackOff are left out on purpose: the `BatchPuller` sets them from its
    `Retry`, so they come from one place (the settings)."""
    spec = spec_of(reader)
    durable, subjects = ((partition.durable, partition.filter_subject) if partition
                         else (reader.durable, family.wildcard))
    return ConsumerConfig(
        durable_name=durable, filter_subject=subjects,
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DELIVER[spec.deliver],
        ack_wait=setting(settings, spec.ack_wait),
        max_ack_pending=max(spec.max_ack_pending,
                            batch_size(reader, settings) * spec.pending_batches))


def config_changes(have: ConsumerConfig, want: ConsumerConfig,
                   fields: tuple[str, ...] = COMPARED) -> dict[str, tuple[Any, Any]]:
    """The fields `want` sets that the existing consumer has otherwise."""
    out: dict[str, tuple[Any, Any]] = {}
    if have.deliver_policy is DeliverPolicy.BY_START_SEQUENCE:
        fields = tuple(f for f in fields if f != "deliver_policy")  # re-created by the workers
    for name in fields:
        wanted, had = getattr(want, name, None), getattr(have, name, None)
        if wanted is None:
            continue
        if isinstance(wanted, float) or isinstance(had, float):
            if had is None or abs(float(had) - float(wanted)) > 1e-3:
                out[name] = (had, wanted)
        elif isinstance(wanted, list):
            if [float(x) for x in wanted] != [float(x) for x in (had or [])]:
                out[name] = (had, wanted)
        elif wanted != had:
            out[name] = (had, wanted)
    return out


async def ensure_consumer(js: JetStreamContext, stream: str, want: ConsumerConfig
                          ) -> ConsumerConfig:
    """Create the durable, or update it to `want`; an immutable difference is logged.
    Returns the configuration it has now (what the running workers keep)."""
    durable = want.durable_name or ""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        await js.add_consumer(stream, want)
        return want
    if info.config.deliver_policy is DeliverPolicy.BY_START_SEQUENCE:
        want = dataclasses.replace(want, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                   opt_start_seq=info.config.opt_start_seq)
    changes = config_changes(info.config, want)
    if not changes:
        return want
    fixed = {k: v for k, v in changes.items() if k not in MUTABLE}
    if fixed:
        log.warning("consumer %s on %s differs in fields the server cannot update: %s; "
                    "keeping them (delete the consumer to apply them, losing its position)",
                    durable, stream, ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in
                                               fixed.items()))
        want = dataclasses.replace(want, **{k: getattr(info.config, k) for k in fixed})
    if any(k in MUTABLE for k in changes):
        await js.add_consumer(stream, want)  # the same durable: an update
        log.info("consumer %s on %s updated: %s", durable, stream,
                 ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items()
                           if k in MUTABLE))
    return want


async def retire_durables(js: JetStreamContext,
                          retired: tuple[tuple[Stream, str], ...] = RETIRED) -> None:
    """Delete the durables of earlier versions that nothing reads any more
    (contracts.families.RETIRED). One already gone (another replica starting at the same
    time deleted it) is fine. A worker of the version before, still running during a
    rolling upgrade, may create its own again (and keep reading through it until it
    stops): the next start deletes it then."""
    for stream, durable in retired:
        try:
            await js.delete_consumer(stream.name, durable)
        except NotFoundError:
            continue
        log.info("consumer %s on %s retired: no reader of this version uses it",
                 durable, stream.name)
