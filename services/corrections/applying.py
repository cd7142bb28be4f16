"""What an attempt commits when it succeeds: the revert's or the append's writes, the
attempt COMPLETE, the correction APPLIED, and every event announcing them (the resume
instruction among them). A revert's archive is written first, outside the transaction:
a commit that then fails leaves an archive the FAILED end removes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from contracts.corrections.append import append_writes
from contracts.corrections.archive.manifest import not_copied
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes, Versioned
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import CorrectionAttemptState as A
from contracts.corrections.states import CorrectionMode
from contracts.corrections.states import CorrectionStatus as S
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.impact.summary import CorrectionImpact
from contracts.shared.ids import new_id
from services.archive.writer import Archive
from services.corrections.messages import attempt_event, correction_event, resume_message
from services.recorder_batch import announced


@dataclass(frozen=True)
class Analysed:
    """A revert's impact, with its plan's sequence mark read before the walk began (what
    lets the transaction skip looking for decisions recorded since:
    RevertWrites.may_have_late_decisions)."""

    impact: CorrectionImpact
    walked_at_sequence: int


async def attempt_changes(v: Versioned, owner: str, attempt: CorrectionAttemptRecord,
                          archive: Archive, now: datetime, *, request: CorrectionRequest,
                          target: Decision, analysed: Analysed | None,
                          record: PlanRecord | None, note: str | None = None) -> Changes:
    """What the attempt commits; for a revert, the archive is written first."""
    if v.correction.mode is CorrectionMode.REVERT:
        assert analysed is not None
        return await _revert(v, owner, attempt, now, archive=archive, request=request,
                             target=target, analysed=analysed)
    return _append(v, owner, attempt, now, request=request, target=target, record=record,
                   note=note)


async def _revert(v: Versioned, owner: str, attempt: CorrectionAttemptRecord, now: datetime,
                  *, archive: Archive, request: CorrectionRequest, target: Decision,
                  analysed: Analysed) -> Changes:
    c = v.correction
    revert = revert_writes(request, target, analysed.impact, new_decision_id=new_id(),
                           sequence_number=0, at=now,
                           walked_at_sequence=analysed.walked_at_sequence)
    path, lines = await archive.archive(revert)  # durable on return
    done = attempt.transition(A.COMPLETE, now, new_decision_id=revert.new_decision.
                              decision_id, archived_artifacts_path=path)
    applied = c.transition(S.APPLIED, now, **revert.applied_info(path, not_copied(lines)))
    # Each decision the step writes is announced as the recorder announces one, so the
    # reconciler treats it like any other (outboxed with the write, fixed Nats-Msg-Id).
    return Changes(applied, v.version, lease_owner=owner, revert=revert,
                   announce=announced,
                   attempts=[AttemptChange(done, A.EXECUTING)],
                   events=[attempt_event(done, A.EXECUTING, now),
                           correction_event(applied),
                           resume_message(ResumeInstruction.after_revert(
                               applied, target, revert))])


def _append(v: Versioned, owner: str, attempt: CorrectionAttemptRecord, now: datetime,
            *, request: CorrectionRequest, target: Decision,
            record: PlanRecord | None, note: str | None) -> Changes:
    c = v.correction
    append = append_writes(
        request, target, child_plan_id=new_id(), child_root_decision_id=new_id(),
        intervention_decision_id=new_id(), sequence_number=0, at=now,
        project=record.project if record else target.project,
        action_template=record.action_template if record else target.action_template,
        note=note)
    done = attempt.transition(A.COMPLETE, now, new_decision_id=append.new_decision_id)
    applied = c.transition(S.APPLIED, now, **append.applied_info())
    return Changes(applied, v.version, lease_owner=owner, append=append,
                   announce=announced,
                   attempts=[AttemptChange(done, A.EXECUTING)],
                   events=[attempt_event(done, A.EXECUTING, now),
                           correction_event(applied),
                           resume_message(ResumeInstruction.after_append(
                               applied, target, append))])
