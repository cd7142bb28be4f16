"""Invariants: what the CLI and the workers do with them.

Writes an operator makes (add, remove, resolve) go straight to the store: they are
rare, and an operator wants the answer (the new ID, "unknown ID") at once. What agents
send (violation reports) and what the ledger derives (invariant_enforced decisions)
travel over NATS like everything else an agent records.

Exactly-once events: a report or a resolution is committed together with its event in
the outbox (store.outbox), then published under a fixed Nats-Msg-Id and deleted; if the
process dies in between, the outbox relay every worker runs publishes it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime

from pydantic import ValidationError

from contracts.decisions.model import Decision
from contracts.invariants.blocking import ReconciliationBlocked
from contracts.invariants.checks import InvalidCheck, compile_check
from contracts.invariants.errors import (
    DuplicateInvariant,
    InvalidInvariant,
    ViolationAlreadyResolved,
    ViolationConflict,
)
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.precedence import effective_invariants
from contracts.invariants.severity import Consequence, Severity
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import (
    ViolationEventType,
)
from contracts.recording.events import DecisionPersisted
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.persistence import InvariantNotFound, ViolationNotFound
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from contracts.trust.ownership import Ownership, Refused, not_owner, out_of_scope
from contracts.trust.policy import Identity, principal_name, signature_of
from services import outbox
from services.invariant_reconciliation import BACKFILL_PAGE, Backfilled, Reconciler
from services.ports.invariants import InvariantRecords, InvariantStorePort, ViolationRecords
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords, DecisionRecords, OutboxRecords, PlanRecords
from services.violation_reports import reject_report, violation_event

log = logging.getLogger(__name__)

__all__ = [
    "DuplicateInvariant", "InvalidInvariant", "InvariantNotFound", "InvariantService",
    "ReconciliationBlocked", "ViolationAlreadyResolved", "ViolationConflict",
    "ViolationNotFound",
]


class InvariantService:
    def __init__(self, publisher: EventPublisher, *, invariants: InvariantRecords,
                 violations: ViolationRecords, decisions: DecisionRecords,
                 plans: PlanRecords, outbox: OutboxRecords,
                 dead_letters: DeadLetterRecords,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._invariants = invariants
        self._violations = violations
        self._decisions = decisions
        self._plans = plans
        self._outbox = outbox
        self._dead_letters = dead_letters
        self._publisher = publisher
        self._clock = clock
        self._reconciler = Reconciler(publisher, invariants=invariants, decisions=decisions,
                                      plans=plans)

    @classmethod
    def from_store(cls, store: InvariantStorePort,
                   publisher: EventPublisher) -> InvariantService:
        """Over a store that holds every repository (store.mongo_store.MongoStore, which
        the bootstrap opens; the in-memory store of the tests)."""
        return cls(publisher, invariants=store.invariants, violations=store.violations,
                   decisions=store.decisions, plans=store.plans, outbox=store.outbox,
                   dead_letters=store.dead_letters)

    # --- invariants ------------------------------------------------------------------

    async def add_invariant(self, name: str, description: str,
                            scope: InvariantScope = InvariantScope.GLOBAL,
                            scope_target: str | None = None, *, check: str | None = None,
                            severity: Severity = Severity.ERROR,
                            consequence: Consequence | None = None) -> Invariant:
        """Store a new invariant. InvalidInvariant if the model refuses it or its `check`
        is not a CEL expression within the bounds (contracts.invariants.checks; the
        message says why); DuplicateInvariant if that name exists at that scope and
        target. The recorder's next batch evaluates it."""
        if check is not None:
            try:
                check = compile_check(check).source
            except InvalidCheck as exc:
                raise InvalidInvariant(f"check: {exc}") from None
        try:
            inv = Invariant(name=name, description=description, scope=scope,
                            scope_target=scope_target, created_at=self._clock(),
                            check=check, severity=severity, consequence=consequence)
        except ValidationError as exc:
            reason = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'invariant'}: "
                               f"{e['msg']}" for e in exc.errors(include_url=False))
            raise InvalidInvariant(reason) from None
        await self._invariants.add(inv)
        return inv

    async def get_invariant(self, invariant_id: str) -> Invariant:
        """InvariantNotFound for an unknown ID."""
        return await self._invariants.require(invariant_id)

    async def list_invariants(self, scope: InvariantScope | None = None) -> list[Invariant]:
        """Every invariant (or those of one scope), by name."""
        return await self._invariants.find(scope)

    async def effective_for(self, plan_id: str | None = None, project: str | None = None,
                            action_template: str | None = None) -> list[Invariant]:
        """The invariants in force, one per name, by name. For a recorded plan its own
        project and action template count (those given are used for a plan not recorded
        yet); with no plan, what a new plan of `project` / `action_template` would get."""
        ancestors: tuple[str, ...] = ()
        if plan_id is not None:
            plan_id = plan_id.upper()
            record = await self._plans.get(plan_id)
            if record is not None and record.root_decision_id is not None:
                project, action_template = record.project, record.action_template
            ancestors = (await self._plans.ancestors([plan_id])).get(plan_id, ())
        inputs = await self._invariants.inputs_for(
            [plan_id, *ancestors] if plan_id else [], [project] if project else [],
            [action_template] if action_template else [])
        return effective_invariants(plan_id, project, action_template, inputs, ancestors)

    async def remove_invariant(self, invariant_id: str) -> Invariant:
        """InvariantNotFound for an unknown ID. Decisions already recorded under it and its
        violations stay; an unresolved error violation of it still blocks until resolved."""
        return await self._invariants.remove(invariant_id)

    # --- violations ------------------------------------------------------------------

    async def report_refusal(self, identity: Identity, plan_id: str) -> RuleViolation | None:
        """`plan_owner` when `identity` may not report against the plan (its owner and
        delegates may; a plan without a verified owner takes anyone's reports)."""
        plan = await self._plans.get(plan_id)
        ownership = Ownership(plan.owner, tuple(plan.delegates)) if plan else Ownership()
        return not_owner(plan_id, ownership, identity, "report violations against")

    async def report_violation(self, violation: InvariantViolation,
                               identity: Identity = None) -> InvariantViolation:
        """Store a report and announce it (INVARIANT_VIOLATED) exactly once; reporting the
        same violation again stores and announces nothing new. InvariantNotFound if it
        names no invariant; ViolationConflict if its ID was reported with other content.
        `identity`: who sent it, as verified (its reported_by)."""
        violation = violation.model_copy(update={
            "reported_by": principal_name(identity), "verified": identity is not None,
            "report_signature": signature_of(identity)})
        inv = await self._invariants.require(violation.invariant_id)
        await self._violations.record(
            violation, violation_event(ViolationEventType.INVARIANT_VIOLATED, inv.name),
            self._clock())
        await self.flush(violation.violation_id)
        return await self._violations.require(violation.violation_id)

    async def get_violation(self, violation_id: str) -> InvariantViolation:
        """ViolationNotFound for an unknown ID."""
        return await self._violations.require(violation_id)

    async def list_violations(self, plan_id: str | None = None,
                              unresolved_only: bool = False) -> list[InvariantViolation]:
        """Oldest first."""
        return await self._violations.find(plan_id, unresolved_only=unresolved_only)

    async def resolve_violation(self, violation_id: str,
                                identity: Identity = None) -> InvariantViolation:
        """Resolve and announce it (INVARIANT_VIOLATION_RESOLVED) exactly once; the plan is
        unblocked when no unresolved error violation remains. ViolationNotFound for an
        unknown ID, ViolationAlreadyResolved when it was resolved before; Refused
        (operator_scope) for an operator outside the plan's project. `identity`: the
        operator as verified (its resolved_by; None: an unverified resolution)."""
        held = await self._violations.require(violation_id)
        plan = await self._plans.get(held.plan_id)
        refused = out_of_scope(identity, held.plan_id, plan.project if plan else None)
        if refused is not None:
            raise Refused(refused)
        inv = await self._invariants.get(held.invariant_id)
        done = await self._violations.resolve(
            violation_id, principal_name(identity), self._clock(),
            violation_event(ViolationEventType.INVARIANT_VIOLATION_RESOLVED,
                            inv.name if inv else None), signature_of(identity))
        await self.flush(done.violation_id)
        return done

    async def blocked_plans(self, plan_ids: Iterable[str]) -> set[str]:
        """Which of these plans have an unresolved blocking (error) violation."""
        return await self._violations.blocked_plans(p.upper() for p in plan_ids)

    async def flush(self, violation_id: str) -> None:
        await outbox.flush(self._outbox, self._publisher, violation_id)

    async def reject_report(self, subject: str, headers: dict[str, str], data: bytes, *,
                            stream_sequence: int, delivered: int,
                            unreadable: Unreadable) -> DeadLetter:
        """Keep a report that will never be stored in dead_letters, then say so on
        invariants.rejected.<plan_id>; once per stream message, whoever retries."""
        return await reject_report(
            self._dead_letters, self._publisher, self._clock(), subject=subject,
            headers=headers, data=data, stream_sequence=stream_sequence, delivered=delivered,
            unreadable=unreadable)

    # --- reconciliation ----------------------------------------------------------------

    async def reconcile(self, persisted: Sequence[DecisionPersisted]) -> list[Decision]:
        """For each new plan root among `persisted`, publish one invariant_enforced decision
        per effective invariant (`Reconciler.reconcile`)."""
        return await self._reconciler.reconcile(persisted)

    async def backfill(self, plan_ids: Sequence[str]) -> list[Backfilled]:
        """Publish the invariant_enforced decisions these plans lack (`Reconciler.backfill`)."""
        return await self._reconciler.backfill(plan_ids)

    def backfill_all(self, page_size: int = BACKFILL_PAGE) -> AsyncIterator[list[Backfilled]]:
        """`backfill` over every plan with a root, a page of roots at a time."""
        return self._reconciler.backfill_all(page_size)
