"""NATS subjects and message IDs of invariants: the public wire contract.

Message IDs are derived from what a message announces (the violation and what happened
to it), so whoever publishes or republishes it, JetStream keeps one copy.
"""

from __future__ import annotations

from contracts.ids import is_ulid

INVARIANTS_STREAM = "INVARIANTS"
INVARIANTS_SUBJECTS = "invariants.>"
INVARIANTS_DUPLICATE_WINDOW_SECONDS = 600.0
"""Ten minutes, as for corrections: longer than the outbox relay leaves an event behind."""

VIOLATIONS_PREFIX = "invariants.violations"
EVENTS_PREFIX = "invariants.events"
REJECTED_PREFIX = "invariants.rejected"
UNKNOWN_PLAN = "unknown"

VIOLATIONS_DURABLE = "invariant-violations"
RECONCILER_DURABLE = "reconciler"
"""On the DECISIONS stream: reads decisions.persisted.* for new roots."""

ALL_VIOLATIONS = f"{VIOLATIONS_PREFIX}.*"
ALL_EVENTS = f"{EVENTS_PREFIX}.>"

VIOLATED = "violated"
RESOLVED = "resolved"


def _token(plan_id: str) -> str:
    # One subject token: a '.', '*' or '>' in it would address other plans.
    if not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID, so not a safe subject token")
    return plan_id.upper()


def violations(plan_id: str) -> str:
    """Where an agent reports an InvariantViolation (Nats-Msg-Id: <violation_id>)."""
    return f"{VIOLATIONS_PREFIX}.{_token(plan_id)}"


def event(plan_id: str, what: str) -> str:
    """invariants.events.<plan_id>.violated | .resolved"""
    return f"{EVENTS_PREFIX}.{_token(plan_id)}.{what}"


def event_msg_id(violation_id: str, what: str) -> str:
    return f"violation:{violation_id}:{what}"


def rejected(plan_id: str | None) -> str:
    return f"{REJECTED_PREFIX}.{plan_id or UNKNOWN_PLAN}"


def rejected_msg_id(stream_sequence: int) -> str:
    return f"rejected:{stream_sequence}"


def plan_of(subject: str, prefix: str = VIOLATIONS_PREFIX) -> str | None:
    head, _, tail = subject.rpartition(".")
    return tail if head == prefix and tail else None
