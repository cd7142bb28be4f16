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
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanStatus
from contracts.decisions.subjects import recorded
from contracts.decisions.types import DecisionType
from contracts.invariants import subjects
from contracts.invariants.blocking import ReconciliationBlocked
from contracts.invariants.errors import (
    DuplicateInvariant,
    InvalidInvariant,
    ViolationAlreadyResolved,
    ViolationConflict,
)
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.precedence import effective_invariants
from contracts.invariants.reconciliation import enforced_decisions, wire_body
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import (
    ViolationEvent,
    ViolationEventType,
    ViolationRejected,
)
from contracts.recording.events import DecisionPersisted
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from services import outbox
from services.ports.invariants import InvariantRecords, InvariantStorePort, ViolationRecords
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords, DecisionRecords, OutboxRecords, PlanRecords
from store.errors import InvariantNotFound, ViolationNotFound

log = logging.getLogger(__name__)

__all__ = [
    "DuplicateInvariant", "InvalidInvariant", "InvariantNotFound", "InvariantService",
    "ReconciliationBlocked", "ViolationAlreadyResolved", "ViolationConflict",
    "ViolationNotFound",
]


def violation_event(kind: ViolationEventType, invariant_name: str | None
                    ) -> Callable[[InvariantViolation, bool], OutgoingEvent]:
    """The outbox entry announcing a change, built inside the change's transaction (which
    is where the plan's blocked state after it is known)."""
    def build(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
        e = ViolationEvent(event_type=kind, violation=v, invariant_name=invariant_name,
                           plan_blocked=blocked)
        return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)
    return build


BACKFILL_PAGE = 200
"""Roots read per page by `backfill_all`."""


