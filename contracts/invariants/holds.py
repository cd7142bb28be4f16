"""A held decision: recorded, but not to be acted on until someone lets it go.

A decision is held when a checked invariant whose consequence is `hold` breaks (it
waits for a person's approval), or when an invariant written only in words binds its
plan and a judge is configured (it waits for the judge's verdict). The hold is written
in the recorder's transaction with the decision (a GateSink), so a recorded decision
is never seen without it. Lifecycle: one transition table (`TRANSITIONS`), a named
error for any other move.

A hold awaiting approval has its approval (contracts.invariants.approvals): a grant
releases it, a denial or the approval's expiry refuses it, in the verdict's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from pydantic import Field

from contracts.invariants.severity import Consequence, Severity
from contracts.invariants.violations import FoundBy
from contracts.shared.base import Frozen
from contracts.shared.errors import DomainError
from contracts.shared.ids import Ulid


class HoldStatus(StrEnum):
    AWAITING_JUDGE = "awaiting_judge"
    AWAITING_APPROVAL = "awaiting_approval"
    RELEASED = "released"
    REFUSED = "refused"


TRANSITIONS: Mapping[HoldStatus, frozenset[HoldStatus]] = MappingProxyType({
    HoldStatus.AWAITING_JUDGE: frozenset({HoldStatus.RELEASED, HoldStatus.AWAITING_APPROVAL,
                                          HoldStatus.REFUSED}),
    HoldStatus.AWAITING_APPROVAL: frozenset({HoldStatus.RELEASED, HoldStatus.REFUSED}),
    HoldStatus.RELEASED: frozenset(),
    HoldStatus.REFUSED: frozenset(),
})
"""Where a hold may go: a judge's verdict moves `awaiting_judge` on, a person's (or the
approval's expiry) `awaiting_approval`."""


class HoldTransitionRefused(DomainError):
    def __init__(self, decision_id: str, old: HoldStatus, new: HoldStatus) -> None:
        self.decision_id, self.old, self.new = decision_id, old, new
        super().__init__(f"the hold of decision {decision_id} is {old.value}; it cannot "
                         f"become {new.value}")


def check_transition(decision_id: str, old: HoldStatus, new: HoldStatus) -> None:
    if new not in TRANSITIONS[old]:
        raise HoldTransitionRefused(decision_id, old, new)


class HoldReason(Frozen):
    """One invariant a held decision waits on."""

    invariant_id: Ulid
    invariant_name: str
    severity: Severity
    consequence: Consequence
    found_by: FoundBy
    detail: str = Field(default="", max_length=1000)


class Hold(Frozen):
    """A held decision (`_id` = its decision_id in the store)."""

    decision_id: Ulid
    plan_id: Ulid
    status: HoldStatus
    reasons: list[HoldReason] = Field(default_factory=list)
    judge_invariant_ids: list[Ulid] = Field(
        default_factory=list, description="Word-only invariants the judge is to rule on.")
    digest: str | None = Field(default=None, description="The decision's content digest "
                               "(contracts.invariants.approvals.decision_digest), what an "
                               "approval of it binds.")
    created_at: datetime
    updated_at: datetime
