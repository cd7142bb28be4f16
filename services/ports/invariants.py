"""Everything the invariant service reads and writes: invariants, violations, and the
records it shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.violations import InvariantViolation
from contracts.shared.outgoing import OutgoingEvent
from contracts.trust.signing import Signature
from services.ports.records import (
    DeadLetterRecords,
    DecisionRecords,
    OutboxRecords,
    PlanRecords,
)

EventFor = Callable[[InvariantViolation, bool], OutgoingEvent]
"""Builds the event of a violation change from the violation as stored and whether its
plan is blocked once the change commits (known only inside the transaction)."""


class InvariantRecords(Protocol):
    async def add(self, inv: Invariant) -> None:
        """DuplicateInvariant if one of that name exists at that scope and target."""
        ...

    async def get(self, invariant_id: str) -> Invariant | None: ...

    async def require(self, invariant_id: str) -> Invariant:
        """InvariantNotFound for an unknown ID."""
        ...

    async def find(self, scope: InvariantScope | None = None,
                   scope_target: str | None = None) -> list[Invariant]: ...

    async def remove(self, invariant_id: str) -> Invariant: ...

    async def inputs_for(self, plan_ids: Iterable[str] = (), projects: Iterable[str] = (),
                         action_templates: Iterable[str] = ()) -> list[Invariant]: ...


class ViolationRecords(Protocol):
    async def get(self, violation_id: str) -> InvariantViolation | None: ...

    async def require(self, violation_id: str) -> InvariantViolation: ...

    async def find(self, plan_id: str | None = None, *, unresolved_only: bool = False,
                   limit: int = 1000) -> list[InvariantViolation]: ...

    async def blocked_plans(self, plan_ids: Iterable[str]) -> set[str]: ...

    async def record(self, v: InvariantViolation, event_for: EventFor, now: datetime) -> bool:
        """Store a report with its event, in one transaction; False if this very report
        was stored before; ViolationConflict if its ID holds other content."""
        ...

    async def resolve(self, violation_id: str, resolved_by: str | None, at: datetime,
                      event_for: EventFor, signature: Signature | None = None
                      ) -> InvariantViolation:
        """Resolved with its event, in one transaction; ViolationAlreadyResolved if it
        was resolved before."""
        ...


class InvariantStorePort(Protocol):
    """Everything the invariant service reads and writes (store.invariant_store)."""

    @property
    def invariants(self) -> InvariantRecords: ...
    @property
    def violations(self) -> ViolationRecords: ...
    @property
    def decisions(self) -> DecisionRecords: ...
    @property
    def plans(self) -> PlanRecords: ...
    @property
    def outbox(self) -> OutboxRecords: ...
    @property
    def dead_letters(self) -> DeadLetterRecords: ...
