"""The messages a correction's steps put in the outbox: its lifecycle events, its
attempts' events and the resume instruction (the events of every decision it writes
are the recorder's: services.recorder_batch.announced). Built from the stored records,
so a republished message is identical."""

from __future__ import annotations

from datetime import datetime

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.record import Correction
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionAttemptState
from contracts.shared.outgoing import OutgoingEvent


def correction_event(c: Correction) -> OutgoingEvent:
    e = CorrectionTransitioned.from_correction(c)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)


def resume_message(r: ResumeInstruction) -> OutgoingEvent:
    """The plan runtime's instruction, outboxed with the APPLIED transition it follows."""
    return OutgoingEvent(r.subject, r.model_dump_json().encode(), r.msg_id)


def attempt_event(a: CorrectionAttemptRecord, from_state: CorrectionAttemptState | None,
                  at: datetime) -> OutgoingEvent:
    e = AttemptTransitioned.from_attempt(a, from_state, at=at)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)


def new_attempt_events(a: CorrectionAttemptRecord, at: datetime) -> list[OutgoingEvent]:
    """An attempt is stored already EXECUTING; both of its transitions are announced."""
    pending = a.model_copy(update={"state": CorrectionAttemptState.PENDING})
    return [attempt_event(pending, None, at), attempt_event(a, CorrectionAttemptState.PENDING,
                                                            at)]
