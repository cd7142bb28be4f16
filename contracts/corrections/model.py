"""Corrections: the commands an operator sends, and the two lifecycles they drive.

The `Correction` aggregate and the `CorrectionAttemptRecord` never change in place:
`transition` checks the table and returns a new value, so the store can write the
result with a conditional update on the old status and a racing replica loses
cleanly instead of overwriting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from itertools import pairwise
from types import MappingProxyType
from typing import Annotated, Any, Self, TypedDict, Unpack

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from contracts.archive.rules import NotCopiedArtifact
from contracts.decisions.model import NonEmptyStr
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, new_id
from contracts.shared.lifecycle import Lifecycle
from contracts.shared.timestamps import UtcTime, utc_now
from contracts.shared.tracing import trace_headers

GUIDANCE_MIN_CHARS = 1
GUIDANCE_MAX_CHARS = 10_000


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError(
            "non_empty", "rule non_empty: guidance must contain a non-blank character",
            {"rule": "non_empty"},
        )
    return value


Guidance = Annotated[
    str,
    StringConstraints(min_length=GUIDANCE_MIN_CHARS, max_length=GUIDANCE_MAX_CHARS),
    AfterValidator(_not_blank),
]
"""Operator guidance: 1-10,000 characters, counted as sent; all-whitespace is refused."""


class CorrectionMode(StrEnum):
    REVERT = "revert"
    APPEND = "append"


class CorrectionStatus(StrEnum):
    """Lower-case values: they are the last token of `corrections.events.<plan_id>.<status>`."""

    PENDING = "pending"
    ANALYZING = "analyzing"
    EXECUTING = "executing"
    APPLIED = "applied"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CorrectionAttemptState(StrEnum):
    PENDING = "pending"
    EXECUTING = "executing"
    COMPLETE = "complete"
    FAILED = "failed"


_C = CorrectionStatus
CORRECTION_TRANSITIONS: Mapping[CorrectionStatus, frozenset[CorrectionStatus]] = MappingProxyType({
    _C.PENDING: frozenset({_C.ANALYZING, _C.CANCELLED, _C.FAILED}),
    _C.ANALYZING: frozenset({_C.EXECUTING, _C.CANCELLED, _C.FAILED}),
    _C.EXECUTING: frozenset({_C.APPLIED, _C.FAILED}),
    _C.APPLIED: frozenset(),
    _C.FAILED: frozenset({_C.PENDING}),  # an operator's retry only (CORRECTION_REOPEN)
    _C.CANCELLED: frozenset(),
})
"""The seed's correction lifecycle, plus PENDING -> FAILED, ANALYZING -> FAILED and the
operator's retry FAILED -> PENDING.

The seed only lets EXECUTING fail. But a request whose target is missing, already
superseded or in another plan must end FAILED with a reason *without executing*
(issue 3): entering EXECUTING first would publish an `executing` event for work that
never starts. So validation failures are detected while PENDING or ANALYZING and
go straight to FAILED. Cancellation stays limited to PENDING and ANALYZING, as seeded.

FAILED -> PENDING is the operator's retry (`agents correction retry`, issue 8; the seed
allows "multiple attempts ... if a first attempt fails and the operator retries"). It
goes back to PENDING, not straight to EXECUTING: the tree may have changed since the
failure, so the target is validated and the impact computed again, and a retried
correction can still be cancelled before it executes. Only an operator takes it
(CORRECTION_REOPEN), so FAILED stays terminal for the driver and the recovery sweep.
Each pass from PENDING is a *round* (Correction.round); a status is entered at most
once per round, so `<correction_id>:<status>` (round 1) and
`<correction_id>:<status>:r<round>` are sound JetStream message ids.
"""

CORRECTION_REOPEN: Mapping[CorrectionStatus, frozenset[CorrectionStatus]] = MappingProxyType({
    _C.FAILED: frozenset({_C.PENDING}),
})
"""The edges of the table only an operator's command takes (the retry)."""

_A = CorrectionAttemptState
ATTEMPT_TRANSITIONS: Mapping[CorrectionAttemptState, frozenset[CorrectionAttemptState]] = (
    MappingProxyType({
        _A.PENDING: frozenset({_A.EXECUTING}),
        _A.EXECUTING: frozenset({_A.COMPLETE, _A.FAILED}),
        _A.COMPLETE: frozenset(),
        _A.FAILED: frozenset(),
    })
)
"""The seed's attempt lifecycle, exactly: pending -> executing -> complete | failed."""

