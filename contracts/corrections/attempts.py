"""One execution of a correction (collection `correction_attempts`) and its lifecycle.

Like the correction, an attempt never changes in place: `transition` returns a new
value for a conditional update.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from pydantic import Field, model_validator

from contracts.corrections.record import Correction
from contracts.corrections.states import ATTEMPT_LIFECYCLE, CorrectionAttemptState, CorrectionMode
from contracts.corrections.transition import ERROR_MAX_CHARS, bounded_text
from contracts.decisions.guidance import Guidance
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, new_id
from contracts.shared.timestamps import UtcTime, utc_now


class CorrectionAttemptRecord(Frozen):
    """One execution of a correction (collection `correction_attempts`), as specified (ADR 0001).

    A correction stays EXECUTING while an attempt fails and another is tried; it
    becomes FAILED only when the service gives up.
    """

    id: Ulid = Field(default_factory=new_id, description="ULID of this attempt.")
    correction_id: Ulid = Field(description="Parent correction ULID.")
    plan_id: Ulid = Field(description="Plan this correction targets.")
    original_decision_id: Ulid = Field(description="Decision being corrected.")
    new_decision_id: Ulid | None = Field(
        default=None, description="Replacement decision (set on success)."
    )
    mode: CorrectionMode = Field(description="revert or append.")
    state: CorrectionAttemptState = Field(
        default=CorrectionAttemptState.PENDING, description="Current attempt state."
    )
    guidance: Guidance = Field(description="Operator guidance text (1-10,000 chars).")
    created_at: UtcTime = Field(default_factory=utc_now, description="UTC creation time.")
    completed_at: UtcTime | None = Field(
        default=None, description="UTC completion time (terminal states only)."
    )
    archived_artifacts_path: str | None = Field(
        default=None, description="Path to archived artifacts (revert mode)."
    )
    error: str | None = Field(
        default=None, max_length=ERROR_MAX_CHARS + 100,
        description="failed: what went wrong in this attempt (at most ~2,000 characters).",
    )

    @classmethod
    def for_correction(
        cls, correction: Correction, at: datetime, *, attempt_id: str | None = None
    ) -> CorrectionAttemptRecord:
        return cls(
            id=attempt_id or new_id(), correction_id=correction.correction_id,
            plan_id=correction.plan_id, original_decision_id=correction.decision_id,
            mode=correction.mode, guidance=correction.guidance, created_at=at,
        )

    @property
    def is_terminal(self) -> bool:
        return ATTEMPT_LIFECYCLE.is_terminal(self.state)

    def transition(
        self, to: CorrectionAttemptState, at: datetime, *,
        new_decision_id: str | None = None, archived_artifacts_path: str | None = None,
        error: str | None = None,
    ) -> CorrectionAttemptRecord:
        """The attempt in state `to`; `completed_at` is set here when `to` is terminal."""
        ATTEMPT_LIFECYCLE.check(self.state, to)
        update: dict[str, Any] = {"state": to}
        if error is not None:
            update["error"] = bounded_text(error)
        if ATTEMPT_LIFECYCLE.is_terminal(to):
            update["completed_at"] = at
        if new_decision_id is not None:
            update["new_decision_id"] = new_decision_id
        if archived_artifacts_path is not None:
            update["archived_artifacts_path"] = archived_artifacts_path
        return type(self).model_validate(self.model_dump() | update)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.is_terminal != (self.completed_at is not None):
            raise ValueError("completed_at is set exactly in the terminal states")
        if self.state is CorrectionAttemptState.COMPLETE and self.new_decision_id is None:
            raise ValueError("a complete attempt names its new_decision_id")
        if self.state is not CorrectionAttemptState.COMPLETE and self.new_decision_id:
            raise ValueError("new_decision_id is set only on success (complete)")
        if self.error is not None and self.state is not CorrectionAttemptState.FAILED:
            raise ValueError("error is set only on a failed attempt")
        return self
