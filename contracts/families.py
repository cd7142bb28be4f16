"""Every message family of the ledger, and every stream, in one list.

The one place to look up what travels over NATS: each capability declares its own
(`contracts/<capability>/families.py`); this registry is what the workers, the AsyncAPI
document and the permissions file are derived from (contracts.shared.families).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from contracts.corrections.families import CORRECTIONS
from contracts.corrections.families import FAMILIES as CORRECTION_FAMILIES
from contracts.decisions import subjects as decision_subjects
from contracts.invariants.families import FAMILIES as INVARIANT_FAMILIES
from contracts.invariants.families import INVARIANTS
from contracts.recording.families import DECISIONS
from contracts.recording.families import FAMILIES as RECORDING_FAMILIES
from contracts.shared import cloudevents
from contracts.shared.families import (
    Direction,
    MessageFamily,
    Stream,
    partitioned_in,
    stream_subjects,
)
from contracts.shared.roles import Grant, Reader, Role, Via
from contracts.webhooks.families import DISPATCHER, WEBHOOKS
from contracts.webhooks.families import FAMILIES as WEBHOOK_FAMILIES

WEBHOOK_DISPATCH = Reader(Role.WORKER, Via.DURABLE, "the webhooks' dispatcher "
                         "(workers.webhooks): one durable per stream over its events",
                         durable=DISPATCHER)


def _dispatched(f: MessageFamily) -> MessageFamily:
    """Every event family of the other streams is read by the webhooks' dispatcher (the
    webhooks' own are not: a delivery would announce a delivery without end)."""
    if f.direction is not Direction.EVENT or f.stream in (None, WEBHOOKS):
        return f
    return replace(f, readers=(*f.readers, WEBHOOK_DISPATCH))


FAMILIES: tuple[MessageFamily, ...] = tuple(_dispatched(f) for f in (
    *RECORDING_FAMILIES, *CORRECTION_FAMILIES, *INVARIANT_FAMILIES, *WEBHOOK_FAMILIES))
STREAMS: tuple[Stream, ...] = (DECISIONS, CORRECTIONS, INVARIANTS, WEBHOOKS)

RETIRED: tuple[tuple[Stream, str], ...] = (
    (DECISIONS, decision_subjects.RETIRED_RECONCILER_DURABLE),
)
"""Durables of earlier versions that no reader uses any more: the workers delete them
when they start (workers.durables.retire_durables), so none is left behind growing its
backlog."""

GRANTS: dict[Role, tuple[Grant, ...]] = {
    Role.WORKER: (Grant.MANAGE_STREAMS,),
    Role.AGENT: (),
    Role.OPERATOR: (Grant.INSPECT_STREAMS,),
    Role.SUBSCRIBER: (),
}
"""What each role may do beyond the families it publishes and reads."""


def captured(stream: Stream) -> list[str]:
    """The subjects `stream` captures."""
    return stream_subjects(stream, FAMILIES)


def partitioned(stream: Stream) -> MessageFamily | None:
    """The family `stream` stores by partition (contracts.shared.partitions), if any."""
    return partitioned_in(stream, FAMILIES)


def dispatched(stream: Stream) -> list[MessageFamily]:
    """The event families of `stream` the webhooks' dispatcher reads."""
    return [f for f in FAMILIES if f.stream == stream and WEBHOOK_DISPATCH in f.readers]


def worker_consumers() -> list[tuple[MessageFamily, Reader]]:
    """Every durable the workers pull, with its family, in declaration order."""
    return [(f, r) for f in FAMILIES for r in f.worker_consumers()]


def family(name: str) -> MessageFamily:
    """The family named `name` (`decisions.recorded`); KeyError if there is none."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(name)


_BY_NAME: dict[str, MessageFamily] = {f.name: f for f in FAMILIES}


def family_of(subject: str) -> MessageFamily | None:
    """The family a concrete subject belongs to (its literal prefix and its number of
    tokens), or None."""
    parts = subject.split(".")
    for n in range(1, len(parts)):
        f = _BY_NAME.get(".".join(parts[:n]))
        if f is not None and len(parts) - n == len(f.tokens):
            return f
    return None


def event_headers(subject: str, msg_id: str, payload: bytes, at: datetime,
                  schema_base: str = cloudevents.DEFAULT_SCHEMA_BASE, *,
                  known: Mapping[str, str] | None = None) -> dict[str, str]:
    """The CloudEvents headers of an event published on `subject` ({} for a subject of
    no event family: a decision the reconciler records, a dead letter's retry). The one
    place every published event gets them (bootstrap.publisher calls it), so a new event
    family has them without a line of its own. `known`: body fields its producer has at
    hand (cloudevents.about)."""
    f = family_of(subject)
    if f is None or f.direction is not Direction.EVENT:
        return {}
    return cloudevents.headers(f, subject, msg_id, payload, at, schema_base=schema_base,
                               known=known)
