"""NATS subjects and JetStream streams of the recording path: the public wire contract."""

from __future__ import annotations

from contracts.shared.subject_tokens import plan_of, plan_token, plan_token_or_unknown

DECISIONS_STREAM = "DECISIONS"

RECORDED_PREFIX = "decisions.recorded"
PERSISTED_PREFIX = "decisions.persisted"
BEGAN_PREFIX = "decisions.began"
REJECTED_PREFIX = "decisions.rejected"

COMMENT_PREFIX = "decisions.comment"
END_PLAN_PREFIX = "decisions.end_plan"
DISCARD_PREFIX = "decisions.discard"

RECORDER_DURABLE = "recorder"
COMMENTER_DURABLE = "commenter"
PLAN_ENDER_DURABLE = "plan-ender"
DISCARDER_DURABLE = "dead-letter-discarder"
RECONCILER_DURABLE = "plan-reconciler"
"""The invariants' reconciler, on this stream: reads decisions.began.* (new roots)."""
RETIRED_RECONCILER_DURABLE = "reconciler"
"""The reconciler's durable until 2026-12-05, which read every decisions.persisted.* for
the roots among them; the workers delete it when they start (contracts.families.RETIRED).
A new name rather than the old durable given a new filter: a worker of the version before,
still running during a rolling upgrade, would put its filter back (workers.consumer_watch),
and the two versions would take turns re-creating it."""


def recorded(plan_id: str) -> str:
    """Where an agent publishes a decision (header Nats-Msg-Id: <decision_id>)."""
    return f"{RECORDED_PREFIX}.{plan_token(plan_id)}"


def persisted(plan_id: str) -> str:
    return f"{PERSISTED_PREFIX}.{plan_token(plan_id)}"


def began(plan_id: str) -> str:
    """Where the recorder announces a plan's recorded root (beside its persisted event)."""
    return f"{BEGAN_PREFIX}.{plan_token(plan_id)}"


def rejected(plan_id: str | None) -> str:
    return f"{REJECTED_PREFIX}.{plan_token_or_unknown(plan_id)}"


def plan_of_subject(subject: str, prefix: str = RECORDED_PREFIX) -> str | None:
    """The <plan_id> token of `<prefix>.<plan_id>`, or None if the subject has another shape."""
    return plan_of(subject, prefix)


def persisted_msg_id(decision_id: str) -> str:
    """Nats-Msg-Id of the persisted event: one event per decision, whoever publishes it."""
    return f"persisted:{decision_id}"


def began_msg_id(decision_id: str) -> str:
    """Nats-Msg-Id of a plan's began event: one per root decision."""
    return f"began:{decision_id}"


def rejected_msg_id(stream_sequence: int) -> str:
    """Nats-Msg-Id of a rejection: one per rejected stream message."""
    return f"rejected:{stream_sequence}"
