"""NATS subjects and message IDs of invariants: the public wire contract.

Message IDs are derived from what a message announces (the violation and what happened
to it), so whoever publishes or republishes it, JetStream keeps one copy.
"""

from __future__ import annotations

from contracts.shared.subject_tokens import plan_of as _plan_of
from contracts.shared.subject_tokens import plan_token, plan_token_or_unknown

INVARIANTS_STREAM = "INVARIANTS"

VIOLATIONS_PREFIX = "invariants.violations"
EVENTS_PREFIX = "invariants.events"
REJECTED_PREFIX = "invariants.rejected"
TEMPLATES_PREFIX = "invariants.templates"
VERDICTS_PREFIX = "invariants.verdicts"
APPROVAL_PREFIX = "decisions.approval"
"""On the DECISIONS stream, beside the decisions they gate: an agent already reads that
stream (its persisted events) and may read no other."""
HOLD_PREFIX = "decisions.hold"
"""A hold the judge settled without a person (released or refused), on the DECISIONS
stream for the same reason."""

VIOLATIONS_DURABLE = "invariant-violations"
TEMPLATES_DURABLE = "plan-templates"
VERDICTS_DURABLE = "approval-verdicts"

ALL_EVENTS = f"{EVENTS_PREFIX}.>"

VIOLATED = "violated"
RESOLVED = "resolved"


def violations(plan_id: str) -> str:
    """Where an agent reports an InvariantViolation (Nats-Msg-Id: <violation_id>)."""
    return f"{VIOLATIONS_PREFIX}.{plan_token(plan_id)}"


def templates(plan_id: str) -> str:
    """Where `agents plan use` sends a PlanUseRequest (Nats-Msg-Id: <request_id>)."""
    return f"{TEMPLATES_PREFIX}.{plan_token(plan_id)}"


def verdicts(plan_id: str) -> str:
    """Where an operator sends an ApprovalVerdict (Nats-Msg-Id: <request_id>)."""
    return f"{VERDICTS_PREFIX}.{plan_token(plan_id)}"


def approval_event(plan_id: str, status: str) -> str:
    """decisions.approval.<plan_id>.requested | granted | denied | expired"""
    return f"{APPROVAL_PREFIX}.{plan_token(plan_id)}.{status}"


def approval_msg_id(decision_id: str, status: str) -> str:
    return f"approval:{decision_id}:{status}"


def hold_event(plan_id: str, status: str) -> str:
    """decisions.hold.<plan_id>.released | refused"""
    return f"{HOLD_PREFIX}.{plan_token(plan_id)}.{status}"


def hold_msg_id(decision_id: str, status: str) -> str:
    return f"hold:{decision_id}:{status}"


def gate_events(plan_id: str) -> str:
    """Every approval and hold event of a plan (decisions.approval.<plan>.* and
    decisions.hold.<plan>.*): what an agent's gate waits on, in one read of the stream."""
    return f"decisions.*.{plan_token(plan_id)}.*"


def event(plan_id: str, what: str) -> str:
    """invariants.events.<plan_id>.violated | .resolved"""
    return f"{EVENTS_PREFIX}.{plan_token(plan_id)}.{what}"


def event_msg_id(violation_id: str, what: str) -> str:
    return f"violation:{violation_id}:{what}"


def rejected(plan_id: str | None) -> str:
    return f"{REJECTED_PREFIX}.{plan_token_or_unknown(plan_id)}"


def rejected_msg_id(stream_sequence: int) -> str:
    return f"rejected:{stream_sequence}"


def plan_of(subject: str, prefix: str = VIOLATIONS_PREFIX) -> str | None:
    """The <plan_id> token of an invariants subject, or None if it has another shape."""
    return _plan_of(subject, prefix)
