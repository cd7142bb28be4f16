"""What the operator's front ends read, as one port: `LedgerReads`.

The web console and the CLI read the same things (plans, a tree a level at a time,
decisions, corrections and their attempts, dead letters, invariants, violations,
approvals, the status counts), so they read them through this one protocol, and the
read models built on it (services/read_model.py, services/tree_model.py) are computed
once for both.
The MongoDB store (store.mongo_store.MongoStore) and the in-memory store of the tests
(tests/memory_store.py) both implement it, and the contract suite (tests/contract/)
holds them to the same answers; so the console's and the CLI's read paths also run
without a database server.

Reads only: nothing here writes. Errors are the stores' (contracts.shared.persistence):
a database that fails or does not answer raises `StoreFailure`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Protocol

from contracts.corrections.changes import Versioned
from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.comments import Comment
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.decisions.search import Found
from contracts.impact.walk import ImpactWalk
from contracts.invariants.approval_wire import VerdictOutcome
from contracts.invariants.approvals import Approval, ApprovalStatus
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.violations import InvariantViolation
from contracts.shared.counts import LedgerStatus, PlanCounts
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.views import IdKind, IdMatch, RootFilter
from services.ports.corrections import AttemptRecords

__all__ = ["ApprovalReads", "CorrectionReads", "DeadLetterReads", "DecisionReads", "InvariantReads",
           "LedgerReads", "PlanReads", "StatusReads", "TreeReads", "ViolationReads",
           "WalkReads"]


class DecisionReads(Protocol):
    async def get(self, decision_id: str) -> Decision | None: ...

    async def recorded_by(self, decision_id: str) -> str | None:
        """The principal that signed it, as verified (None: recorded unsigned)."""
        ...

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]: ...

    async def children(self, decision_id: str, *, current_only: bool = True,
                       limit: int = 1000) -> list[Decision]:
        """The first `limit`, in sequence order."""
        ...

    async def count_children(self, decision_id: str, *, current_only: bool = True) -> int:
        ...

    async def full_tree(self, plan_id: str, limit: int = 10_000) -> list[Decision]:
        """The plan's first `limit` decisions, superseded ones too, in sequence order."""
        ...

    async def up_to(self, plan_id: str, sequence: int | None, limit: int = 10_000
                    ) -> list[Decision]:
        """The plan's decisions numbered at most `sequence` (None: any), superseded ones
        too, in sequence order, the first `limit` of them."""
        ...

    async def current_tree(self, plan_id: str, limit: int = 10_000) -> list[Decision]:
        """The first `limit` decisions not superseded, in sequence order."""
        ...


class PlanReads(Protocol):
    async def get(self, plan_id: str) -> PlanRecord | None: ...

    async def owner(self, plan_id: str) -> str | None:
        """The principal whose signed root started the plan (None: none verified)."""
        ...


class CorrectionReads(Protocol):
    async def get(self, correction_id: str) -> Versioned | None: ...

    async def find(self, plan_id: str | None = None, status: CorrectionStatus | None = None,
                   limit: int = 100) -> list[Correction]:
        """In arrival order."""
        ...

    async def touching(self, decision_id: str, limit: int = 100) -> list[Correction]:
        """Those that targeted the decision or wrote it, in arrival order."""
        ...


class DeadLetterReads(Protocol):
    async def get(self, dead_letter_id: str) -> DeadLetter | None: ...

    async def list(self, plan_id: str | None = None, limit: int = 100, *,
                   rule: str | None = None, discarded: bool = False) -> list[DeadLetter]:
        """Newest first: those kept (`discarded`: those discarded), of a plan, whose first
        reason is `rule`."""
        ...


class InvariantReads(Protocol):
    async def find(self, scope: InvariantScope | None = None,
                   scope_target: str | None = None) -> list[Invariant]:
        """By name."""
        ...


class ViolationReads(Protocol):
    async def find(self, plan_id: str | None = None, *, unresolved_only: bool = False,
                   limit: int = 1000) -> list[InvariantViolation]:
        """Oldest first."""
        ...


class ApprovalReads(Protocol):
    """Approvals and what became of each verdict: the queue the console and
    `agents approval list|show` show, and the outcome a verdict's sender waits on."""

    async def get(self, decision_id: str) -> Approval | None: ...

    async def find(self, status: ApprovalStatus | None = None, plan_id: str | None = None,
                   limit: int = 1000) -> list[Approval]:
        """Oldest first, at most `limit` (and never more than the store's own bound)."""
        ...

    async def outcome(self, request_id: str) -> VerdictOutcome | None: ...


class WalkReads(Protocol):
    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        """The impact BFS from the target; past `limit` decisions it stops (`exceeded`)."""
        ...


class TreeReads(Protocol):
    """Pages of a plan's tree, never the whole ledger: each answers what is on screen."""

    async def recent_roots(self, limit: int, before: str | None = None,
                           where: RootFilter | None = None) -> list[Decision]:
        """Plan roots (not corrections) that `where` keeps, newest first, those before
        `before`."""
        ...

    async def search(self, lead: list[str], limit: int,
                     before: str | None = None) -> list[Found]:
        """Decisions newest first carrying any of the search tokens `lead` (none: any
        decision), those before the decision ID `before`, with their tokens."""
        ...

    async def recent_corrections(self, plan_id: str | None = None,
                                 status: CorrectionStatus | None = None, limit: int = 100,
                                 before: str | None = None) -> list[Correction]:
        """Corrections newest first, those before the correction ID `before`."""
        ...

    async def comments(self, decision_id: str) -> list[Comment]:
        """The decision's comments, oldest first (the newest COMMENTS_SHOWN of them)."""
        ...

    async def plan_comments(self, plan_id: str, limit: int = 10_000) -> list[Comment]:
        """Every comment on the plan's decisions, oldest first."""
        ...

    async def ids_ending(self, suffix: str, limit: int = 10,
                         kinds: Collection[IdKind] | None = None) -> list[IdMatch]:
        """Plans, decisions, corrections, invariants and violations (of `kinds` only;
        None: all) whose ID ends with `suffix` (upper case), at most `limit` of each."""
        ...

    async def level(self, plan_id: str, parent: str | None, *, after: int | None,
                    limit: int, superseded: bool) -> list[Decision]:
        """The children of `parent` (None: the plan's root and a reverted root's
        replacements), in sequence order, after sequence number `after`."""
        ...

    async def child_counts(self, parents: Iterable[str], *, superseded: bool
                           ) -> dict[str, int]:
        """parent decision_id -> its children (current ones unless `superseded`)."""
        ...

    async def counts(self, plan_ids: Iterable[str]) -> dict[str, PlanCounts]:
        """Every plan asked for, with zeros for one that holds nothing."""
        ...

    async def plan_exists(self, plan_id: str) -> bool: ...


class StatusReads(Protocol):
    async def status(self, now: datetime) -> LedgerStatus:
        """What needs attention as of `now` (a worker is alive until its lease expires)."""
        ...


class LedgerReads(StatusReads, Protocol):
    """Everything the console and the CLI read."""

    @property
    def decisions(self) -> DecisionReads: ...
    @property
    def plans(self) -> PlanReads: ...
    @property
    def corrections(self) -> CorrectionReads: ...
    @property
    def attempts(self) -> AttemptRecords: ...
    @property
    def dead_letters(self) -> DeadLetterReads: ...
    @property
    def invariants(self) -> InvariantReads: ...
    @property
    def violations(self) -> ViolationReads: ...
    @property
    def approvals(self) -> ApprovalReads: ...
    @property
    def impact(self) -> WalkReads: ...
    @property
    def views(self) -> TreeReads: ...
