"""What the services need from the outside world, as protocols.

The services never import NATS: workers hand them an `EventPublisher` backed by
JetStream, and tests can hand them the same thing against a real server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contracts.outgoing import OutgoingEvent

__all__ = ["CorrectionObserver", "EventPublisher", "OutgoingEvent"]


class EventPublisher(Protocol):
    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        """Publish every event with its Nats-Msg-Id and return once each is stored
        (acknowledged by JetStream); raise if any was not."""
        ...


class CorrectionObserver(Protocol):
    """Told once per correction that ends (the worker counts it in its metrics)."""

    def correction_ended(self, mode: str, outcome: str, seconds: float) -> None:
        """`outcome` is applied, failed or cancelled; `seconds` from request to end."""
        ...
