"""A recorder batch on its way through: read (candidates and the messages to
dead-letter), then committed (what to announce); and the reading and the persisted event
of one message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from contracts.decisions.model import Decision
from contracts.decisions.subjects import (
    DECISIONS_STREAM,
    began,
    began_msg_id,
    persisted,
    persisted_msg_id,
    plan_of_subject,
)
from contracts.recording.events import persisted_body
from contracts.recording.facts import Resume
from contracts.recording.message import Candidate, Invalid, read_message
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.rules import RuleViolation
from contracts.shared.unreadable import guarded
from services.recorder_policy import Disposition


def subject_plan(subject: str) -> str | None:
    plan = plan_of_subject(subject)
    return plan.upper() if plan and is_ulid(plan) else None


def read_guarded(msg: Inbound, now: datetime,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                 max_skew: timedelta | None = None) -> Candidate | Invalid:
    """`read_message`, with any exception it raises made this message's `unreadable`."""
    result = guarded(lambda: read_message(msg, now, max_payload_bytes, max_skew))
    if isinstance(result, RuleViolation):
        return Invalid(msg.stream_sequence, subject_plan(msg.subject), (result,))
    return result


def persisted_event(d: Decision, trace: Mapping[str, str] | None = None,
                    hold: str | None = None) -> OutgoingEvent:
    """The decision's persisted event; `trace` is the trace context its message carried,
    continued on the event (contracts.shared.tracing); `hold` the status of its hold."""
    return OutgoingEvent(persisted(d.plan_id), persisted_body(d, hold),
                         persisted_msg_id(d.decision_id),
                         tuple(trace.items()) if trace else (),
                         known=(("decision_id", d.decision_id),))


def announced(d: Decision, trace: Mapping[str, str] | None = None,
              hold: str | None = None) -> list[OutgoingEvent]:
    """What the recorder publishes for a decision it stored: its persisted event, and for
    a plan's root also the plan's began event (the same body), which is all the
    invariants' reconciler reads (contracts.recording.families.BEGAN)."""
    event = persisted_event(d, trace, hold)
    if not d.is_root:
        return [event]
    return [event, replace(event, subject=began(d.plan_id),
                           msg_id=began_msg_id(d.decision_id))]


@dataclass
class ReadBatch:
    """A batch after the single-message rules: candidates, and the messages to dead-letter."""

    batch: Sequence[Inbound]
    now: datetime
    candidates: list[Candidate] = field(default_factory=list)
    letters: dict[int, DeadLetter] = field(default_factory=dict)
    resume: dict[int, Resume] = field(default_factory=dict)
    """By stream sequence: where the agent of a decision refused as stale goes on."""
    by_seq: dict[int, Inbound] = field(init=False)
    """The batch's messages by stream sequence."""

    def __post_init__(self) -> None:
        self.by_seq = {m.stream_sequence: m for m in self.batch}

    def reject(self, msg: Inbound, plan_id: str | None, decision_id: str | None,
               violations: Sequence[RuleViolation]) -> None:
        self.letters[msg.stream_sequence] = DeadLetter.of_message(
            id=dead_letter_id(DECISIONS_STREAM, msg.stream_sequence), subject=msg.subject,
            headers=msg.headers, data=msg.data, plan_id=plan_id, decision_id=decision_id,
            errors=violations, rejected_at=self.now, delivered=msg.delivered)


@dataclass
class Committed:
    """A batch after its transaction: what to announce, and the waits already decided."""

    read: ReadBatch
    written: list[Decision] = field(default_factory=list)
    redelivered: list[Candidate] = field(default_factory=list)
    verdicts: dict[int, Disposition] = field(default_factory=dict)
    holds: dict[str, str] = field(default_factory=dict)
    """Decision ID -> status of the hold the gate wrote with it (its persisted event
    says so)."""
