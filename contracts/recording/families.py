"""The recording path's message families and their stream (contracts.shared.families)."""

from __future__ import annotations

from contracts.decisions import subjects
from contracts.decisions.comments import CommentRequest
from contracts.decisions.model import Decision
from contracts.decisions.plan_ending import EndPlanRequest
from contracts.recording.events import DecisionPersisted, DecisionRejected
from contracts.shared.dead_letter_care import DiscardRequest
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
            max_ack_pending=20_000, pending_batches=4,
            waits="a decision's redeliveries while its parent is not stored yet "
                  "(RECORDER_PARENT_WAIT_SECONDS)",
            # Why: workers.recorder.RecorderConsumer.
            backoff_after_ack_wait=False, one_replica=True,
            # RECORDER_PARTITIONS durables, spread over the replicas (workers.leading).
            partitions="recorder_partitions")),),
)

PERSISTED = MessageFamily(
    f"{subjects.PERSISTED_PREFIX}.{{plan_id}}", DecisionPersisted, Direction.EVENT, DECISIONS,
    msg_id="persisted:<decision_id>", event_type="decision.persisted",
    about="plan/{plan_id}/decision/{decision_id}",
    description="One per recorded decision, after its write committed (also for the "
    "decisions a correction writes, from its outbox).",
    publishers=(Publisher(Role.WORKER, "the recorder, and the correction driver's outbox"),),
    readers=(
        WAIT_PERSISTED,
        Reader(Role.OPERATOR, Via.CORE, "the console's live view (console.live)"),
    ),
)

BEGAN = MessageFamily(
    f"{subjects.BEGAN_PREFIX}.{{plan_id}}", DecisionPersisted, Direction.EVENT, DECISIONS,
    msg_id="began:<decision_id>", event_type="plan.began",
    about="plan/{plan_id}/decision/{decision_id}",
    description="One per plan root (prompt_definition) recorded, published beside its "
    "persisted event with the same body (by the recorder, or from a correction's outbox "
    "for an append's child plan). What the invariants' reconciler reads: one message per "
    "plan rather than one per decision.",
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


UPKEEP = ConsumerSpec(ack_wait="corrections_ack_wait_seconds",
                      batch_size="corrections_batch_size")
"""The upkeep commands' consumers: rare, small, an operator waiting for each."""
RETRIED = Publisher(Role.OPERATOR, "agents dead-letters retry: a dead letter republished "
                    "to the subject it was first sent to", signs=False)

COMMENT = MessageFamily(
    f"{subjects.COMMENT_PREFIX}.{{plan_id}}", CommentRequest, Direction.INBOUND, DECISIONS,
    msg_id="<comment_id> (a retried publish stores one comment)",
    description="A comment on a decision, without correcting it: the workers store it "
    "with its author (the verified principal, or 'unverified'; never a field of the "
    "body) and the time; agents plan explain and the console show it. A comment on a "
    "decision not recorded is refused (logged) and acked.",
    publishers=(
        Publisher(Role.OPERATOR, "agents plan comment, the console"),
        Publisher(Role.AGENT, "an agent's note on its own decision"), RETRIED),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the upkeep consumers (workers.upkeep)",
                    durable=subjects.COMMENTER_DURABLE, consumer=UPKEEP),))

END_PLAN = MessageFamily(
    f"{subjects.END_PLAN_PREFIX}.{{plan_id}}", EndPlanRequest, Direction.INBOUND, DECISIONS,
    msg_id="end_plan:<plan_id>:<status>",
    description="Mark a plan completed or abandoned (contracts.decisions.plan_ending): "
    "only an active plan with no unfinished correction, by its owner or an operator. "
    "The plan's record keeps who (the verified principal, or 'unverified'), when and "
    "why; a refused request is logged and acked, and the record is unchanged.",
    publishers=(
        Publisher(Role.AGENT, "the plan's owner, when it is done"),
        Publisher(Role.OPERATOR, "agents plan complete | abandon, the console"), RETRIED),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the upkeep consumers (workers.upkeep)",
                    durable=subjects.PLAN_ENDER_DURABLE, consumer=UPKEEP),))

DISCARD = MessageFamily(
    f"{subjects.DISCARD_PREFIX}.{{stream}}", DiscardRequest, Direction.INBOUND, DECISIONS,
    msg_id="discard:<dead_letter_id>",
    description="An operator discards a dead letter that no retry can fix: the workers "
    "mark it discarded with who (the verified principal, or 'unverified'), when and why. "
    "It stays readable and no longer counts in agents status.",
    publishers=(Publisher(Role.OPERATOR, "agents dead-letters discard, the console"),),
    readers=(Reader(Role.WORKER, Via.DURABLE, "the upkeep consumers (workers.upkeep)",
                    durable=subjects.DISCARDER_DURABLE, consumer=UPKEEP),))

FAMILIES = (RECORDED, PERSISTED, BEGAN, REJECTED, COMMENT, END_PLAN, DISCARD)
