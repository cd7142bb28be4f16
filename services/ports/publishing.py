"""Publishing to the streams: events with their Nats-Msg-Id, a message republished as it
was first sent, and the observer told of each correction's end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from contracts.shared.outgoing import OutgoingEvent, StreamAck


class EventPublisher(Protocol):
    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        """Publish every event with its Nats-Msg-Id and return once each is stored
        (acknowledged by JetStream); raise if any was not."""
        ...


class NotStored(Exception):
    """No stream stored the message: none takes its subject, the stream refused it, or
    no answer came in time (then it may have been stored all the same; its Nats-Msg-Id
    makes sending it again safe)."""


class MessagePublisher(Protocol):
    """One message published exactly as given, and the stream's answer returned: for
    republishing a message as it was first sent (a dead letter's retry), where the
    caller must know whether JetStream stored it or dropped it as a duplicate."""

    async def publish_message(self, subject: str, payload: bytes,
                              headers: Mapping[str, str]) -> StreamAck:
        """Headers unchanged (a Nats-Msg-Id among them is JetStream's to deduplicate
        on); NotStored when no stream stored it."""
        ...


class CorrectionObserver(Protocol):
    """Told once per correction that ends (the worker counts it in its metrics)."""

    def correction_ended(self, mode: str, outcome: str, seconds: float) -> None:
        """`outcome` is applied, failed or cancelled; `seconds` from request to end."""
        ...
