"""Everything the correction service reads and writes: corrections, attempts, the
one-transaction commit, the plans' leases."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import Changes, Versioned, Written
from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionStatus
from services.ports.records import (
    DeadLetterRecords,
    DecisionRecords,
    ImpactReads,
    OutboxRecords,
    PlanRecords,
)


class CorrectionRecords(Protocol):
    async def get(self, correction_id: str) -> Versioned | None: ...

    async def find(self, plan_id: str | None = None, status: CorrectionStatus | None = None,
                   limit: int = 100) -> list[Correction]:
        """In arrival order."""
        ...

    async def plans_with_unfinished(self, after: str | None = None, limit: int = 1000
                                    ) -> tuple[list[str], str | None]:
        """A page of the plans with a correction not yet ended, in plan ID order after
        `after`, and where the next page starts (None: the last page)."""
        ...

    async def unfinished(self, plan_id: str) -> list[Versioned]:
        """Not yet APPLIED, FAILED or CANCELLED, oldest arrival first."""
        ...

    async def heads(self, plan_id: str) -> list[Versioned]:
        """The oldest arrival of each unfinished status of the plan, oldest first (what
        `next_to_run` needs, whatever the length of the plan's queue)."""
        ...


class AttemptRecords(Protocol):
    async def list_by_correction(self, correction_id: str
                                 ) -> list[CorrectionAttemptRecord]:
        """Oldest first."""
        ...


class CorrectionCommits(Protocol):
    async def commit(self, changes: Changes, now: datetime) -> Written:
        """Everything `changes` says, in one transaction, or nothing: ConcurrentChange
        if the correction (or an attempt, or the tree) changed since it was read,
        LeaseLost if `lease_owner` no longer holds the plan, DuplicateRecord if a new
        correction's ID is taken."""
        ...


class PlanLeases(Protocol):
    """One runner at a time per plan: a lease that expires unless renewed. Its clock is
    the store's (the database server's, ADR 0027), never the caller's: no method takes
    a time."""

    @property
    def ttl(self) -> timedelta: ...

    async def acquire(self, plan_id: str, owner: str) -> bool:
        """True if `owner` now holds it (it was free, expired, or already theirs)."""
        ...

    async def renew(self, plan_id: str, owner: str) -> bool:
        """False once the lease is no longer `owner`'s."""
        ...

    async def release(self, plan_id: str, owner: str) -> None: ...

    async def live(self, plan_ids: list[str]) -> set[str]:
        """Which of these plans have a lease that has not expired."""
        ...


class CorrectionStorePort(Protocol):
    """Everything the correction service reads and writes (store.correction_store)."""

    @property
    def decisions(self) -> DecisionRecords: ...
    @property
    def corrections(self) -> CorrectionRecords: ...
    @property
    def attempts(self) -> AttemptRecords: ...
    @property
    def plans(self) -> PlanRecords: ...
    @property
    def outbox(self) -> OutboxRecords: ...
    @property
    def leases(self) -> PlanLeases: ...
    @property
    def impact(self) -> ImpactReads: ...
    @property
    def writer(self) -> CorrectionCommits: ...
    @property
    def dead_letters(self) -> DeadLetterRecords: ...