@dataclass(frozen=True)
class Backfilled:
    """What a back-fill did for one plan: the decisions it published, or why none."""

    plan_id: str
    published: list[Decision] = field(default_factory=list)
    skipped: str | None = None


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

    @classmethod
    def from_store(cls, store: InvariantStorePort,
                   publisher: EventPublisher) -> InvariantService:
        """Over a store that holds every repository (store.invariant_store.InvariantStore
        for MongoDB: `InvariantService.from_store(InvariantStore.open(db), publisher)`)."""
        return cls(publisher, invariants=store.invariants, violations=store.violations,
                   decisions=store.decisions, plans=store.plans, outbox=store.outbox,
                   dead_letters=store.dead_letters)

    # --- invariants ------------------------------------------------------------------

    async def add_invariant(self, name: str, description: str,
                            scope: InvariantScope = InvariantScope.GLOBAL,
                            scope_target: str | None = None) -> Invariant:
        """Store a new invariant. InvalidInvariant if the model refuses it (the message
        says why); DuplicateInvariant if that name exists at that scope and target."""
        try:
            inv = Invariant(name=name, description=description, scope=scope,
                            scope_target=scope_target, created_at=self._clock())
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

    async def report_violation(self, violation: InvariantViolation) -> InvariantViolation:
        """Store a report and announce it (INVARIANT_VIOLATED) exactly once; reporting the
        same violation again stores and announces nothing new. InvariantNotFound if it
        names no invariant; ViolationConflict if its ID was reported with other content."""
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

    async def resolve_violation(self, violation_id: str, resolved_by: str) -> InvariantViolation:
        """Resolve and announce it (INVARIANT_VIOLATION_RESOLVED) exactly once; the plan is
        unblocked when no unresolved error violation remains. ViolationNotFound for an
        unknown ID, ViolationAlreadyResolved when it was resolved before."""
        if not resolved_by.strip():
            raise ValueError("resolved_by names who resolved the violation; it is blank")
        held = await self._violations.require(violation_id)
        inv = await self._invariants.get(held.invariant_id)
        done = await self._violations.resolve(
            violation_id, resolved_by.strip(), self._clock(),
            violation_event(ViolationEventType.INVARIANT_VIOLATION_RESOLVED,
                        inv.name if inv else None))
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
        now = self._clock()
        letter = DeadLetter.of_message(
            id=dead_letter_id(subjects.INVARIANTS_STREAM, stream_sequence), subject=subject,
            headers=headers, data=data, plan_id=unreadable.plan_id, decision_id=None,
            errors=unreadable.violations, rejected_at=now, delivered=delivered)
        await self._dead_letters.keep([letter])
        body = ViolationRejected(
            dead_letter_id=letter.id, subject=subject, plan_id=unreadable.plan_id,
            violation_id=unreadable.message_id, errors=letter.errors, rejected_at=now)
        await self._publisher.publish_all([OutgoingEvent(
            subjects.rejected(unreadable.plan_id), body.model_dump_json().encode(),
            subjects.rejected_msg_id(stream_sequence))])
        log.warning("rejected violation report %s on %s: %s", letter.id, subject,
                    unreadable.reason)
        return letter

    # --- reconciliation ----------------------------------------------------------------

    async def reconcile(self, persisted: Sequence[DecisionPersisted]) -> list[Decision]:
        """For each new plan root among `persisted`, publish one invariant_enforced decision
        per effective invariant to decisions.recorded.<plan_id> (Nats-Msg-Id: its
        decision_id), and wait for JetStream to store them. The recorder records them like
        any agent's; their IDs and content are derived from root and invariant, so doing
        this twice for a root records nothing new."""
        root_ids = [e.decision_id for e in persisted
                    if e.decision_type is DecisionType.PROMPT_DEFINITION]
        if not root_ids:
            return []
        roots = [r for r in (await self._decisions.get_many(root_ids)).values()
                 if r.is_root and not r.is_correction]
        out = await self._enforced(roots)
        await self._publisher.publish_all([
            OutgoingEvent(recorded(d.plan_id), wire_body(d), d.decision_id) for d in out])
        return out

    async def _enforced(self, roots: Sequence[Decision]) -> list[Decision]:
        """The invariant_enforced decisions of these roots' plans, from the invariants in
        force now: their own, and the PLAN ones of their ancestor plans (one read of the
        parent links, one of the candidate invariants)."""
        if not roots:
            return []
        ancestors = await self._plans.ancestors(r.plan_id for r in roots)
        family = [p for r in roots for p in (r.plan_id, *ancestors.get(r.plan_id, ()))]
        inputs = await self._invariants.inputs_for(
            family, [r.project for r in roots if r.project],
            [r.action_template for r in roots if r.action_template])
        out: list[Decision] = []
        for root in roots:
            out += enforced_decisions(root, effective_invariants(
                root.plan_id, root.project, root.action_template, inputs,
                ancestors.get(root.plan_id, ())))
        return out

    # --- back-fill -------------------------------------------------------------------

    async def backfill(self, plan_ids: Sequence[str]) -> list[Backfilled]:
        """Publish the invariant_enforced decisions these plans lack (one per plan, in the
        order given), through the recorder like the reconciler's. Idempotent: the IDs are
        derived from root and invariant, and only those not stored are published."""
        wanted = list(dict.fromkeys(p.upper() for p in plan_ids))
        roots = await self._decisions.roots_of(wanted)
        done = {b.plan_id: b for b in await self._backfill(list(roots.values()))}
        return [done.get(p) or Backfilled(p, [], "no root prompt_definition recorded")
                for p in wanted]

    async def backfill_all(self, page_size: int = BACKFILL_PAGE
                           ) -> AsyncIterator[list[Backfilled]]:
        """`backfill` over every plan with a root, a page of roots at a time (in decision
        ID order, so a plan started during the run is either in a page or reconciled by
        the reconciler)."""
        after: str | None = None
        while True:
            roots = await self._decisions.roots_page(after, page_size)
            if not roots:
                return
            yield await self._backfill(roots)
            after = roots[-1].decision_id

    async def _backfill(self, roots: Sequence[Decision]) -> list[Backfilled]:
        statuses = await self._plans.statuses(r.plan_id for r in roots)
        live: list[Decision] = []
        out: dict[str, Backfilled] = {}
        for r in roots:
            if r.superseded_by is not None:
                out[r.plan_id] = Backfilled(r.plan_id, [], f"its root is superseded by "
                                            f"{r.superseded_by}")
            elif statuses.get(r.plan_id) is PlanStatus.ROLLED_BACK:
                out[r.plan_id] = Backfilled(r.plan_id, [], "the plan is rolled back")
            else:
                live.append(r)
        enforced = await self._enforced(live)
        stored = await self._decisions.get_many(d.decision_id for d in enforced)
        missing = [d for d in enforced if d.decision_id not in stored]
        await self._publisher.publish_all([
            OutgoingEvent(recorded(d.plan_id), wire_body(d), d.decision_id) for d in missing])
        for r in live:
            out[r.plan_id] = Backfilled(r.plan_id, [d for d in missing
                                                    if d.plan_id == r.plan_id])
        return [out[r.plan_id] for r in roots]
