"""One consumer's bounded retries: how many deliveries, and the wait before each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Retry:
    """One consumer's bounded retries: MaxDeliver, and the delay before each retry."""

    max_deliver: int
    backoff: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.max_deliver < 1 or not self.backoff:
            raise ValueError("a consumer needs max_deliver >= 1 and at least one backoff delay")

    def delay(self, delivered: int) -> float:
        """The nak delay after a failed delivery number `delivered` (1-based)."""
        return self.backoff[min(max(delivered, 1), len(self.backoff)) - 1]

    def consumer_backoff(self, ack_wait: float) -> list[float]:
        """The consumer's BackOff (redelivery after an ack timeout: a worker died or hung).
        JetStream takes its first value as the ack wait, so none is shorter than ack_wait,
        and it must be shorter than MaxDeliver."""
        return [max(ack_wait, b) for b in self.backoff][:max(1, self.max_deliver - 1)]
