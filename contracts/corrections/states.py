"""A correction's statuses and its attempt's states, and the two lifecycles (one
transition table each) that move them."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from contracts.shared.lifecycle import Lifecycle


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
"""The specified correction lifecycle (ADR 0001), plus PENDING -> FAILED, ANALYZING ->
FAILED and the operator's retry FAILED -> PENDING.

The specification only lets EXECUTING fail. But a request whose target is missing,
already superseded or in another plan must end FAILED with a reason *without executing*
(ADR 0017): entering EXECUTING first would publish an `executing` event for work that
never starts. So validation failures are detected while PENDING or ANALYZING and
go straight to FAILED. Cancellation stays limited to PENDING and ANALYZING, as specified.

FAILED -> PENDING is the operator's retry (`agents correction retry`, ADR 0017; the
specification allows "multiple attempts ... if a first attempt fails and the operator
retries"). It goes back to PENDING, not straight to EXECUTING: the tree may have
changed since the failure, so the target is validated and the impact computed again,
and a retried correction can still be cancelled before it executes. Only an operator takes it
(CORRECTION_REOPEN), so FAILED stays terminal for the runner and the recovery sweep.
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
"""The specified attempt lifecycle, exactly: pending -> executing -> complete | failed."""

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
working statuses, where a runner can be stuck. A PENDING one is cancelled instead;
the edges themselves come from the table above."""

RETRYABLE: frozenset[CorrectionStatus] = frozenset(
    s for s in CorrectionStatus if CORRECTION_LIFECYCLE.reopens(s, CorrectionStatus.PENDING)
)
"""Where an operator may retry a correction (`agents correction retry`): FAILED."""
