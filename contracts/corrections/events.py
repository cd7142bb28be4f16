"""Events of the correction path: what subscribers of `corrections.events.>` and
`corrections.attempts.>` receive. Commands live in `contracts.corrections.requests`.

Events are built from the stored aggregate, never assembled by hand in a worker, so
a republished event is identical to the first one.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from contracts.corrections import subjects
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.record import Correction
from contracts.corrections.states import (
    ATTEMPT_LIFECYCLE,
    CORRECTION_LIFECYCLE,
    CorrectionAttemptState,
    CorrectionMode,
    CorrectionStatus,
)
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX, MAX_TEXT_BYTES
from contracts.shared.ids import Ulid, new_id
from contracts.shared.rules import ERRORS_DOC, BoundedViolations, EchoText
from contracts.shared.timestamps import UtcTime


class CorrectionTransitioned(Frozen):
    """Published once per lifecycle transition to `corrections.events.<plan_id>.<to_status>`."""

    event_id: Ulid = Field(description="ULID of this event (stable across republishing).")
    correction_id: Ulid = Field(description="The correction.")
    plan_id: Ulid = Field(description="Plan of the target.")
    decision_id: Ulid = Field(description="The target decision.")
    mode: CorrectionMode = Field(description="revert or append.", examples=["revert"])
    from_status: CorrectionStatus | None = Field(
        description="Status before; None when the correction was just created (to pending)."
    )
    to_status: CorrectionStatus = Field(description="Status after.", examples=["applied"])
    at: UtcTime = Field(description="When the transition happened (UTC).")
    reason: str | None = Field(default=None, description="Why (e.g. a cancel reason).")
    round: int = Field(
        default=1, ge=1,
        description="1, plus one per operator retry so far (failed -> pending starts round 2).",
    )
    # applied only
    new_decision_id: Ulid | None = Field(
        default=None,
        description="applied: the replacement (revert) or user_intervention (append) decision.",
    )
    superseded_ids: list[Ulid] = Field(
        default_factory=list,
        description="applied (revert): decisions superseded, the first 100 at most (BFS "
        "order); all of them are in the correction's document.",
    )
    superseded_count: int = Field(
        default=0, ge=0, description="applied (revert): how many decisions were superseded."
    )
    child_plans_rolled_back: list[Ulid] = Field(
        default_factory=list,
        description="applied (revert): child plans rolled back, the first 100 at most.",
    )
    child_plans_rolled_back_count: int = Field(
        default=0, ge=0, description="applied (revert): how many child plans were rolled back."
    )
    lists_truncated: bool = Field(
        default=False,
        description="True when superseded_ids or child_plans_rolled_back hold only their "
        "first 100 entries; read the correction for all of them.",
    )
    child_plans_spawned: list[Ulid] = Field(
        default_factory=list, description="applied (append): the child plan created."
    )
    archived_artifacts_path: str | None = Field(
        default=None, description="applied (revert): where affected artifacts were archived."
    )
    # failed only
    error: str | None = Field(default=None, description="failed: what went wrong.")

    @classmethod
    def from_correction(cls, correction: Correction, index: int = -1) -> CorrectionTransitioned:
        """The event of `correction.history[index]` (default: the latest transition)."""
        entry = correction.history[index]
        applied = entry.to_status is CorrectionStatus.APPLIED
        results: dict[str, object] = {}
        if applied:
            # Bounded whatever the correction's size: an event over the payload limit
            # could never be published (and would wedge the outbox behind it).
            superseded, rolled = correction.superseded_ids, correction.child_plans_rolled_back
            results = {
                **correction.model_dump(include={
                    "new_decision_id", "child_plans_spawned", "archived_artifacts_path"}),
                "superseded_ids": superseded[:INLINE_IDS_MAX],
                "superseded_count": len(superseded),
                "child_plans_rolled_back": rolled[:INLINE_IDS_MAX],
                "child_plans_rolled_back_count": len(rolled),
                "lists_truncated": max(len(superseded), len(rolled)) > INLINE_IDS_MAX,
            }
        return cls(
            event_id=entry.event_id, correction_id=correction.correction_id,
            plan_id=correction.plan_id, decision_id=correction.decision_id,
            mode=correction.mode, from_status=entry.from_status, to_status=entry.to_status,
            at=entry.at, reason=entry.reason, error=entry.error,
            round=correction.round_of(index), **results,
        )

    @property
    def subject(self) -> str:
        return subjects.event(self.plan_id, self.to_status)

    @property
    def msg_id(self) -> str:
        return subjects.event_msg_id(self.correction_id, self.to_status, self.round)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.from_status is None:
            if self.to_status is not CorrectionStatus.PENDING:
                raise ValueError("only the creation event (to pending) has no from_status")
        elif not CORRECTION_LIFECYCLE.allows(self.from_status, self.to_status):
            raise ValueError(f"{self.from_status} -> {self.to_status} is not a transition")
        applied = self.to_status is CorrectionStatus.APPLIED
        if applied and self.new_decision_id is None:
            raise ValueError("an applied event names new_decision_id")
        if not applied and (
            self.new_decision_id or self.superseded_ids or self.child_plans_rolled_back
            or self.child_plans_spawned or self.archived_artifacts_path
            or self.superseded_count or self.child_plans_rolled_back_count
        ):
            raise ValueError("result fields belong to the applied event only")
        for ids, count in ((self.superseded_ids, self.superseded_count),
                           (self.child_plans_rolled_back, self.child_plans_rolled_back_count)):
            if len(ids) > INLINE_IDS_MAX or len(ids) != min(count, INLINE_IDS_MAX):
                raise ValueError("an event lists the first (at most 100) of count IDs")
        if (self.to_status is CorrectionStatus.FAILED) != (self.error is not None):
            raise ValueError("error is set exactly on the failed event")
        return self


class AttemptTransitioned(Frozen):
    """Published once per attempt state change to `corrections.attempts.<plan_id>.<to_state>`."""

    event_id: Ulid = Field(default_factory=new_id, description="ULID of this event.")
    attempt_id: Ulid = Field(description="The attempt (CorrectionAttemptRecord.id).")
    correction_id: Ulid = Field(description="Its correction.")
    plan_id: Ulid = Field(description="Plan of the target.")
    from_state: CorrectionAttemptState | None = Field(
        description="State before; None when the attempt was just created (pending)."
    )
    to_state: CorrectionAttemptState = Field(description="State after.")
    at: UtcTime = Field(description="When (UTC).")
    new_decision_id: Ulid | None = Field(default=None, description="complete: the new decision.")
    archived_artifacts_path: str | None = Field(
        default=None, description="complete (revert): archive location."
    )
    error: str | None = Field(default=None, description="failed: what went wrong (bounded).")

    @classmethod
    def from_attempt(
        cls, attempt: CorrectionAttemptRecord, from_state: CorrectionAttemptState | None,
        *, at: UtcTime | None = None, event_id: str | None = None,
    ) -> AttemptTransitioned:
        """The event for `attempt` having just entered its current state from `from_state`.

        `at` defaults to completed_at (terminal) or created_at (pending); an attempt
        does not store when it began executing, so pass `at` for that one.
        """
        when = at or attempt.completed_at or attempt.created_at
        return cls(
            event_id=event_id or new_id(), attempt_id=attempt.id,
            correction_id=attempt.correction_id, plan_id=attempt.plan_id,
            from_state=from_state, to_state=attempt.state, at=when,
            new_decision_id=attempt.new_decision_id,
            archived_artifacts_path=attempt.archived_artifacts_path, error=attempt.error,
        )

    @property
    def subject(self) -> str:
        return subjects.attempt(self.plan_id, self.to_state)

    @property
    def msg_id(self) -> str:
        return subjects.attempt_msg_id(self.attempt_id, self.to_state)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.from_state is None:
            if self.to_state is not CorrectionAttemptState.PENDING:
                raise ValueError("only the creation event (to pending) has no from_state")
        elif not ATTEMPT_LIFECYCLE.allows(self.from_state, self.to_state):
            raise ValueError(f"{self.from_state} -> {self.to_state} is not a transition")
        return self


class _Refusal(Frozen):
    """What every refusal of an operator's command (cancel, fail, retry) says: which
    correction, its plan, the status it was found in, and why, in one sentence."""

    correction_id: Ulid = Field(description="The correction the command named.")
    plan_id: Ulid = Field(description="Its plan.")
    status: CorrectionStatus | None = Field(
        description="Its status when the command arrived; None if no such correction exists."
    )
    reason: str = Field(description="Why the command was refused, in one sentence.")


def _refusal_reason(correction_id: str, plan_id: str, status: CorrectionStatus | None,
                    only: str) -> str:
    if status is None:
        return f"no correction {correction_id} in plan {plan_id}"
    return f"correction {correction_id} is {status.value}; {only}"


class CancelRefused(_Refusal):
    """Published to `corrections.cancel_refused.<plan_id>` (and sent as the reply, if the
    cancel was a request) when a correction is past the point where it can be cancelled."""

    @classmethod
    def for_status(
        cls, correction_id: str, plan_id: str, status: CorrectionStatus | None
    ) -> CancelRefused:
        why = _refusal_reason(correction_id, plan_id, status,
                              "only pending or analyzing corrections can be cancelled")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status, reason=why)

    @property
    def subject(self) -> str:
        return subjects.cancel_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.cancel_refused_msg_id(self.correction_id, self.status)


class FailRefused(_Refusal):
    """Published to `corrections.fail_refused.<plan_id>` when an operator's fail cannot be
    honoured: the correction is not ANALYZING or EXECUTING (or does not exist)."""

    @classmethod
    def for_status(
        cls, correction_id: str, plan_id: str, status: CorrectionStatus | None
    ) -> FailRefused:
        why = _refusal_reason(correction_id, plan_id, status,
                              "only analyzing or executing corrections can be failed by an "
                              "operator (cancel a pending one)")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status, reason=why)

    @property
    def subject(self) -> str:
        return subjects.fail_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.fail_refused_msg_id(self.correction_id, self.status)


class RetryRefused(_Refusal):
    """Published to `corrections.retry_refused.<plan_id>` when an operator's retry cannot be
    honoured: the correction is not FAILED (or does not exist), or its target can no longer
    be corrected (missing, superseded, in another plan), so a new round would fail again."""

    round: int = Field(default=1, ge=1, description="Its round when the retry arrived.")

    @classmethod
    def for_status(cls, correction_id: str, plan_id: str, status: CorrectionStatus | None,
                   round_: int = 1, *, target_error: str | None = None) -> RetryRefused:
        if status is not None and target_error is not None:
            why = f"correction {correction_id} cannot be retried: {target_error}"
        else:
            why = _refusal_reason(correction_id, plan_id, status,
                                  "only a failed correction can be retried")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status,
                   round=round_, reason=why[:1000])

    @property
    def subject(self) -> str:
        return subjects.retry_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.retry_refused_msg_id(self.correction_id, self.status, self.round)


class CorrectionRejected(Frozen):
    """Published to `corrections.rejected.<plan_id|unknown>` when a request or cancel message
    cannot be read; the message is kept in `dead_letters` and never redelivered."""

    dead_letter_id: EchoText = Field(
        description="'CORRECTIONS:<stream sequence>' in dead_letters.")
    subject: EchoText = Field(description="Subject the message was published on (cut at "
                              f"{MAX_TEXT_BYTES} bytes).")
    plan_id: EchoText | None = Field(default=None, description="Plan, when readable.")
    correction_id: EchoText | None = Field(default=None,
                                           description="correction_id, if readable.")
    errors: BoundedViolations = Field(description=ERRORS_DOC)
    rejected_at: UtcTime = Field(description="When (UTC).")


class DryRunError(Frozen):
    """The reply to `corrections.dryrun.<plan_id>` when no report can be made.

    code: `target_not_found`, `target_in_other_plan` (applying would FAIL with the
    same message), or `invalid_request` (unreadable body, or a body whose plan_id
    differs from the subject's). A superseded target is not an error here: the report
    warns and names its current replacement (applying still FAILS, target_superseded).
    """

    error: str = Field(description="Machine-readable code.", examples=["target_not_found"])
    message: str = Field(description="What is wrong, in one sentence.")
    correction_id: str | None = Field(default=None, description="From the request, if readable.")
    plan_id: str | None = Field(default=None, description="From the subject.")
    decision_id: str | None = Field(default=None, description="The target, if readable.")
