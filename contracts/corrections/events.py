"""Events of the correction path: what subscribers of `corrections.events.>` and
`corrections.attempts.>` receive. Commands live in `contracts.corrections.requests`,
refusals in `contracts.corrections.refusals`.

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
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid, new_id
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
        self._check_results()
        if (self.to_status is CorrectionStatus.FAILED) != (self.error is not None):
            raise ValueError("error is set exactly on the failed event")
        return self

    def _check_results(self) -> None:
        """Results belong to the applied event, and its lists are bounded by their counts."""
        applied = self.to_status is CorrectionStatus.APPLIED
        if applied and self.new_decision_id is None:
            raise ValueError("an applied event names new_decision_id")
        results = (self.new_decision_id, self.superseded_ids, self.child_plans_rolled_back,
                   self.child_plans_spawned, self.archived_artifacts_path,
                   self.superseded_count, self.child_plans_rolled_back_count)
        if not applied and any(results):
            raise ValueError("result fields belong to the applied event only")
        for ids, count in ((self.superseded_ids, self.superseded_count),
                           (self.child_plans_rolled_back, self.child_plans_rolled_back_count)):
            if len(ids) > INLINE_IDS_MAX or len(ids) != min(count, INLINE_IDS_MAX):
                raise ValueError("an event lists the first (at most 100) of count IDs")


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
