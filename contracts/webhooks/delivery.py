"""A delivery's lifecycle: one transition table, and what an attempt's outcome makes of it.

PENDING -> DELIVERED (an attempt answered 2xx) or PENDING (a failure, retried after the
backoff) or DEAD_LETTERED (a failure after the last attempt, or after the delivery's
time ran out, or one no retry can fix). DELIVERED and DEAD_LETTERED are final.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from contracts.webhooks.model import Attempt, Delivery, DeliveryStatus
from contracts.webhooks.policy import WebhookLimits, next_delay

S = DeliveryStatus
TRANSITIONS: dict[DeliveryStatus, frozenset[DeliveryStatus]] = {
    S.PENDING: frozenset({S.PENDING, S.DELIVERED, S.DEAD_LETTERED}),
    S.DELIVERED: frozenset(),
    S.DEAD_LETTERED: frozenset(),
}


class DeliveryOver(Exception):
    """An attempt on a delivery that is already delivered or dead-lettered."""

    def __init__(self, delivery_id: str, status: DeliveryStatus) -> None:
        super().__init__(f"delivery {delivery_id} is {status.value}: no more attempts")
        self.status = status


def succeeded(status_code: int | None) -> bool:
    return status_code is not None and 200 <= status_code < 300


def after_attempt(d: Delivery, attempt: Attempt, limits: WebhookLimits, *,
                  retryable: bool = True) -> Delivery:
    """The delivery once `attempt` is recorded: delivered, retried later, or dead."""
    if not TRANSITIONS[d.status]:
        raise DeliveryOver(d.delivery_id, d.status)
    attempts = [*d.attempts, attempt]
    if succeeded(attempt.status_code):
        return d.model_copy(update={"status": S.DELIVERED, "attempts": attempts,
                                    "ended_at": attempt.at})
    delay = next_delay(len(attempts), limits) if retryable else None
    deadline = d.created_at + timedelta(seconds=limits.max_age_seconds)
    if delay is None or attempt.at + timedelta(seconds=delay) > deadline:
        return d.model_copy(update={"status": S.DEAD_LETTERED, "attempts": attempts,
                                    "ended_at": attempt.at})
    return d.model_copy(update={"attempts": attempts,
                                "next_at": attempt.at + timedelta(seconds=delay)})


def redelivered(d: Delivery, now: datetime) -> Delivery:
    """A dead-lettered delivery given a new round of attempts by an operator."""
    return d.model_copy(update={"status": S.PENDING, "next_at": now, "created_at": now,
                                "ended_at": None})