CORRECTION_LIFECYCLE = Lifecycle(
    "correction", CORRECTION_TRANSITIONS, CorrectionStatus.PENDING, reopen=CORRECTION_REOPEN
)
ATTEMPT_LIFECYCLE = Lifecycle(
    "correction_attempt", ATTEMPT_TRANSITIONS, CorrectionAttemptState.PENDING
)
CANCELLABLE: frozenset[CorrectionStatus] = frozenset(
    s for s in CorrectionStatus if CORRECTION_LIFECYCLE.allows(s, CorrectionStatus.CANCELLED)
)
OPERATOR_FAILABLE: frozenset[CorrectionStatus] = frozenset(
    s for s in (CorrectionStatus.ANALYZING, CorrectionStatus.EXECUTING)
    if CORRECTION_LIFECYCLE.allows(s, CorrectionStatus.FAILED)
)
"""Where an operator may end a correction FAILED (`agents correction fail`): the two
working statuses, where a driver can be stuck. A PENDING one is cancelled instead;
the edges themselves come from the table above."""

RETRYABLE: frozenset[CorrectionStatus] = frozenset(
    s for s in CorrectionStatus if CORRECTION_LIFECYCLE.reopens(s, CorrectionStatus.PENDING)
)
"""Where an operator may retry a correction (`agents correction retry`): FAILED."""

INLINE_IDS_MAX = 100
"""Events and dry-run replies carry at most this many IDs per list, plus the full count:
100 ULIDs are ~3 KB, so a reply stays far under NATS's 1 MB payload limit whatever the
correction's size. The full lists are in the correction's document
(`agents correction show ID --json`)."""

REASON_MAX_CHARS = 1_000
"""Longest cancel or fail reason: it travels in events, which must stay small."""
ERROR_MAX_CHARS = 2_000
"""Longest `error` a FAILED correction records (longer ones are cut, see bounded_text)."""


def bounded_text(text: str, limit: int = ERROR_MAX_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


REVERT_CHOSEN_PREFIX = "Revert: "
"""How a replacement's chosen_option reads when the operator named none and gave no
guidance: `Revert: <the original chosen_option>`."""


def default_revert_guidance(decision_id: str, requested_by: str) -> str:
    """The guidance of a revert requested without any (the seeds' `agents plan correct
    --mode=revert ID`): it names the target and the operator. The one place this text is
    made; CorrectionRequest fills it in, whoever builds the request (CLI, client, raw
    publisher), so `guidance_defaulted` can recognise it later."""
    return f"Revert of decision {decision_id.upper()} requested by {requested_by}"


class CorrectionRequest(Frozen):
    """Published by an operator to `corrections.requested.<plan_id>`, Nats-Msg-Id = correction_id.

    The same body, sent as a request to `corrections.dryrun.<plan_id>`, asks for a dry run.
    """

    correction_id: Ulid = Field(
        default_factory=new_id,
        description="ULID chosen by the operator; a second request with it is ignored.",
        examples=["01JD7X4Q9R8N2V5K3M6P1T0W7Y"],
    )
    plan_id: Ulid = Field(description="Plan of the target; must match the subject.")
    decision_id: Ulid = Field(description="The decision to correct (the target).")
    mode: CorrectionMode = Field(
        description="revert: supersede the target's subtree; append: spawn a child plan.",
        examples=["revert"],
    )
    guidance: Guidance = Field(
        description="Operator guidance, 1-10,000 characters, not blank. Required for an "
        "append; a revert without it gets 'Revert of decision <decision_id> requested by "
        "<requested_by>'.",
        examples=["Use an online migration that avoids table locks."],
    )
    requested_by: NonEmptyStr = Field(description="Who asked for it.", examples=["alice"])
    chosen_option: NonEmptyStr | None = Field(
        default=None,
        description="Revert only: chosen_option of the replacement decision (default: the "
        "guidance, or 'Revert: <original chosen_option>' when the guidance was defaulted).",
    )
    requested_at: UtcTime = Field(default_factory=utc_now, description="UTC request time.")

    @model_validator(mode="before")
    @classmethod
    def _default_revert_guidance(cls, data: Any) -> Any:
        # Only a revert has a sensible default: an append's guidance is the child plan's
        # prompt, which nothing can make up.
        if (isinstance(data, dict) and data.get("guidance") is None
                and data.get("mode") in (CorrectionMode.REVERT, CorrectionMode.REVERT.value)
                and isinstance(data.get("decision_id"), str)
                and isinstance(data.get("requested_by"), str)
                and data["requested_by"].strip()):
            return data | {"guidance": default_revert_guidance(
                data["decision_id"], data["requested_by"])}
        return data

    @property
    def guidance_defaulted(self) -> bool:
        """True when the guidance is the default a revert without guidance gets."""
        return self.mode is CorrectionMode.REVERT and self.guidance == \
            default_revert_guidance(self.decision_id, self.requested_by)


class CancelRequest(Frozen):
    """Published to `corrections.cancel.<plan_id>`; honoured only from PENDING or ANALYZING."""

    correction_id: Ulid = Field(description="The correction to cancel.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS,
                               description="Why, for the history and the event.")


class FailRequest(Frozen):
    """Published to `corrections.fail.<plan_id>`: an operator ends a correction stuck in
    ANALYZING or EXECUTING as FAILED; refused (`corrections.fail_refused.<plan_id>`) otherwise."""

    correction_id: Ulid = Field(description="The correction to fail.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    reason: NonEmptyStr = Field(
        max_length=REASON_MAX_CHARS,
        description="Why; recorded as the correction's error and in its history.",
        examples=["archive volume lost; retrying will not help"],
    )


class RetryRequest(Frozen):
    """Published to `corrections.retry.<plan_id>`: an operator starts a new round of a FAILED
    correction (FAILED -> PENDING, then a new attempt); refused
    (`corrections.retry_refused.<plan_id>`) otherwise."""

    correction_id: Ulid = Field(description="The correction to retry.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    retry_id: Ulid = Field(
        description="ULID of this retry request; Nats-Msg-Id retry:<correction_id>:<retry_id>. "
        "A retry already recorded with it is not applied twice.",
    )
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS,
                               description="Why, for the history and the event.")
    requested_by: NonEmptyStr = Field(default="operator", description="Who asked for it.")


