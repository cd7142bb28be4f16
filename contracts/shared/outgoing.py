"""An event on its way out: what the outbox stores and the publisher sends.

One type for both, because they are the same three facts: the relay reads a stored
message and publishes it unchanged, and the Nats-Msg-Id fixed when the event was
decided is what makes a republished copy a duplicate JetStream drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class OutgoingEvent:
    """Subject, body, and the Nats-Msg-Id JetStream deduplicates on."""

    subject: str
    payload: bytes
    msg_id: str
    headers: tuple[tuple[str, str], ...] = ()
    """Headers besides the Nats-Msg-Id: the trace context of what the event is about."""
    time: datetime | None = field(default=None, compare=False)
    """When the event was decided (the outbox's row time, for a republished one): its
    CloudEvents `ce-time`. None: when it is published. Not part of the event's identity
(a stored and a republished copy are equal)."""
    known: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Fields of the body its producer has at hand, for the CloudEvents subject
    (contracts.shared.cloudevents.about), so the publisher does not read the body again
    for them. Not stored: a republished copy reads its body."""


@dataclass(frozen=True, slots=True)
class Pending:
    """An event committed to the outbox and not yet published: `source_id` is the key it is
    flushed under (the correction or the violation whose change it announces), `order`
    its place among them."""

    source_id: str
    order: int
    message: OutgoingEvent


@dataclass(frozen=True, slots=True)
class StreamAck:
    """JetStream's answer to one publish: where it stored the message, or that it had
    already stored one with the same Nats-Msg-Id within the stream's duplicate window
    (then `sequence` is that earlier message's and nothing new was stored)."""

    stream: str
    sequence: int
    duplicate: bool
