"""The recording path's message families and their stream (contracts.shared.families)."""

from __future__ import annotations

from contracts.decisions import subjects
from contracts.decisions.model import Decision
from contracts.recording.events import DecisionPersisted, DecisionRejected
from contracts.shared.families import Direction, MessageFamily, Stream
from contracts.shared.roles import ConsumerSpec, Deliver, Publisher, Reader, Role, Via

DECISIONS = Stream(
    subjects.DECISIONS_STREAM, "decisions", duplicate_window=120.0,
    description="Decisions recorded by agents, and the recorder's persisted/rejected "
    "events.")

WAIT_PERSISTED = Reader(
    Role.AGENT, Via.REPLAY, "DecisionRecorder.wait_persisted (clients.recorder): the "
    "plan's decisions.*.<plan_id> read by sequence from the decision's own")

RECORDED = MessageFamily(
    f"{subjects.RECORDED_PREFIX}.{{plan_id}}", Decision, Direction.INBOUND, DECISIONS,
    msg_id="<decision_id> (JetStream drops a retry within the 2-minute duplicate window)",
    description="Agents publish one Decision per message. Leave out sequence_number, "
    "superseded_by and the correction fields: the recorder assigns the first, the "
    "correction workflow the others. The recorder validates each message, writes each "
    "pulled batch with one bulk write, and acks after the write.",
    publishers=(
        Publisher(Role.AGENT, "DecisionRecorder.record (clients.recorder)"),
        Publisher(Role.WORKER, "the reconciler: a new plan's invariant_enforced decisions"),
        Publisher(Role.OPERATOR, "agents dead-letters retry: a dead letter republished to "
                  "the subject it was first sent to", signs=False),
    ),
    readers=(Reader(
        Role.WORKER, Via.DURABLE, "the recorder (workers.recorder)",
        durable=subjects.RECORDER_DURABLE,
        consumer=ConsumerSpec(
            ack_wait="recorder_ack_wait_seconds", batch_size="recorder_batch_size",
            max_wait="recorder_batch_timeout", max_ack_pending=20_000, pending_batches=4,
            waits="a decision's redeliveries while its parent is not stored yet "
                  "(RECORDER_PARENT_WAIT_SECONDS)",
            # Why: workers.recorder.RecorderConsumer.
            backoff_after_ack_wait=False, one_replica=True)),),
)

PERSISTED = MessageFamily(
    f"{subjects.PERSISTED_PREFIX}.{{plan_id}}", DecisionPersisted, Direction.EVENT, DECISIONS,
    msg_id="persisted:<decision_id>", event_type="decision.persisted",
    about="plan/{plan_id}/decision/{decision_id}",
    description="One per recorded decision, after its write committed (also for the "
    "decisions a correction writes, from its outbox).",
    publishers=(Publisher(Role.WORKER, "the recorder, and the correction driver's outbox"),),
    readers=(
        Reader(Role.WORKER, Via.DURABLE, "the reconciler (workers.invariants): new roots get "
               "their plan's invariant_enforced decisions",
               durable=subjects.RECONCILER_DURABLE,
               # NEW: the first start over an existing ledger does not reconcile old plans
               # with today's invariants; from then on the durable misses nothing.
               consumer=ConsumerSpec(ack_wait="invariants_ack_wait_seconds",
                                     batch_size="reconciler_batch_size",
                                     max_ack_pending=20_000, deliver=Deliver.NEW)),
        WAIT_PERSISTED,
        Reader(Role.OPERATOR, Via.CORE, "the console's live view (console.live)"),
    ),
)

REJECTED = MessageFamily(
    f"{subjects.REJECTED_PREFIX}.{{plan_id}}", DecisionRejected, Direction.EVENT, DECISIONS,
    msg_id="rejected:<stream seq>", event_type="decision.rejected",
    description="One per rejected message (plan_id 'unknown' when unreadable); the "
    "message is kept in the dead_letters collection.",
    publishers=(Publisher(Role.WORKER, "the recorder"),),
    readers=(WAIT_PERSISTED,),
)

FAMILIES = (RECORDED, PERSISTED, REJECTED)
