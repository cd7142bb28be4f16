"""The stored correction (collection `corrections`): the request, its status and its
history, one entry per transition.

A `Correction` never changes in place: `transition` checks the table and returns a new
value, so the store can write the result with a conditional update on the old status
and a racing replica loses cleanly instead of overwriting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, Self, Unpack

from pydantic import Field, model_validator

from contracts.corrections.archive.rules import NotCopiedArtifact
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionMode, CorrectionStatus
from contracts.corrections.transition import Transition, TransitionInfo, bounded_text
from contracts.decisions.guidance import Guidance
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid, new_id
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime
from contracts.shared.tracing import trace_headers
from contracts.trust.signing import Signature

_RESULT_FIELDS = (
    "new_decision_id", "superseded_ids", "child_plans_rolled_back",
    "child_plans_spawned", "archived_artifacts_path", "archive_not_copied",
    "archive_not_copied_count",
)


class Correction(Frozen):
    """The stored aggregate (collection `corrections`): the request, its status and history."""

    correction_id: Ulid = Field(description="ULID from the request; the document key.")
    plan_id: Ulid = Field(description="Plan of the target.")
    decision_id: Ulid = Field(description="The target decision.")
    mode: CorrectionMode = Field(description="revert or append.")
    guidance: Guidance = Field(description="Operator guidance.")
    requested_by: str | None = Field(
        default=None, description="The principal whose signature on the request the ledger "
        "verified; None when it was not signed (a development ledger).")
    claimed_by: str | None = Field(
        default=None, description="What the request's body called its sender (requested_by "
        "on the wire): kept, never taken for who asked.")
    verified: bool = Field(default=False, description="Whether requested_by was verified.")
    signature: Signature | None = Field(
        default=None, description="The request's verified signature (contracts.trust).")
    chosen_option: NonEmptyStr | None = Field(
        default=None, description="Revert only: chosen_option of the replacement."
    )
    requested_at: UtcTime = Field(description="When the operator asked (UTC).")
    status: CorrectionStatus = Field(description="Current lifecycle status.")
    history: list[Transition] = Field(
        min_length=1, description="Every transition, oldest first; the last ends at `status`."
    )
    # Results, set by the transition to APPLIED (error: by the one to FAILED).
    new_decision_id: Ulid | None = Field(
        default=None,
        description="Revert: the replacement decision; append: the user_intervention decision.",
    )
    superseded_ids: list[Ulid] = Field(
        default_factory=list, description="Decisions superseded by the new one (revert)."
    )
    child_plans_rolled_back: list[Ulid] = Field(
        default_factory=list, description="Child plans marked rolled_back (revert)."
    )
    child_plans_spawned: list[Ulid] = Field(
        default_factory=list, description="Child plan created (append)."
    )
    archived_artifacts_path: str | None = Field(
        default=None, description="Archive folder of the affected artifacts (revert)."
    )
    archive_not_copied: list[NotCopiedArtifact] = Field(
        default_factory=list, description=f"Artifacts the archive lists without a copy, and "
        f"why (revert; the first {INLINE_IDS_MAX}, the manifest has them all)."
    )
    archive_not_copied_count: int = Field(
        default=0, ge=0, description="How many artifacts the archive holds no copy of.")
    error: str | None = Field(default=None, description="Why it FAILED.")
    trace_context: dict[str, str] = Field(
        default_factory=dict,
        description="W3C trace context (traceparent, tracestate) the request carried: every "
        "event of the correction carries it too (contracts.shared.tracing).")

    @model_validator(mode="before")
    @classmethod
    def _unverified_before(cls, data: Any) -> Any:
        # Recorded before requesters were verified: the name it carries is the body's.
        if isinstance(data, dict) and "verified" not in data and "requested_by" in data:
            return {**data, "requested_by": None, "claimed_by": data["requested_by"]}
        return data

    @classmethod
    def from_request(
        cls, request: CorrectionRequest, at: datetime, *, event_id: str | None = None,
        trace: Mapping[str, str] | None = None, by: Signature | None = None,
    ) -> Correction:
        """A new PENDING correction whose history holds its creation entry; `trace` is the
        request message's headers (only a well-formed trace context is kept); `by` the
        request's verified signature (None: unverified)."""
        entry = Transition(
            event_id=event_id or new_id(), from_status=None,
            to_status=CorrectionStatus.PENDING, at=at,
            by=by.principal if by else None, signature=by,
        )
        return cls(
            **request.model_dump(exclude={"requested_by"}), status=CorrectionStatus.PENDING,
            history=[entry], trace_context=trace_headers(trace),
            requested_by=by.principal if by else None, claimed_by=request.requested_by,
            verified=by is not None, signature=by,
        )

    @property
    def is_terminal(self) -> bool:
        return CORRECTION_LIFECYCLE.is_terminal(self.status)

    @property
    def last(self) -> Transition:
        return self.history[-1]

    def round_of(self, index: int = -1) -> int:
        """Which round history[index] belongs to: 1, plus one per operator retry before or
        at it. A status is entered at most once per round."""
        upto = self.history[: len(self.history) + index + 1 if index < 0 else index + 1]
        return 1 + sum(1 for t in upto if t.from_status is CorrectionStatus.FAILED)

    @property
    def attempts_before_round(self) -> int:
        """How many attempts the earlier rounds made (0 in the first round)."""
        last = next(t for t in reversed(self.history) if t.to_status is CorrectionStatus.PENDING)
        return last.attempts_before or 0

    def retried_by(self, retry_id: str) -> bool:
        """Whether the retry request `retry_id` is already in the history."""
        return any(t.retry_id == retry_id for t in self.history)

    def request(self) -> CorrectionRequest:
        """The request as it was sent (its requested_by: what the body claimed)."""
        return CorrectionRequest.model_validate(
            self.model_dump(include=set(CorrectionRequest.model_fields))
            | {"requested_by": self.claimed_by})

    @property
    def requester(self) -> str:
        """Who asked, for text: the verified principal, or that nobody was verified."""
        return self.requested_by or "an unverified sender"

    def transition(
        self, to: CorrectionStatus, at: datetime, *, event_id: str | None = None,
        **info: Unpack[TransitionInfo],
    ) -> Correction:
        """The correction after moving to `to`; raises IllegalTransition before building it."""
        CORRECTION_LIFECYCLE.check(self.status, to)
        if "error" in info:  # an exception's text can be any size; events must not be
            info["error"] = bounded_text(info["error"])
        entry = Transition(
            event_id=event_id or new_id(), from_status=self.status, to_status=to, at=at,
            reason=info.get("reason"), error=info.get("error"), retry_id=info.get("retry_id"),
            attempts_before=info.get("attempts_before"), by=info.get("by"),
            signature=info.get("signature"),
        )
        update: dict[str, Any] = {"status": to, "history": [*self.history, entry]}
        update |= {k: info[k] for k in _RESULT_FIELDS if k in info}  # type: ignore[literal-required]
        if "error" in info:
            update["error"] = info["error"]
        elif self.status is CorrectionStatus.FAILED:
            update["error"] = None  # a retry: the failure stays in the history only
        return type(self).model_validate(self.model_dump() | update)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_history(self.history, self.status)
        if self.status is CorrectionStatus.APPLIED and self.new_decision_id is None:
            raise ValueError("an APPLIED correction names its new_decision_id")
        if self.status is not CorrectionStatus.APPLIED and any(
            getattr(self, k) for k in _RESULT_FIELDS
        ):
            raise ValueError("result fields are set only by the transition to APPLIED")
        if (self.status is CorrectionStatus.FAILED) != (self.error is not None):
            raise ValueError("error is set exactly when the correction is FAILED")
        return self


def _check_history(history: Sequence[Transition], status: CorrectionStatus) -> None:
    # Loaded documents are checked too, so a hand-edited history cannot slip in an
    # edge the table forbids.
    first = history[0]
    if first.from_status is not None or first.to_status is not CorrectionStatus.PENDING:
        raise ValueError("history starts with the creation entry None -> pending")
    for before, after in pairwise(history):
        if after.from_status is not before.to_status or not CORRECTION_LIFECYCLE.allows(
            before.to_status, after.to_status
        ):
            raise ValueError(
                f"history breaks the lifecycle at {after.from_status} -> {after.to_status}"
            )
        if (after.retry_id is not None or after.attempts_before is not None) and \
                before.to_status is not CorrectionStatus.FAILED:
            raise ValueError("only a retry (failed -> pending) names a retry_id")
    if history[-1].to_status is not status:
        raise ValueError(f"status {status} differs from the last history entry")