class Transition(Frozen):
    """One entry of a correction's history; also the outbox row its event is published from."""

    event_id: Ulid = Field(
        default_factory=new_id,
        description="ULID of the event announcing this transition; fixed here so a "
        "republish after a crash carries the same ID.",
    )
    from_status: CorrectionStatus | None = Field(
        description="Status before; None for the entry that created the correction."
    )
    to_status: CorrectionStatus = Field(description="Status after.")
    at: UtcTime = Field(description="When it happened (UTC).")
    reason: str | None = Field(default=None, description="Why, e.g. a cancel reason.")
    error: str | None = Field(default=None, description="What went wrong (to FAILED only).")
    retry_id: Ulid | None = Field(
        default=None, description="FAILED -> PENDING only: the operator's RetryRequest."
    )
    attempts_before: int | None = Field(
        default=None, ge=0,
        description="FAILED -> PENDING only: how many attempts the earlier rounds made, so "
        "the new round's attempts are counted against max_attempts without trusting clocks.",
    )


class TransitionInfo(TypedDict, total=False):
    """What `Correction.transition` may record besides the new status."""

    reason: str | None
    error: str
    new_decision_id: str
    superseded_ids: Sequence[str]
    child_plans_rolled_back: Sequence[str]
    child_plans_spawned: Sequence[str]
    archived_artifacts_path: str | None
    archive_not_copied: Sequence[NotCopiedArtifact]
    archive_not_copied_count: int
    retry_id: str
    attempts_before: int


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
    requested_by: NonEmptyStr = Field(description="Who asked for it.")
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

    @classmethod
    def from_request(
        cls, request: CorrectionRequest, at: datetime, *, event_id: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> Correction:
        """A new PENDING correction whose history holds its creation entry; `trace` is the
        request message's headers (only a well-formed trace context is kept)."""
        entry = Transition(
            event_id=event_id or new_id(), from_status=None,
            to_status=CorrectionStatus.PENDING, at=at,
        )
        return cls(
            **request.model_dump(), status=CorrectionStatus.PENDING, history=[entry],
            trace_context=trace_headers(trace),
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
        return CorrectionRequest.model_validate(
            self.model_dump(include=set(CorrectionRequest.model_fields))
        )

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
            attempts_before=info.get("attempts_before"),
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


class CorrectionAttemptRecord(Frozen):
    """One execution of a correction (collection `correction_attempts`), as the seed defines it.

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
