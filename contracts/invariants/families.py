"""Invariants' message families and their stream (contracts.shared.families)."""

from __future__ import annotations

from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalEvent, ApprovalVerdict
from contracts.invariants.hold_wire import HoldEvent
from contracts.invariants.plan_use import PlanUseRequest
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import ViolationEvent, ViolationRejected
from contracts.recording.families import DECISIONS
from contracts.shared.families import Direction, MessageFamily, Stream
from contracts.shared.roles import ConsumerSpec, Publisher, Reader, Role, Via

INVARIANTS = Stream(
    subjects.INVARIANTS_STREAM, "invariants",
    # Ten minutes, as for corrections: longer than the outbox relay leaves an event behind.
    duplicate_window=600.0,
    description="Invariant violations reported by agents, their violated/resolved events "
    "and the rejected reports.")

VIOLATIONS = MessageFamily(
    f"{subjects.VIOLATIONS_PREFIX}.{{plan_id}}", InvariantViolation, Direction.INBOUND,
    INVARIANTS, msg_id="<violation_id> (a retry is the same report)",
    description="Agents report an InvariantViolation. Leave out resolved_at and "
    "resolved_by. The report is stored once and announced on "
    "invariants.events.<plan_id>.violated; an unresolved 'error' blocks the plan's "
    "Execute-phase decisions (rule reconciliation_blocked) until an operator resolves it. "
    "Unreadable reports, reports naming an unknown invariant and reused violation_ids are "
    "dead-lettered and reported on invariants.rejected.<plan_id>.",
    publishers=(
        Publisher(Role.AGENT, "DecisionRecorder.report_violation (clients.recorder)"),
        Publisher(Role.OPERATOR, "agents dead-letters retry: a dead letter republished to "
                  "the subject it was first sent to", signs=False),
    ),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the violations consumer (workers.invariants)",
                    durable=subjects.VIOLATIONS_DURABLE,
                    consumer=ConsumerSpec(ack_wait="invariants_ack_wait_seconds",
                                          batch_size="invariants_batch_size",
                                          max_ack_pending=20_000)),),
)

EVENTS = MessageFamily(
    f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{{what}}", ViolationEvent, Direction.EVENT,
    INVARIANTS, msg_id="violation:<violation_id>:<what>", event_type="invariant.{what}",
    about="plan/{plan_id}/violation/{violation.violation_id}",
    description="INVARIANT_VIOLATED on .violated when a report is stored, "
    "INVARIANT_VIOLATION_RESOLVED on .resolved when an operator resolves it; exactly once "
    "each.",
    publishers=(
        Publisher(Role.WORKER, "the violations consumer; the outbox relay"),
        Publisher(Role.OPERATOR, "agents invariant resolve announces the resolution it "
                  "wrote (the workers' relay republishes it if this publish fails)",
                  subject=f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{subjects.RESOLVED}"),
    ),
    readers=(
        Reader(Role.OPERATOR, Via.CORE, "the console's live view (console.live)"),
        Reader(Role.SUBSCRIBER, Via.DURABLE, "a durable feed the subscriber declares",
               durable="{consumer}"),
    ),
)

REJECTED = MessageFamily(
    f"{subjects.REJECTED_PREFIX}.{{plan_id}}", ViolationRejected, Direction.EVENT,
    INVARIANTS, msg_id="rejected:<stream seq>", event_type="invariant.rejected",
    description="A violation report that will never be stored, kept in dead_letters; "
    "plan_id 'unknown' when unreadable.",
    publishers=(Publisher(Role.WORKER, "the violations consumer"),),
    readers=(),
)

TEMPLATES = MessageFamily(
    f"{subjects.TEMPLATES_PREFIX}.{{plan_id}}", PlanUseRequest, Direction.INBOUND, INVARIANTS,
    msg_id="<request_id> (a retry is the same request)",
    description="Apply an action template to a plan (agents plan use): the template's "
    "ACTION invariants are promoted into the plan's scope, an invariant_enforced decision "
    "each, and the recorder's gate evaluates them from its next batch. From an operator "
    "within the plan's project, or the plan's owner or a delegate. The outcome (applied, "
    "or refused with its rule: plan_started, template_conflict, plan_owner, "
    "operator_scope) is kept under the request_id; unreadable requests are dead-lettered.",
    publishers=(
        Publisher(Role.OPERATOR, "agents plan use"),
        Publisher(Role.AGENT, "the plan's owner or a delegate, with any NATS client"),
    ),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the template consumer (workers.invariants)",
                    durable=subjects.TEMPLATES_DURABLE,
                    consumer=ConsumerSpec(ack_wait="invariants_ack_wait_seconds",
                                          batch_size="invariants_batch_size",
                                          max_ack_pending=1_000)),),
)

VERDICTS = MessageFamily(
    f"{subjects.VERDICTS_PREFIX}.{{plan_id}}", ApprovalVerdict, Direction.INBOUND, INVARIANTS,
    msg_id="<request_id> (a retry is the same verdict)",
    description="An operator grants or denies the approval a held decision awaits (agents "
    "approval approve|deny, the console). Signed by an operator whose projects cover the "
    "plan; it names the content digest the approver looked at. The outcome (applied, or "
    "refused with its rule: approval_exists, approval_closed, approval_expired, "
    "approval_digest, approver_refused, operator_scope) is kept under the request_id; "
    "unreadable verdicts are dead-lettered and reported on invariants.rejected.<plan_id>.",
    publishers=(Publisher(Role.OPERATOR, "agents approval approve|deny; the console"),),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the verdict consumer (workers.approvals)",
                    durable=subjects.VERDICTS_DURABLE,
                    consumer=ConsumerSpec(ack_wait="invariants_ack_wait_seconds",
                                          batch_size="invariants_batch_size",
                                          max_ack_pending=1_000)),),
)

GATE_EVENT_READERS = (
    Reader(Role.AGENT, Via.REPLAY, "DecisionRecorder.gate (clients.approvals)"),
    Reader(Role.OPERATOR, Via.CORE, "the console's live view (console.live): the approvals "
           "page and the tree's held marks"),
    Reader(Role.SUBSCRIBER, Via.DURABLE, "a durable feed the subscriber declares",
           durable="{consumer}"),
)
"""Who reads what settles a held decision (approval and hold events)."""

APPROVAL_EVENTS = MessageFamily(
    f"{subjects.APPROVAL_PREFIX}.{{plan_id}}.{{status}}", ApprovalEvent, Direction.EVENT,
    DECISIONS, msg_id="approval:<decision_id>:<status>", event_type="approval.{status}",
    about="plan/{plan_id}/decision/{approval.decision_id}",
    description="An approval's every step, exactly once each: requested (the recorder "
    "held a decision for a person), granted, denied (with reason and guidance), expired "
    "(APPROVAL_TTL_SECONDS passed). On the DECISIONS stream, beside the decisions they "
    "gate: the agent's client waits on it (gate) where it already reads; a subscriber "
    "can notify people.",
    publishers=(Publisher(Role.WORKER, "the recorder, the verdict consumer, the expiry "
                          "sweep; the outbox relay"),),
    readers=GATE_EVENT_READERS,
)

HOLD_EVENTS = MessageFamily(
    f"{subjects.HOLD_PREFIX}.{{plan_id}}.{{status}}", HoldEvent, Direction.EVENT,
    DECISIONS, msg_id="hold:<decision_id>:<status>", event_type="hold.{status}",
    about="plan/{plan_id}/decision/{hold.decision_id}",
    description="The judge settled a held decision without a person, exactly once: "
    "released (every word-only invariant kept: the agent may act) or refused (an error "
    "invariant broken; the hold's reasons say which). A judge that holds a decision for "
    "a person announces it as approval.requested instead. Beside the approval events, "
    "where the agent's gate waits.",
    publishers=(Publisher(Role.WORKER, "the judge (workers.judge); the outbox relay"),),
    readers=GATE_EVENT_READERS,
)

FAMILIES = (VIOLATIONS, TEMPLATES, VERDICTS, EVENTS, APPROVAL_EVENTS, HOLD_EVENTS, REJECTED)
